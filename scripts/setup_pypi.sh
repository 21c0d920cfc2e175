#!/usr/bin/env bash
# The FlashInfer-Bench packages from PyPI (docs/flashinfer.md, "Packages"): torch (CPU use: fp16
# matmul and float8 dtypes for the real definitions' references), flashinfer-bench (its data
# models are the authority for every definition, workload, solution and trace) and triton,
# installed into a virtual environment over the embedded interpreter, created with
# --system-site-packages so Debian's NumPy, matplotlib, ... stay visible. Everything else comes
# from Debian (scripts/setup.sh). With ACCELOPT_VENV=$PWD/.venv the host and its workers put this
# environment's site-packages on the embedded interpreter's sys.path at start-up.
#
#   scripts/setup_pypi.sh [PYTHON]          # default /usr/bin/python3.11; venv in ./.venv
#   ACCEL_VENV=/opt/fib-venv scripts/setup_pypi.sh
#   scripts/setup.sh                        # runs this script too (SETUP_PYPI=0 skips it)
#
# PyPI's x86_64 torch wheels depend on the CUDA runtime wheels (nvidia-*, about 3 GB); there is
# no CPU-only torch on PyPI itself (the CPU wheels live on download.pytorch.org). They are kept:
# the same environment then runs Triton and CUDA solutions on a GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-/usr/bin/python3.11}"
VENV="${ACCEL_VENV:-$PWD/.venv}"
if [[ "${SETUP_PYPI:-1}" == 0 ]]; then echo "setup_pypi: skipped (SETUP_PYPI=0)"; exit 0; fi
# Versions known to work together (flashinfer-bench 0.1.2 needs torch >= 2.x; fp16 addmm on CPU).
PACKAGES=("torch==${TORCH_VERSION:-2.9.1}" "flashinfer-bench==0.1.2" "triton")
start=$(date +%s)
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PY" -m venv --system-site-packages "$VENV"
fi
# The host is compiled against the system's NumPy (its C API): pin it so that nothing replaces it.
constraints="$VENV/constraints.txt"
"$PY" -c 'import numpy; print("numpy==" + numpy.__version__)' > "$constraints"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -c "$constraints" "${PACKAGES[@]}"
"$VENV/bin/python" - <<'PY'
import torch, flashinfer_bench, triton, numpy
a = torch.ones(4, 4, dtype=torch.float16)
assert (a @ a).dtype == torch.float16 and hasattr(torch, "float8_e4m3fn")
print("setup_pypi: torch", torch.__version__, "flashinfer-bench", getattr(flashinfer_bench, "__version__", "?"),
      "triton", triton.__version__, "numpy", numpy.__version__, "from", numpy.__file__)
PY
echo "setup_pypi: $VENV ready in $(( $(date +%s) - start )) s, $(du -sh "$VENV" | cut -f1)"

#!/usr/bin/env bash
# Installs the packages accelopt-host needs (Debian 12, or Ubuntu 22.04/24.04 such as the
# Neuron DLAMI), builds it, and links `accelopt-host` into /usr/local/bin (when writable).
# Safe to re-run; needs root or sudo only to install missing packages.
#
#   scripts/setup.sh            # Release-ish build in ./build
#   BUILD_DIR=out scripts/setup.sh
#   ACCEL_PYTHON=/opt/aws_neuronx_venv_pytorch_2_x/bin/python3 scripts/setup.sh
#   SETUP_DRY_RUN=1 scripts/setup.sh   # print the interpreter and packages, change nothing
#
# The embedded Python: $ACCEL_PYTHON, else the active virtual environment's, else the newest
# Neuron DLAMI environment /opt/aws_neuronx_venv_* (its NumPy and the Neuron SDK), else
# /usr/bin/python3.11 (Debian). Amazon Linux is not supported by this script: docs/trainium.md
# says what to install there.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
DRY_RUN="${SETUP_DRY_RUN:-0}"

OS_RELEASE="${SETUP_OS_RELEASE:-/etc/os-release}"  # tests give another file
OS_ID=unknown
[[ -r "$OS_RELEASE" ]] && OS_ID=$(. "$OS_RELEASE" && echo "${ID:-unknown}")
case "$OS_ID" in
  debian|ubuntu) ;;
  *)
    echo "setup: $OS_ID is not Debian or Ubuntu; install the libraries of docs/trainium.md" \
         "('Other distributions') and run the cmake lines printed there" >&2
    exit 2 ;;
esac

PY="${ACCEL_PYTHON:-}"
if [[ -z "$PY" && -n "${VIRTUAL_ENV:-}" ]]; then PY="$VIRTUAL_ENV/bin/python3"; fi
if [[ -z "$PY" ]]; then
  venv=$(ls -d /opt/aws_neuronx_venv_* 2>/dev/null | sort -V | tail -1 || true)
  [[ -n "$venv" && -x "$venv/bin/python3" ]] && PY="$venv/bin/python3"
fi
[[ -z "$PY" && "$OS_ID" == debian ]] && PY=/usr/bin/python3.11
[[ -z "$PY" ]] && PY=/usr/bin/python3

PACKAGES=(
  build-essential cmake pkg-config git
  pybind11-dev libopenblas0-pthread
  liblua5.4-dev libyaml-cpp-dev libspdlog-dev libfmt-dev catch2 nlohmann-json3-dev
  libcurl4-openssl-dev libcli11-dev libsqlite3-dev libsqlitecpp-dev
  libkainjow-mustache-dev libcpp-httplib-dev libssl-dev libseccomp-dev
  libboost-dev                  # header-only Boost.Math: the speedup interval (accelopt/sdk/speedup.hpp)
  python3-matplotlib            # report charts (docs/reports.md)
  python3-jsonschema            # the test suite checks every host call against accelopt.api's schemas
  slurm-wlm munge               # the one-node cluster of scripts/slurm-local.sh (docs/scale-out.md)
)
if [[ "$OS_ID" == debian ]]; then
  PACKAGES+=(
    chromium       # only for the report screenshot test (Ubuntu's chromium is a snap: left out)
    python3-torch  # CPU torch: FlashInfer-Bench references (docs/flashinfer.md); not packaged on Ubuntu
  )
fi
# The embedded interpreter's headers (python3.X-dev), and NumPy unless the interpreter is a
# virtual environment's (the DLAMI's holds its own NumPy).
if [[ -x "$PY" ]]; then
  PACKAGES+=("$("$PY" -c 'import sys; print("python%d.%d-dev" % sys.version_info[:2])')")
  "$PY" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)' || PACKAGES+=(python3-numpy)
else
  [[ "$PY" == /usr/bin/python3.11 ]] && PACKAGES+=(python3.11 python3.11-dev python3-numpy)
fi

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
echo "setup: $OS_ID; embedded Python $PY"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
if [[ "$DRY_RUN" == 1 ]]; then
  echo "setup: packages: ${PACKAGES[*]}"
  echo "setup: would install: ${missing[*]:-nothing}"
  exit 0
fi
if ((${#missing[@]})); then
  if [[ -n "$SUDO" ]] && ! sudo -n true 2>/dev/null; then
    echo "setup: not root and no password-less sudo; run as an administrator, then re-run this script:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  $SUDO apt-get update -qq
  available=()
  for package in "${missing[@]}"; do
    if apt-cache show "$package" >/dev/null 2>&1; then available+=("$package")
    else echo "setup: $package is not in this distribution's archive; skipped (see docs/trainium.md)"; fi
  done
  if ((${#available[@]})); then
    echo "setup: installing ${available[*]}"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${available[@]}"
  fi
fi
"$PY" -c 'import numpy' 2>/dev/null || { echo "setup: $PY cannot import numpy; install it in that environment" >&2; exit 1; }

# NumPy must use OpenBLAS (a 4096x5120x12288 fp32 matmul: 94 s with the
# reference BLAS, 2.5 s with OpenBLAS on our 2-core machines).
if command -v update-alternatives >/dev/null; then
  blas=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | head -1 || true)
  [[ -n "$blas" ]] && ${SUDO:+$SUDO -n} update-alternatives --set libblas.so.3-x86_64-linux-gnu "$blas" >/dev/null 2>&1 || true
  lapack=$(update-alternatives --list liblapack.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | head -1 || true)
  [[ -n "$lapack" ]] && ${SUDO:+$SUDO -n} update-alternatives --set liblapack.so.3-x86_64-linux-gnu "$lapack" >/dev/null 2>&1 || true
fi

# torch, flashinfer-bench, triton from PyPI into ./.venv (docs/flashinfer.md "Packages (PyPI)"):
# about 10 min and 8.3 GB on a fresh machine; SETUP_PYPI=0 skips it. Without PyPI the rest of
# the set-up goes on: the FlashInfer path then uses Debian's torch 1.13 and the package tests
# say "not checked".
if [[ "${SETUP_PYPI:-1}" != 0 ]]; then
  scripts/setup_pypi.sh "$PY" || echo "setup: warning: the PyPI environment (./.venv) was not built; see above"
fi

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACCEL_PYTHON="$PY" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"

build_path=$(cd "$BUILD_DIR" && pwd)  # BUILD_DIR may be relative or absolute
if [[ -w /usr/local/bin ]]; then
  ln -sf "$build_path/accelopt-host" /usr/local/bin/accelopt-host
  echo "setup: accelopt-host -> $build_path/accelopt-host"
else
  echo "setup: add $build_path to PATH to call accelopt-host"
fi

# The emulator's neuron-profile stand-in (docs/nki-emulator.md, "Running the peers' harnesses
# unmodified") goes to $BUILD_DIR/emu-bin, and to /usr/local/bin only where no real
# neuron-profile is installed; it hands real NEFFs to the next neuron-profile on PATH anyway.
mkdir -p "$BUILD_DIR/emu-bin"
ln -sf "$PWD/scripts/neuron-profile" "$BUILD_DIR/emu-bin/neuron-profile"
if ! command -v neuron-profile >/dev/null 2>&1 && [[ ! -x /opt/aws/neuron/bin/neuron-profile && -w /usr/local/bin ]]; then
  ln -sf "$PWD/scripts/neuron-profile" /usr/local/bin/neuron-profile
  echo "setup: neuron-profile (emulator stand-in) -> $PWD/scripts/neuron-profile"
else
  echo "setup: emulator neuron-profile stand-in in $build_path/emu-bin (prepend it to PATH for AccelOpt's harness)"
fi

"""Which GPUs the workers may use: a configured list or ``nvidia-smi``.

One worker per GPU, pinned with ``CUDA_VISIBLE_DEVICES`` (docs/scale-out.md),
for backends that run on GPUs.
"""
import os
import shutil
import subprocess

from .neuron_cores import parse_core_list

NVIDIA_SMI_TIMEOUT_S = 60


def parse_nvidia_smi(text):
    """GPU indices from ``nvidia-smi --query-gpu=index --format=csv,noheader`` text (one per line).

    Raises ValueError when a line is not an index or no GPU is listed.
    """
    indices = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if not line.isdigit():
            raise ValueError(f"not a GPU index in nvidia-smi output: {line[:80]!r}")
        indices.append(int(line))
    if not indices:
        raise ValueError("nvidia-smi lists no GPU")
    return sorted(set(indices))


def discover(configured=None):
    """The GPUs to use: {"gpus": [int], "source": str}.

    ``configured``: "0-3" / "0,2" (from --gpus or ACCELOPT_GPUS) is used as
    given; "auto" asks ``nvidia-smi``. Raises ValueError for a malformed
    list and RuntimeError when nvidia-smi is missing or fails.
    """
    configured = configured or os.environ.get("ACCELOPT_GPUS") or "auto"
    if configured != "auto":
        return {"gpus": parse_core_list(configured), "source": f"configured ({configured})"}
    executable = shutil.which("nvidia-smi")
    if executable is None:
        raise RuntimeError("nvidia-smi not found and no GPU list given (--gpus 0-3)")
    try:
        proc = subprocess.run([executable, "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"nvidia-smi ran past {NVIDIA_SMI_TIMEOUT_S} s") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"nvidia-smi failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    try:
        return {"gpus": parse_nvidia_smi(proc.stdout), "source": f"nvidia-smi ({executable})"}
    except ValueError as exc:
        raise RuntimeError(str(exc)) from exc

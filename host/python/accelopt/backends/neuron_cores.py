"""Which NeuronCores the host may use: configured ranges or ``neuron-ls``.

One worker runs per NeuronCore, pinned with ``NEURON_RT_VISIBLE_CORES``
(as AccelOpt pins each profiling process; docs/trainium.md).
"""
import json
import os
import shutil
import subprocess

NEURON_LS_TIMEOUT_S = 60


def parse_core_list(text):
    """Parses "0-31", "0,2,4-7" or "3" into a sorted list of distinct core ids (ints >= 0).

    Raises ValueError on anything else (empty text, negative or reversed ranges).
    """
    cores = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"empty entry in NeuronCore list {text!r}")
        low, sep, high = part.partition("-")
        try:
            first, last = int(low), int(high) if sep else int(low)
        except ValueError as exc:
            raise ValueError(f"not a NeuronCore id or range: {part!r} (use e.g. 0-31 or 0,2,4-7)") from exc
        if first < 0 or last < first:
            raise ValueError(f"bad NeuronCore range {part!r}")
        cores.update(range(first, last + 1))
    return sorted(cores)


def parse_neuron_ls(text):
    """Core ids from ``neuron-ls --json-output`` text.

    The output lists devices, each with ``neuron_device`` (index) and
    ``nc_count`` (NeuronCores on it, as the tool reports them); cores are numbered across
    devices in device order. Accepts the list itself or an object holding it
    under "neuron_devices". Raises ValueError when no device is listed.
    """
    data = json.loads(text)
    devices = data.get("neuron_devices") if isinstance(data, dict) else data
    if not isinstance(devices, list) or not devices:
        raise ValueError("neuron-ls lists no Neuron device")
    ordered = sorted(devices, key=lambda d: int(d.get("neuron_device", 0)) if isinstance(d, dict) else 0)
    cores, first = [], 0
    for device in ordered:
        if not isinstance(device, dict) or not isinstance(device.get("nc_count"), int) or device["nc_count"] < 1:
            raise ValueError(f"neuron-ls device entry without a positive nc_count: {str(device)[:120]}")
        cores.extend(range(first, first + device["nc_count"]))
        first += device["nc_count"]
    return cores


def discover(configured=None):
    """The NeuronCores to use: {"cores": [int], "source": str}.

    ``configured`` (e.g. "0-31", from --neuron-cores or
    ACCELOPT_NEURON_CORES) wins; otherwise ``neuron-ls --json-output`` is
    asked (PATH, then the Neuron tree's bin folder). Raises ValueError for
    a malformed list and RuntimeError when neuron-ls is missing or fails.
    """
    configured = configured or os.environ.get("ACCELOPT_NEURON_CORES")
    if configured:
        return {"cores": parse_core_list(configured), "source": f"configured ({configured})"}
    root = os.environ.get("ACCELOPT_NEURON_ROOT", "/opt/aws/neuron")
    executable = shutil.which("neuron-ls", path=os.environ.get("PATH", os.defpath) + os.pathsep +
                              os.path.join(root, "bin"))
    if executable is None:
        raise RuntimeError("neuron-ls not found (install aws-neuronx-tools) and no --neuron-cores given")
    try:
        proc = subprocess.run([executable, "--json-output"], capture_output=True, text=True,
                              timeout=NEURON_LS_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"neuron-ls ran past {NEURON_LS_TIMEOUT_S} s") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"neuron-ls failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    try:
        cores = parse_neuron_ls(proc.stdout)
    except (ValueError, json.JSONDecodeError) as exc:
        raise RuntimeError(f"cannot read neuron-ls output: {exc}") from exc
    return {"cores": cores, "source": f"neuron-ls ({executable})"}

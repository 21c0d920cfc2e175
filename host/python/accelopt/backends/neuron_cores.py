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
    """Core ids from ``neuron-ls --json-output`` text, every device's, busy or not (read_listing
    at the listing's own LNC). Raises ValueError when no device is listed."""
    return read_listing(text, None, lnc=None, skip_busy=False)["cores"]


def parse_header(text):
    """{"instance_type", "logical_neuroncore_config"} from plain ``neuron-ls`` output, whose
    first lines are ``instance-type: trn2n.48xlarge``, ``instance-id: ...`` and on trn2
    ``logical-neuroncore-config: 2`` (neuron-ls user guide, SDK 2.28); missing keys are None."""
    found = {"instance_type": None, "logical_neuroncore_config": None}
    for line in (text or "").splitlines()[:8]:
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "instance-type" and value:
            found["instance_type"] = value
        elif key == "logical-neuroncore-config" and value.isdigit():
            found["logical_neuroncore_config"] = int(value)
    return found


def family_of(instance_type):
    """"trn1" or "trn2" for an instance type such as trn1.32xlarge or trn2n.48xlarge; else None."""
    name = (instance_type or "").lower().split(".")[0]
    if name.endswith("n"):
        name = name[:-1]
    return name if name in ("trn1", "trn2") else None


def _device_cores(device, listed_lnc, lnc):
    """The device's core ids at LNC ``lnc``, from its ``neuroncore_ids`` at the listing's LNC.

    NeuronCore ids run across devices in order (nrt-configurable-parameters: 0 to devices x
    cores - 1), so logical core c of a listing at LNC L spans physical cores c*L .. c*L+L-1,
    which are cores c*L/lnc ... at LNC ``lnc``."""
    ids = device.get("neuroncore_ids")
    count = device.get("nc_count")
    if not isinstance(ids, list) or not all(isinstance(i, int) and i >= 0 for i in ids) or not ids:
        raise ValueError(f"neuron-ls device entry without neuroncore_ids: {str(device)[:160]}")
    if isinstance(count, int) and count != len(ids):
        raise ValueError(f"neuron-ls device {device.get('neuron_device')}: nc_count {count} but "
                         f"{len(ids)} neuroncore_ids")
    if lnc is None or lnc == listed_lnc:
        return list(ids)
    physical = sorted(p for c in ids for p in range(c * listed_lnc, (c + 1) * listed_lnc))
    return sorted({p // lnc for p in physical})


def read_listing(json_text, header_text=None, lnc=1, skip_busy=True):
    """What the host may use, from ``neuron-ls --json-output`` (and plain ``neuron-ls``'s header).

    The documented fields (neuron-ls user guide, SDK 2.28): a list of devices with
    ``neuron_device``, ``nc_count``, ``neuroncore_ids``, ``logical_neuroncore_config``
    (trn2 only) and ``neuron_processes`` ({pid, command, neuron_runtime_version}); an
    object holding the list under "neuron_devices" is accepted too. ``lnc``: the logical
    NeuronCore size the workers run with (None: the listing's own). A device with a process
    on it is busy: the runtime reserves a core for one process only (nrt-configurable-parameters),
    and the listing does not say which of the device's cores the process holds, so none is
    handed out (``skip_busy``).

    Returns {"cores": [usable ids at ``lnc``], "device_of": {core: device}, "busy":
    [{"device", "cores", "processes"}], "devices": count, "instance_type", "family",
    "listed_lnc"}. Raises ValueError when nothing is listed or every device is busy.
    """
    data = json.loads(json_text)
    devices = data.get("neuron_devices") if isinstance(data, dict) else data
    if not isinstance(devices, list) or not devices:
        raise ValueError("neuron-ls lists no Neuron device")
    header = parse_header(header_text)
    if not all(isinstance(d, dict) for d in devices):
        raise ValueError("neuron-ls device entries must be objects")
    ordered = sorted(devices, key=lambda d: int(d.get("neuron_device", 0)))
    cores, device_of, busy, first = [], {}, [], 0
    for device in ordered:
        listed = device.get("logical_neuroncore_config") or header["logical_neuroncore_config"] or 1
        if "neuroncore_ids" not in device:  # an older listing: number the cores across devices
            if not isinstance(device.get("nc_count"), int) or device["nc_count"] < 1:
                raise ValueError(f"neuron-ls device entry without a positive nc_count: {str(device)[:120]}")
            device = dict(device, neuroncore_ids=list(range(first, first + device["nc_count"])))
            first += device["nc_count"]
        ids = _device_cores(device, int(listed), lnc)
        index = int(device.get("neuron_device", 0))
        processes = [p for p in device.get("neuron_processes") or [] if isinstance(p, dict)]
        if processes and skip_busy:
            busy.append({"device": index, "cores": ids,
                         "processes": [{"pid": p.get("pid"), "command": p.get("command")} for p in processes]})
            continue
        cores.extend(ids)
        device_of.update({core: index for core in ids})
    family = family_of(header["instance_type"])
    if family is None:  # only trn2 devices report a logical NeuronCore config
        family = "trn2" if any("logical_neuroncore_config" in d for d in ordered) else "trn1"
    if not cores:
        held = "; ".join(f"device {b['device']}: " + ", ".join(f"pid {p['pid']} ({p['command']})"
                                                                  for p in b["processes"]) for b in busy)
        raise ValueError(f"every Neuron device is in use by another process ({held}); stop those processes "
                         "or name free cores with --neuron-cores")
    return {"cores": sorted(cores), "device_of": device_of, "busy": busy, "devices": len(ordered),
            "instance_type": header["instance_type"], "family": family,
            "listed_lnc": header["logical_neuroncore_config"]}


def neuron_ls_executable():
    """Path of ``neuron-ls`` (PATH, then the Neuron tree's bin folder), or None."""
    root = os.environ.get("ACCELOPT_NEURON_ROOT", "/opt/aws/neuron")
    return shutil.which("neuron-ls", path=os.environ.get("PATH", os.defpath) + os.pathsep + os.path.join(root, "bin"))


def _neuron_ls(executable, args):
    try:
        proc = subprocess.run([executable] + args, capture_output=True, text=True,
                              timeout=NEURON_LS_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"neuron-ls ran past {NEURON_LS_TIMEOUT_S} s") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"neuron-ls {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout


def listing(lnc=None):
    """read_listing of this host's ``neuron-ls`` (JSON and, for the instance type, the plain
    header; the JSON carries no instance type); ``lnc`` None: the one the workers use on this
    instance (neuron.lnc_for). Raises RuntimeError when neuron-ls is missing or fails,
    ValueError for what read_listing refuses."""
    executable = neuron_ls_executable()
    if executable is None:
        raise RuntimeError("neuron-ls not found (install aws-neuronx-tools) and no --neuron-cores given")
    text = _neuron_ls(executable, ["--json-output"])
    try:
        header = _neuron_ls(executable, [])
    except RuntimeError:
        header = None  # the JSON alone still lists the cores
    try:
        if lnc is None:
            from .neuron import lnc_for
            probe = read_listing(text, header, lnc=None, skip_busy=False)
            lnc = lnc_for(probe["family"])
        found = read_listing(text, header, lnc=lnc)
    except json.JSONDecodeError as exc:
        raise RuntimeError(f"cannot read neuron-ls output: {exc}") from exc
    found["executable"], found["lnc"] = executable, lnc
    return found


def discover(configured=None, lnc=None):
    """The NeuronCores to use: {"cores": [int], "source": str, "busy": [...], "device_of": {core:
    device}, "instance_type", "family"}.

    ``configured`` (e.g. "0-31", from --neuron-cores or ACCELOPT_NEURON_CORES) wins (neuron-ls,
    where present, still maps them to devices); otherwise ``neuron-ls`` is asked (PATH, then
    the Neuron tree's bin folder) and devices in use by another process are left out. Raises
    ValueError for a malformed list and RuntimeError when neuron-ls is missing or fails or
    every device is busy.
    """
    configured = configured or os.environ.get("ACCELOPT_NEURON_CORES")
    if configured:
        cores = parse_core_list(configured)
        out = {"cores": cores, "source": f"configured ({configured})", "busy": [], "device_of": {},
               "instance_type": None, "family": None}
        try:
            found = listing(lnc)
        except (RuntimeError, ValueError):
            return out
        out.update(instance_type=found["instance_type"], family=found["family"], busy=found["busy"],
                   device_of={c: found["device_of"][c] for c in cores if c in found["device_of"]})
        return out
    try:
        found = listing(lnc)
    except ValueError as exc:
        raise RuntimeError(f"cannot use neuron-ls's listing: {exc}") from exc
    source = f"neuron-ls ({found['executable']})"
    if found["busy"]:
        source += "; left out as in use: " + "; ".join(
            f"device {b['device']} (" + ", ".join(f"pid {p['pid']} {p['command']}" for p in b["processes"]) + ")"
            for b in found["busy"])
    return {"cores": found["cores"], "source": source, "busy": found["busy"], "device_of": found["device_of"],
            "instance_type": found["instance_type"], "family": found["family"]}

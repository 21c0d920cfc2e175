"""What a worker's sandbox allows on the neuron backend beyond the emulator's (docs/trainium.md).

The emulator profile lets a candidate read the Python installation and its
sys.path, write its scratch folder, and start no program. A hardware worker
must also compile (the SDK runs its compiler as child processes) and reach
the device, so its Landlock rules add:

* read: the interpreter's prefixes (a Neuron virtual environment), the
  Neuron tree (``/opt/aws/neuron`` or $ACCELOPT_NEURON_ROOT), ``/sys``
  (device discovery), the few ``/etc`` files the dynamic loader and the
  C library read;
* read/write: the worker's own device node ``/dev/neuronN`` (the device of the NeuronCore
  it is pinned to, $ACCELOPT_NEURON_DEVICE or neuron-ls's ``neuroncore_ids``), or every
  ``/dev/neuron*`` when that is not known;
* execute, and nothing else: the interpreter, a virtual environment's
  ``bin`` (never a system-wide one such as /usr/bin), the dynamic loader, the SDK package's own folder (its compiler binaries), the Neuron
  tree's ``bin`` and ``/bin/sh``.

Both profiles add $ACCELOPT_SANDBOX_READ / $ACCELOPT_SANDBOX_WRITE
(colon-separated folders), the documented way to grant what a particular
installation needs.
"""
import glob
import os
import sys

_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/nsswitch.conf", "/etc/passwd",
              "/etc/group", "/etc/localtime", "/etc/os-release", "/etc/hosts")


_LOADERS = ("/lib64/ld-linux*.so*", "/lib/ld-linux*.so*", "/lib/*/ld-linux*.so*", "/usr/lib/*/ld-linux*.so*",
            "/usr/lib64/ld-linux*.so*")


def _split(value):
    return [p for p in (value or "").split(":") if p]


def _existing(paths):
    out = []
    for path in paths:
        if path and os.path.exists(path) and path not in out:
            out.append(path)
    return out


def extra_paths(_info=None):
    """The user's additions for every profile: {"read": [...], "write": [...]} (existing folders only)."""
    return {"read": _existing(_split(os.environ.get("ACCELOPT_SANDBOX_READ"))),
            "write": _existing(_split(os.environ.get("ACCELOPT_SANDBOX_WRITE")))}


DEV_DIR = "/dev"


def _device_of_pinned_core():
    """The Neuron device holding the one NeuronCore this worker is pinned to
    (NEURON_RT_VISIBLE_CORES), from neuron-ls; None when that is not a single core or
    neuron-ls cannot tell."""
    text = os.environ.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if not text.isdigit():
        return None
    try:
        from ..backends import neuron_cores
        return neuron_cores.listing()["device_of"].get(int(text))
    except Exception:  # noqa: BLE001 - no listing: the caller falls back to every node
        return None


def device_nodes():
    """The /dev/neuron* nodes a worker may open: its own device's when known
    ($ACCELOPT_NEURON_DEVICE, else the device of its pinned core), else all of them
    (a worker then reaches devices it does not use; docs/trainium.md)."""
    nodes = sorted(glob.glob(os.path.join(DEV_DIR, "neuron*")))
    device = os.environ.get("ACCELOPT_NEURON_DEVICE", "").strip()
    if not device.isdigit():
        found = _device_of_pinned_core()
        device = str(found) if found is not None else ""
    if device.isdigit():
        own = os.path.join(DEV_DIR, f"neuron{int(device)}")
        if own in nodes:
            return [own]
    return nodes


def neuron_paths(sdk_location=None):
    """Landlock paths of the hardware profile: {"read", "write", "exec"} (lists of existing paths).

    ``sdk_location``: the SDK's module file or folder (backends.sdk), whose
    package folder may hold the compiler's executables. Never raises.
    """
    root = os.environ.get("ACCELOPT_NEURON_ROOT", "/opt/aws/neuron")
    prefixes = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    read = prefixes + [root, "/sys"] + list(_ETC_FILES)
    execute = [os.path.realpath(sys.executable) if sys.executable else "", sys.executable or "",
               os.path.join(root, "bin"), "/bin/sh", "/usr/bin/sh", os.path.realpath("/bin/sh")]
    # The kernel opens a program's ELF interpreter (the dynamic loader) for exec too.
    for pattern in _LOADERS:
        execute.extend(os.path.realpath(p) for p in glob.glob(pattern))
    if sys.prefix != sys.base_prefix:  # a virtual environment: its bin holds the SDK's console scripts
        execute.append(os.path.join(sys.prefix, "bin"))
    # Both namespaces' packages: SDK 2.28's nki drives neuronxcc's compiler.
    from ..backends.sdk import package_locations
    for location in [sdk_location] + package_locations():
        if location:
            package = location if os.path.isdir(location) else os.path.dirname(location)
            execute.append(package)
            read.append(package)
    extra = extra_paths()
    return {"read": _existing(read + extra["read"]),
            "write": _existing(device_nodes() + extra["write"]),
            "exec": _existing(execute)}

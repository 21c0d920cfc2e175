"""Finding the Neuron SDK in the configured Python environment (docs/trainium.md).

NKI lives in two namespaces: ``nki`` (Neuron SDK >= 2.28) and
``neuronxcc.nki`` (SDK <= 2.27, still present in later ones). Detection
looks on ``sys.path`` with the path finder and never imports the SDK (an
import of neuronxcc takes seconds), so an emulator registered in
``sys.modules`` under either name does not count.
"""
import importlib.machinery
import importlib.metadata
import os
import sys

# Distribution names whose version identifies each namespace's SDK, most specific first.
_DISTRIBUTIONS = {"nki": ("nki", "neuronx-cc"), "neuronxcc": ("neuronx-cc",)}
# (module searched on sys.path, NKI namespace kernels import) in preference order.
_NAMESPACES = (("nki", "nki"), ("neuronxcc", "neuronxcc.nki"))


def is_emulator_module(module):
    """True if ``module`` is the NKI emulator (or one of its aliases) rather than the Neuron SDK."""
    return bool(getattr(module, "__nki_emu__", False)) or "nki_emu" in (getattr(module, "__file__", "") or "") \
        or "nki_emu" in getattr(module, "__name__", "")


def _spec_location(name):
    module = sys.modules.get(name)
    if module is not None and not is_emulator_module(module):
        return getattr(module, "__file__", None) or name
    spec = importlib.machinery.PathFinder.find_spec(name)
    if spec is None:
        return None
    location = spec.origin or (list(spec.submodule_search_locations or []) or [None])[0]
    if location and "nki_emu" in location:
        return None
    return location or name


def _version(module, location):
    for dist in _DISTRIBUTIONS[module]:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - a broken metadata folder is not fatal
            continue
    # A package without distribution metadata (e.g. a folder on ACCELOPT_PYTHON_PATH).
    if location:
        package_dir = location if os.path.isdir(location) else os.path.dirname(location)
        version_file = os.path.join(package_dir, "version.py")
        if os.path.isfile(version_file):
            try:
                with open(version_file, encoding="utf-8") as handle:
                    for line in handle:
                        if line.startswith("__version__"):
                            return line.split("=", 1)[1].strip().strip("\"'")
            except OSError:
                pass
    return None


def package_locations():
    """Files or folders of every real Neuron SDK package found (``nki``, ``neuronxcc``), in that order."""
    found = []
    for module, _ in _NAMESPACES:
        try:
            location = _spec_location(module)
        except (ImportError, ValueError):
            location = None
        if location:
            found.append(location)
    return found


def sdk_info():
    """Describes the Neuron SDK importable in this interpreter.

    Returns {"available": bool, "namespace": "nki"|"neuronxcc.nki"|None,
    "module": top-level module name or None, "location": file/folder or
    None, "version": str or None, "reason": one sentence saying what was
    found and where}. Never raises.
    """
    for module, namespace in _NAMESPACES:
        try:
            location = _spec_location(module)
        except (ImportError, ValueError):
            location = None
        if location is None:
            continue
        version = _version(module, location)
        return {"available": True, "namespace": namespace, "module": module, "location": location,
                "version": version,
                "reason": f"the Neuron SDK ({namespace}{' ' + version if version else ''}) is importable "
                          f"from {location}"}
    return {"available": False, "namespace": None, "module": None, "location": None, "version": None,
            "reason": "no Neuron SDK is importable (neither 'nki' nor 'neuronxcc' on sys.path of "
                      f"{sys.executable or 'the embedded interpreter'}); using the NKI emulator"}

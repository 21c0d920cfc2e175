"""``accelopt-host doctor``: what the neuron backend finds on this machine and what it will do.

Run it first on a Trainium instance (docs/trainium.md). It asks the same functions the
profile and run commands use (backends.sdk, neuron_cores, neuron, sandbox.hardware_profile),
so what it prints is what they will do, and it never runs a kernel. ``diagnose`` returns
JSON; ``render`` turns that into the text the command prints.
"""
import glob
import os
import shutil
import sys

VENV_GLOB = "/opt/aws_neuronx_venv_*"


def _namespaces():
    """Both NKI namespaces: {"nki": {...}, "neuronxcc.nki": {...}} with location and version."""
    from . import sdk
    out = {}
    for module, namespace in sdk._NAMESPACES:  # noqa: SLF001 - same package
        try:
            location = sdk._spec_location(module)  # noqa: SLF001
        except (ImportError, ValueError):
            location = None
        out[namespace] = {"found": location is not None, "location": location,
                          "version": sdk._version(module, location) if location else None}  # noqa: SLF001
    return out


def _cores(configured):
    from . import neuron_cores
    try:
        found = neuron_cores.discover(configured)
    except (RuntimeError, ValueError) as exc:
        return {"error": str(exc)}
    found = dict(found)
    found["device_of"] = {str(k): v for k, v in (found.get("device_of") or {}).items()}
    return found


def _tool(name):
    root = os.environ.get("ACCELOPT_NEURON_ROOT", "/opt/aws/neuron")
    return shutil.which(name, path=os.environ.get("PATH", os.defpath) + os.pathsep + os.path.join(root, "bin"))


def diagnose(request=None):
    """Never raises. ``request``: {"neuron_cores"?: "0-31", "target"?: "auto"|"trn1"|"trn2"}.

    Returns {"python", "venvs", "sdk", "namespaces", "tools", "cores", "target",
    "target_source", "lnc", "compile_opt", "runtime_env", "timing_mode", "sandbox", "plan",
    "problems"}: every field as the profile/run commands would use it."""
    request = request if isinstance(request, dict) else {}
    from . import resolve_target
    from .neuron import compile_opts, lnc_for, timing_mode
    from .sdk import sdk_info
    out = {"python": {"executable": sys.executable, "version": sys.version.split()[0], "prefix": sys.prefix},
           "venvs": sorted(glob.glob(VENV_GLOB)), "problems": []}
    out["sdk"] = sdk_info()
    out["namespaces"] = _namespaces()
    out["tools"] = {name: _tool(name) for name in ("neuron-ls", "neuron-profile", "neuronx-cc")}
    for name in ("neuron-ls", "neuron-profile"):
        if out["tools"][name] is None:
            out["problems"].append(f"{name} not found on PATH or in {os.environ.get('ACCELOPT_NEURON_ROOT', '/opt/aws/neuron')}/bin "
                                   "(package aws-neuronx-tools)")
    if not out["sdk"]["available"]:
        out["problems"].append("no Neuron SDK importable: give --python-path with the DLAMI venv's site-packages "
                               "(docs/trainium.md), or the emulator is used")
    requested = request.get("target") or "auto"
    try:
        target = resolve_target(requested, "neuron")
    except ValueError as exc:
        out["problems"].append(str(exc))
        target = "trn1"
    out["target"] = target
    out["target_source"] = "asked" if requested != "auto" else "neuron-ls instance type (auto)"
    out["cores"] = _cores(request.get("neuron_cores"))
    if "error" in out["cores"]:
        out["problems"].append("NeuronCores: " + out["cores"]["error"])
    try:
        out["lnc"] = lnc_for(target)
        out["compile_opt"] = compile_opts(target)
        out["timing_mode"] = timing_mode()
    except ValueError as exc:
        out["problems"].append(str(exc))
        out.update(lnc=None, compile_opt=None, timing_mode=None)
    env = {"NEURON_RT_VISIBLE_CORES": "<the worker's core>", "NEURON_RT_NUM_CORES": "1"}
    if target == "trn2" and out["lnc"]:
        env["NEURON_LOGICAL_NC_CONFIG"] = str(out["lnc"])
    out["runtime_env"] = env
    from ..sandbox import hardware_profile
    paths = hardware_profile.neuron_paths(out["sdk"].get("location"))
    extra = hardware_profile.extra_paths()
    out["sandbox"] = {"read": paths["read"], "write": paths["write"], "exec": paths["exec"],
                      "user_exceptions": extra, "device_nodes": sorted(glob.glob("/dev/neuron*")),
                      "per_worker_device": "each worker may open only the /dev/neuronN of its own core's device "
                                           "(neuron-ls neuroncore_ids); every node when neuron-ls cannot tell"}
    cores = out["cores"].get("cores") or []
    out["plan"] = _plan(out, cores)
    return out


def _plan(out, cores):
    if not out["sdk"]["available"]:
        return ["backend auto uses the NKI emulator (estimates, not measurements); --backend neuron fails"]
    sdk = f"{out['sdk']['namespace']} {out['sdk']['version'] or ''}".strip()
    plan = [f"backend neuron ({sdk}); each kernel compiles through the namespace its own @jit decorator "
            "comes from (nki or neuronxcc.nki)"]
    if cores:
        busy = out["cores"].get("busy") or []
        plan.append(f"{len(cores)} worker(s), one per NeuronCore {cores[0]}..{cores[-1]}"
                    + (f"; {len(busy)} device(s) held by other processes left out" if busy else ""))
    plan.append(f"compile for {out['target']} with additional_compile_opt=\"{out['compile_opt']}\"; "
                "runtime env " + " ".join(f"{k}={v}" for k, v in out["runtime_env"].items()))
    if out["timing_mode"] == "capture":
        plan.append("timing: the worker compiles once per input set (baremetal has no run-a-saved-NEFF call "
                    "for NumPy inputs) and keeps the timed set's NEFF; the host times that one NEFF with "
                    "neuron-profile capture/view (2 warm-ups + 10 timed runs, up to 2 re-measured rounds), "
                    "with no further compile")
    else:
        plan.append("timing: AccelOpt's protocol (ACCELOPT_NEURON_TIMING=baremetal): every run compiles again; "
                    "raise --timeout for slow-compiling kernels")
    plan.append("a compile error (exception type or documented error code) goes to the fixer as compile_error; "
                "'NeuronCore(s) not available' is device_unavailable (the environment's fault, never a wrong "
                "kernel) and the call runs again on another core")
    return plan


def render(report):
    """The text ``accelopt-host doctor`` prints."""
    lines = []
    python = report["python"]
    lines.append(f"python      {python['executable'] or 'embedded'} {python['version']} (prefix {python['prefix']})")
    lines.append("DLAMI venvs " + (", ".join(report["venvs"]) or "none found under /opt/aws_neuronx_venv_*"))
    sdk = report["sdk"]
    lines.append(f"SDK         {sdk['reason']}")
    for namespace, info in report["namespaces"].items():
        state = f"{info['version'] or 'version ?'} at {info['location']}" if info["found"] else "not importable"
        lines.append(f"namespace   {namespace}: {state}")
    for name, path in report["tools"].items():
        lines.append(f"tool        {name}: {path or 'not found'}")
    cores = report["cores"]
    if "error" in cores:
        lines.append(f"cores       none: {cores['error']}")
    else:
        lines.append(f"cores       {cores.get('cores')} ({cores.get('source')}); instance "
                     f"{cores.get('instance_type') or '?'}")
        for held in cores.get("busy") or []:
            procs = ", ".join(f"pid {p.get('pid')} {p.get('command')}" for p in held.get("processes", []))
            lines.append(f"busy        device {held['device']} cores {held.get('cores')}: {procs}")
    lines.append(f"target      {report['target']} ({report['target_source']}); LNC {report['lnc']}")
    sandbox = report["sandbox"]
    lines.append("sandbox     device nodes: " + (", ".join(sandbox["device_nodes"]) or "none"))
    lines.append("sandbox     " + sandbox["per_worker_device"])
    lines.append("sandbox     exec allowed: " + ", ".join(sandbox["exec"]))
    user = sandbox["user_exceptions"]
    lines.append("sandbox     your exceptions (ACCELOPT_SANDBOX_READ/WRITE): read "
                 f"{user['read'] or 'none'}, write {user['write'] or 'none'}")
    lines.append("will do:")
    lines.extend("  - " + step for step in report["plan"])
    if report["problems"]:
        lines.append("problems:")
        lines.extend("  ! " + problem for problem in report["problems"])
    else:
        lines.append("problems:   none found")
    return "\n".join(lines) + "\n"


def doctor(request=None):
    """{"report": diagnose(request), "text": render(...)}, for the C++ command."""
    report = diagnose(request)
    return {"report": report, "text": render(report)}

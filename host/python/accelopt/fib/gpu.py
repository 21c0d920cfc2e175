"""FIB solutions that need a GPU, driven from the host (docs/flashinfer.md).

* :func:`run_cuda`: a cuda/cpp solution already built against the tvm-ffi
  shim (flashinfer/cuda_build.h) runs one process per trial of
  ``accelopt-fib-cuda-run`` (the CUDA driver API, loaded at run time); the
  inputs are the session's (:mod:`accelopt.fib.trusted`), written to files,
  and the outputs it writes back are judged here, after timing too.
* :func:`run_triton`: a triton solution runs in a subprocess of the GPU
  machine's own ``python3`` (:mod:`accelopt.fib.gpu_worker`), found by
  :func:`gpu_python`; the reference runs there too, for its GPU latency and
  outputs. Without such an interpreter nothing runs (``ran: false``).

The subprocesses are separate processes with a timeout; they are not the
seccomp/Landlock sandbox of the CPU workers (a GPU needs the driver's device
files and ioctls): like the neuron backend's hardware profile, this tier is
for solutions you are prepared to run on the GPU machine.
"""
import json
import os
import shutil
import subprocess
import tempfile

import torch

from . import tensors
from . import trusted as T

# DLPack (code, bits) of FIB's dtypes, as the shim's DLTensor carries them.
DLPACK = {"float32": (2, 32), "float16": (2, 16), "bfloat16": (4, 16), "float8_e4m3fn": (10, 8),
          "float8_e5m2": (12, 8), "float4_e2m1": (17, 4), "int64": (0, 64), "int32": (0, 32), "int16": (0, 16),
          "int8": (0, 8), "bool": (6, 8)}
_CARRIER = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_probe = None


def _session(baseline):
    return T.session(baseline)


def _write_tensor(value, path):
    flat = value.detach().contiguous().reshape(-1)
    with open(path, "wb") as handle:
        handle.write(flat.view(_CARRIER[flat.element_size()]).numpy().tobytes())


def _read_tensor(path, dtype_name, shape):
    dtype = tensors.torch_dtype(dtype_name)
    size = torch.empty((), dtype=dtype).element_size()
    with open(path, "rb") as handle:
        raw = bytearray(handle.read())
    flat = torch.frombuffer(raw, dtype=_CARRIER[size]) if raw else torch.empty(0, dtype=_CARRIER[size])
    return flat.view(dtype).reshape(tuple(shape or ()))


def _judge(session, trial, first, after, input_after, median_ms, log):
    """A trial verdict as accelopt.fib.trusted.finish_trial gives it."""
    drawn = session["trials"][trial]
    verdict = {"role": "solution", "trial": trial, "seed": drawn["seed"], "log": log}
    try:
        changed = [i for i, (before, now) in enumerate(zip(drawn["digests"], input_after))
                   if before and now is not None and now != before]
        if changed:
            raise T.Verdict(T.RUNTIME_ERROR, f"anti-cheat: the solution modified input {changed[0]}")
        tol = session["tolerance"]
        reference = drawn.get("gpu_reference") or drawn["reference"]
        a, r, m = T.judge(first, reference, session["outputs"], tol)
        if after is not None:
            try:
                a2, r2, m2 = T.judge(after, reference, session["outputs"], tol)
            except T.Verdict as v:
                raise T.Verdict(v.status, "outputs are checked after timing: " + v.message, v.errors) from None
            a, r, m = max(a, a2), max(r, r2), min(m, m2)
        verdict.update(status=T.PASSED, max_absolute_error=a, max_relative_error=r, matched_ratio=m,
                       median_ms=median_ms)
    except T.Verdict as v:
        verdict["status"] = v.status
        verdict["log"] = (log + "\n" if log else "") + v.message
        if v.errors is not None:
            verdict["max_absolute_error"], verdict["max_relative_error"], ratio = v.errors
            if ratio is not None:
                verdict["matched_ratio"] = ratio
    return T.json_safe(verdict)


def run_cuda(arg):
    """Every trial of a built cuda/cpp solution; {"verdicts": [...]} (see the module docstring).

    ``arg``: {"baseline", "trials", "runner", "library", "symbol", "dps",
    "timeout_s", "dir"}."""
    session = _session(arg["baseline"])
    if session is None:
        return {"verdicts": [{"status": T.RUNTIME_ERROR, "log": "unknown workload session"}]}
    if not arg.get("dps", True):
        return {"verdicts": [{"status": T.RUNTIME_ERROR,
                              "log": "value-returning tvm-ffi solutions are not supported by accelopt-host's shim "
                                     "(destination_passing_style must be true)"}]}
    verdicts = []
    specs = session["outputs"]
    for trial in range(int(arg.get("trials", 3))):
        folder = os.path.join(arg["dir"], f"trial{trial}")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        drawn = session["trials"][trial]
        args = []
        for i, value in enumerate(drawn["inputs"]):
            if isinstance(value, torch.Tensor):
                code, bits = DLPACK[tensors.dtype_name(value.dtype)]
                path = os.path.join(folder, f"in{i}.bin")
                _write_tensor(value, path)
                args.append({"kind": "tensor", "code": code, "bits": bits, "shape": list(value.shape), "file": path})
            elif isinstance(value, bool):
                args.append({"kind": "bool", "value": value})
            elif isinstance(value, int):
                args.append({"kind": "int", "value": value})
            else:
                args.append({"kind": "float", "value": float(value)})
        for spec in specs:
            code, bits = DLPACK[spec["dtype"]]
            args.append({"kind": "tensor", "code": code, "bits": bits, "shape": list(spec["shape"] or ()), "output": True})
        request = {"library": arg["library"], "symbol": arg["symbol"], "out_dir": folder, "args": args,
                   "timing": {"warmup": session["timing"]["warmup"], "iterations": session["timing"]["iterations"],
                              "flush": True}}
        with open(os.path.join(folder, "request.json"), "w") as handle:
            json.dump(request, handle)
        try:
            done = subprocess.run([arg["runner"], os.path.join(folder, "request.json")], capture_output=True,
                                  text=True, timeout=float(arg.get("timeout_s", 300)))
        except subprocess.TimeoutExpired:
            verdicts.append({"status": T.TIMEOUT, "trial": trial, "log": f"timeout after {arg.get('timeout_s')} s"})
            break
        lines = [line for line in done.stdout.splitlines() if line.strip().startswith("{")]
        reply = json.loads(lines[-1]) if lines else {"status": "runtime_error", "message": done.stderr[-4000:]}
        log = (done.stderr or "")[-48 * 1024:]
        if reply.get("status") == "no_device":
            return {"verdicts": [], "no_device": reply.get("message", "no CUDA device")}
        if reply.get("status") != "ok":
            verdicts.append({"status": T.RUNTIME_ERROR, "trial": trial, "log": (log + "\n" if log else "")
                             + reply.get("message", "")})
            break
        n_in = len(drawn["inputs"])
        first = [_read_tensor(os.path.join(folder, f"first_{n_in + k}.bin"), s["dtype"], s["shape"])
                 for k, s in enumerate(specs)]
        after = [_read_tensor(os.path.join(folder, f"after_{n_in + k}.bin"), s["dtype"], s["shape"])
                 for k, s in enumerate(specs)]
        input_after = []
        for i, value in enumerate(drawn["inputs"]):
            path = os.path.join(folder, f"input_after_{i}.bin")
            input_after.append(T.fib_inputs.digest(_read_tensor(path, tensors.dtype_name(value.dtype), value.shape))
                               if isinstance(value, torch.Tensor) and os.path.exists(path) else None)
        verdict = _judge(session, trial, first if len(first) > 1 else first[0], after if len(after) > 1 else after[0],
                         input_after, reply.get("median_ms"), log)
        if verdict.get("status") == T.PASSED:
            verdict["samples_ms"] = reply.get("samples_ms") or []  # every timed call (noise-aware speedups)
        verdicts.append(verdict)
        if verdict["status"] != T.PASSED:
            break
    return {"verdicts": verdicts}


def gpu_python(_arg=None):
    """The GPU machine's python3 with CUDA torch and triton: {"python", "hardware", "libs"} or {"reason"}.

    $ACCELOPT_FIB_GPU_PYTHON if set (then only it), else every ``python3`` on
    PATH (the host's own /usr/bin/python3.11 has CPU torch only); probed once
    per process, each candidate for at most 120 s."""
    global _probe
    if _probe is not None:
        return _probe
    candidates = [os.environ["ACCELOPT_FIB_GPU_PYTHON"]] if os.environ.get("ACCELOPT_FIB_GPU_PYTHON") else []
    for folder in os.environ.get("PATH", "").split(os.pathsep) if not candidates else []:
        path = os.path.join(folder, "python3")
        if folder and os.access(path, os.X_OK) and path not in candidates:
            candidates.append(path)
    code = ("import json, torch, triton\n"
            "ok = torch.cuda.is_available()\n"
            "print(json.dumps({'cuda': ok, 'name': torch.cuda.get_device_name() if ok else '',"
            " 'libs': {'torch': torch.__version__, 'triton': triton.__version__, 'cuda': str(torch.version.cuda)}}))")
    reasons = []
    for python in candidates:
        try:
            done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
            info = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
            info = None
        if info and info.get("cuda"):
            _probe = {"python": python, "hardware": info["name"], "libs": info["libs"]}
            return _probe
        reasons.append(f"{python}: " + ("no CUDA device" if info else "no torch with triton"))
    _probe = {"reason": "no GPU python with torch, triton and a CUDA device (" + ("; ".join(reasons) or "no python3 on PATH")
              + "; set ACCELOPT_FIB_GPU_PYTHON)"}
    return _probe


def _gpu_trial(python, session, trial, role, solution, dps, dps_default, timeout_s, timing_enabled):
    folder = tempfile.mkdtemp(prefix="fib-gpu-trial-")
    try:
        drawn = session["trials"][trial]
        specs = []
        for i, value in enumerate(drawn["inputs"]):
            if isinstance(value, torch.Tensor):
                path = os.path.join(folder, f"in{i}.bin")
                _write_tensor(value, path)
                specs.append({"file": path, "dtype": tensors.dtype_name(value.dtype), "shape": list(value.shape)})
            else:
                specs.append({"value": value})
        if role == "reference":
            sources, entry = [{"path": "main.py", "content": session["definition"]["reference"]}], "main.py::run"
        else:
            sources, entry = solution["sources"], solution["spec"]["entry_point"]
        request = {"role": role, "sources": sources, "entry": entry, "dps": False if role == "reference" else dps,
                   "dps_default": dps_default, "inputs": specs, "outputs": session["outputs"], "seed": drawn["seed"],
                   "timing": {"enabled": timing_enabled, "warmup": session["timing"]["warmup"],
                              "iterations": session["timing"]["iterations"]}, "out_dir": folder}
        with open(os.path.join(folder, "request.json"), "w") as handle:
            json.dump(request, handle)
        worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_worker.py")
        try:
            done = subprocess.run([python, worker, os.path.join(folder, "request.json")], capture_output=True,
                                  text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "message": f"timeout after {timeout_s} s"}, None, None, []
        lines = [line for line in done.stdout.splitlines() if line.strip().startswith("{")]
        reply = json.loads(lines[-1]) if lines else {"status": "runtime_error", "message": done.stderr[-4000:]}

        def outputs(prefix, described):
            if not described:
                return None
            values = [_read_tensor(os.path.join(folder, f"{prefix}{k}.bin"), tensors.dtype_name(
                getattr(torch, d["dtype"])) if d["dtype"] != "scalar" else session["outputs"][k]["dtype"], d["shape"])
                for k, d in enumerate(described)]
            return values if len(values) > 1 else values[0]

        first = outputs("first_", reply.get("first")) if reply.get("status") == "ok" else None
        after = outputs("after_", reply.get("after")) if reply.get("status") == "ok" else None
        input_after = []
        for i, value in enumerate(drawn["inputs"]):
            path = os.path.join(folder, f"input_after_{i}.bin")
            input_after.append(T.fib_inputs.digest(_read_tensor(path, tensors.dtype_name(value.dtype), value.shape))
                               if isinstance(value, torch.Tensor) and os.path.exists(path) else None)
        return reply, first, after, input_after
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_triton(arg):
    """Every trial of a triton solution in the GPU python; {"ran": bool, "reason"?, "verdicts",
    "reference_latency_ms", "hardware", "environment"}.

    ``arg``: {"baseline", "trials", "solution", "dps", "dps_default", "timeout_s", "profile_baseline"}."""
    found = gpu_python()
    if "python" not in found:
        return {"ran": False, "reason": found["reason"]}
    session = _session(arg["baseline"])
    if session is None:
        return {"ran": False, "reason": "unknown workload session"}
    timeout = float(arg.get("timeout_s", 300))
    trials = int(arg.get("trials", 3))
    reference_ms = []
    for trial in range(trials):
        reply, first, _after, _ = _gpu_trial(found["python"], session, trial, "reference", None, False, False, timeout,
                                             bool(arg.get("profile_baseline", True)))
        if reply.get("status") != "ok" or first is None:
            return {"ran": False, "reason": "the reference failed on the GPU: " + str(reply.get("message", ""))[:2000]}
        session["trials"][trial]["gpu_reference"] = T.normalize_outputs(first, session["outputs"])
        if reply.get("median_ms") is not None:
            reference_ms.append(reply["median_ms"])
    verdicts = []
    for trial in range(trials):
        reply, first, after, input_after = _gpu_trial(found["python"], session, trial, "solution", arg["solution"],
                                                      arg.get("dps"), arg.get("dps_default", True), timeout, True)
        log = reply.get("log", "")
        if reply.get("status") != "ok":
            status = {"compile_error": T.COMPILE_ERROR, "timeout": T.TIMEOUT}.get(reply.get("status"), T.RUNTIME_ERROR)
            verdicts.append({"status": status, "trial": trial, "log": (log + "\n" if log else "") + reply.get("message", "")})
            break
        verdict = _judge(session, trial, first, after, input_after, reply.get("median_ms"), log)
        if verdict.get("status") == T.PASSED:
            verdict["samples_ms"] = reply.get("samples_ms") or []  # every timed call (noise-aware speedups)
        verdicts.append(verdict)
        if verdict["status"] != T.PASSED:
            break
    return {"ran": True, "verdicts": verdicts, "hardware": found["hardware"],
            "reference_latency_ms": sum(reference_ms) / len(reference_ms) if reference_ms else 0.0,
            "environment": {"hardware": found["hardware"], "libs": found["libs"]}}

"""One trial of a FIB solution (or reference) on a CUDA GPU, run by the GPU
machine's own python3 (torch with CUDA, triton) as a subprocess of the host
(docs/flashinfer.md; flashinfer-facts §5.4 item 4).

Standalone on purpose: it imports only the standard library, torch and what
the solution imports, so it runs under an interpreter that is not the host's
(Python 3.12 with torch 2.x there, 3.11 with CPU torch in the host).

    python3 gpu_worker.py REQUEST.json

REQUEST: {"role", "sources", "entry", "dps", "dps_default", "inputs": [{"file",
"dtype", "shape"} | {"value"}], "outputs": [{"name", "shape", "dtype"}],
"seed", "timing": {"enabled", "warmup", "iterations"}, "out_dir"}. Writes
first_<i>.bin (the first call's outputs) and after_<i>.bin (the last timed
call's) and prints one JSON line: {"status": "ok", "median_ms", "dps",
"hardware", "libs"} or {"status": "compile_error"|"runtime_error", "message"}.
Timing: per call, CUDA events around it with the L2 (twice its size) zeroed
before it, FIB's cold-L2 protocol with the events fallback. As in the CPU
tier (accelopt.fib.untrusted), every warm-up and timed call gets fresh
inputs (same values, an address no other call had), DPS outputs poisoned
before each call, and a call that returns a tensor object an earlier call
returned is a runtime_error: a result cached between calls cannot be timed.
"""
import contextlib
import importlib
import inspect
import io
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
import weakref

_CARRIER_BITS = {8: "uint8", 16: "int16", 32: "int32", 64: "int64"}
_FIB_TO_TORCH = {"float4_e2m1": "float4_e2m1fn_x2"}


def _dtype(torch, name):
    return getattr(torch, _FIB_TO_TORCH.get(name, name))


def _read(torch, spec, device):
    if "value" in spec:
        return spec["value"]
    dtype = _dtype(torch, spec["dtype"])
    size = torch.empty((), dtype=dtype).element_size()
    carrier = getattr(torch, _CARRIER_BITS[size * 8])
    with open(spec["file"], "rb") as handle:
        raw = bytearray(handle.read())
    flat = torch.frombuffer(raw, dtype=carrier) if raw else torch.empty(0, dtype=carrier)
    return flat.view(dtype).reshape(spec["shape"]).to(device)


def _write(torch, value, path):
    t = value.detach().contiguous().cpu().reshape(-1)
    size = t.element_size()
    raw = t.view(getattr(torch, _CARRIER_BITS[size * 8])).numpy().tobytes()
    with open(path, "wb") as handle:
        handle.write(raw)


def _load(req):
    # inside the trial's folder, which the caller removes (fib/gpu.py)
    base = tempfile.mkdtemp(prefix="fib-gpu-", dir=req.get("out_dir"))
    package = "fib_gpu_" + req.get("role", "solution")
    root = os.path.join(base, package)
    for source in req["sources"]:
        path = os.path.normpath(os.path.join(root, source["path"]))
        if not path.startswith(root + os.sep):
            raise ValueError(f"source path {source['path']!r} leaves the solution's folder")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source["content"])
    for folder, _dirs, files in os.walk(root):
        if "__init__.py" not in files:
            open(os.path.join(folder, "__init__.py"), "w").close()
    sys.path.insert(0, base)
    entry_file, _, symbol = req["entry"].partition("::")
    module = importlib.import_module(package + "." + entry_file[:-3].replace("/", "."))
    function = getattr(module, symbol)
    if not callable(function):
        raise TypeError(f"{symbol} is not callable")
    return function


# Each call's copy of a tensor starts this many bytes after the previous call's copy.
_SHIFT_BYTES = 256


def _fresh_arenas(torch, templates, calls):
    """[(storage, shape, strides, step)] per template tensor ({shape, dtype, device}), None for scalars:
    room for `calls` overlapping copies, each at its own address."""
    arenas = []
    for t in templates:
        if t is None:
            arenas.append(None)
            continue
        shape, dtype, device = t
        strides, step = [], 1
        for extent in reversed(shape):
            strides.append(step)
            step *= max(1, extent)
        numel = 1
        for extent in shape:
            numel *= extent
        shift = max(1, _SHIFT_BYTES // torch.empty((), dtype=dtype).element_size())
        storage = torch.empty(numel + shift * max(1, calls), dtype=dtype, device=device)
        arenas.append((storage, tuple(shape), tuple(reversed(strides)), shift))
    return arenas


def _arena_view(arena, i):
    storage, shape, strides, shift = arena
    return storage.as_strided(shape, strides, shift * i)


def _check_returned(torch, seen, value, call):
    """Fails when `value` holds a tensor object an earlier call returned (still alive: cached)."""
    for item in (value if isinstance(value, (list, tuple)) else [value]):
        if type(item) is not torch.Tensor:  # noqa: E721
            continue
        earlier = seen.get(id(item))
        if earlier is not None and earlier[0]() is item:
            raise _Fail("runtime_error", f"anti-cheat: {call} returned the same tensor object as {earlier[1]} "
                                         "(a cached result); every call must compute its outputs")
        seen[id(item)] = (weakref.ref(item), call)


def _fits(function, n):
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return True
    least = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)
    most = None if any(p.kind == p.VAR_POSITIONAL for p in params) else \
        sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    return least <= n and (most is None or n <= most)


def main(path):
    """Runs the trial described by the request file ``path``; prints one JSON line (module docstring)."""
    import torch
    with open(path, encoding="utf-8") as handle:
        req = json.load(handle)
    # ACCELOPT_FIB_GPU_DEVICE=cpu runs the same protocol on CPU (perf_counter, no flush): the
    # tests' way to check this script where there is no GPU.
    device = torch.device(os.environ.get("ACCELOPT_FIB_GPU_DEVICE", "cuda"))
    on_gpu = device.type == "cuda"
    libs = {"torch": torch.__version__, "cuda": str(torch.version.cuda)}
    try:
        import triton
        libs["triton"] = triton.__version__
    except ImportError:
        pass
    reply = {"status": "ok", "hardware": torch.cuda.get_device_name() if on_gpu else "cpu", "libs": libs, "log": ""}
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            inputs = [_read(torch, spec, device) for spec in req["inputs"]]
            try:
                function = _load(req)
            except Exception as exc:  # noqa: BLE001 - FIB's BuildError
                raise _Fail("compile_error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}") from exc
            n_in, n_out = len(inputs), len(req["outputs"])
            dps = req.get("dps")
            if dps is None:  # no destination_passing_style key: the signature decides
                if _fits(function, n_in + n_out) and not _fits(function, n_in):
                    dps = True
                elif _fits(function, n_in):
                    dps = False
                else:
                    dps = bool(req.get("dps_default", True))
            if not _fits(function, n_in + n_out if dps else n_in):
                raise _Fail("compile_error", f"{req['entry']} does not accept {n_in + n_out if dps else n_in} arguments")
            reply["dps"] = dps
            torch.manual_seed(int(req.get("seed", 0)))
            outputs = [torch.empty(tuple(o["shape"] or ()), dtype=_dtype(torch, o["dtype"]), device=device)
                       for o in req["outputs"]] if dps else []

            def call(call_inputs=inputs, call_outputs=outputs):
                with torch.no_grad():
                    result = function(*call_inputs, *call_outputs)
                return call_outputs if dps else result

            def as_list(value):
                if isinstance(value, (list, tuple)):
                    return list(value)
                return [value]

            def save(prefix, value):
                for i, v in enumerate(as_list(value)):
                    if not isinstance(v, torch.Tensor):
                        v = torch.tensor(v, dtype=_dtype(torch, req["outputs"][min(i, n_out - 1)]["dtype"]))
                    _write(torch, v, os.path.join(req["out_dir"], f"{prefix}{i}.bin"))
                return [{"shape": list(v.shape) if isinstance(v, torch.Tensor) else [],
                         "dtype": str(v.dtype).replace("torch.", "") if isinstance(v, torch.Tensor) else "scalar"}
                        for v in as_list(value)]

            sync = torch.cuda.synchronize if on_gpu else (lambda: None)
            seen = {}
            try:
                first = call()
                sync()
                if not dps:
                    _check_returned(torch, seen, first, "the first call")
                reply["first"] = save("first_", first)
                timing = req.get("timing") or {}
                if timing.get("enabled", True):
                    l2 = torch.cuda.get_device_properties(device).L2_cache_size if on_gpu else 0
                    flush = torch.empty(max(2 * l2, 1), dtype=torch.int8, device=device)
                    warmup, iterations = int(timing.get("warmup", 10)), int(timing.get("iterations", 50))
                    calls = warmup + iterations
                    fresh_in = _fresh_arenas(torch, [(tuple(x.shape), x.dtype, x.device)
                                                     if isinstance(x, torch.Tensor) else None for x in inputs], calls)
                    fresh_out = _fresh_arenas(torch, [(tuple(o.shape), o.dtype, o.device) for o in outputs], calls)
                    samples, last = [], None
                    for i in range(calls):
                        # Fresh inputs and poisoned outputs, made before the flush.
                        call_inputs = [x if a is None else _arena_view(a, i).copy_(x) for x, a in zip(inputs, fresh_in)]
                        call_outputs = []
                        for a in fresh_out:
                            view = _arena_view(a, i)
                            view.fill_(float("nan") if view.is_floating_point() else (True if view.dtype == torch.bool
                                                                                        else -1))
                            call_outputs.append(view)
                        flush.zero_()
                        if on_gpu and i >= warmup:
                            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                            start.record()
                            result = call(call_inputs, call_outputs)
                            end.record()
                            end.synchronize()
                            elapsed = start.elapsed_time(end)
                        else:
                            began = time.perf_counter()
                            result = call(call_inputs, call_outputs)
                            elapsed = (time.perf_counter() - began) * 1e3
                        if not dps:
                            _check_returned(torch, seen, result, f"call {i + 1} after the first")
                        if i >= warmup:
                            samples.append(elapsed)
                            last = result
                        del result
                    sync()
                    reply["median_ms"] = statistics.median(samples)
                    reply["after"] = save("after_", last)
                for i, x in enumerate(inputs):
                    if isinstance(x, torch.Tensor):
                        _write(torch, x, os.path.join(req["out_dir"], f"input_after_{i}.bin"))
            except _Fail:
                raise
            except Exception as exc:  # noqa: BLE001 - the solution's error
                raise _Fail("runtime_error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}") from exc
    except _Fail as failure:
        reply.update(status=failure.kind, message=failure.message)
    reply["log"] = captured.getvalue()[-48 * 1024:]
    print(json.dumps(reply))


class _Fail(Exception):
    def __init__(self, kind, message):
        super().__init__(message)
        self.kind, self.message = kind, message


if __name__ == "__main__":
    main(sys.argv[1])

"""AccelOpt's best-achievable latency model (accelopt-facts §5.5, nki-facts §3.7).

``t_peak = max(vec_flops / PEAK_VEC, mm_flops / PEAK_MM, bytes / PEAK_BW)``
(perfect overlap; scalar-constant ops excluded; all data fp32). The bound is
the argmax: "vec", "mm" or "memory".

Constants per NeuronCore:
  trn1 (AccelOpt's own): BW 410 GiB/s, vector+scalar 2*128 lanes @ 1.12 GHz,
       TensorE fp32 23.75 TFLOP/s.
  trn2 (UNVALIDATED: AccelOpt publishes none; nki-facts §3.1 documented
       per-core figures): BW 2.9 TB/s / 8 = 362.5 GB/s, 2*128 lanes @ 0.96 GHz,
       TensorE fp32 20 TFLOP/s.

The work of a problem (vec_flops, mm_flops, bytes) comes from its reference
module when that declares ``peak_work()`` (nkibench/README.md, "Peak model":
a new problem declares it next to its ``forward``), else from the built-in
formulas of the 14 NKIBench problems (``DIMS``, ``_work``; the published
benchmark's references declare nothing).
"""
import importlib.util
import os
import threading
# What a Lua stage may call through accel.python_call (accelopt/lua_calls.py): arithmetic only.
LUA_CALLABLE = ("peak_latency_ms", "percent_of_peak")  # not peak_breakdown/describe: their `reference` is imported

PEAK = {
    "trn1": {"bw": 410 * 2**30, "vec": 2 * 128 * 1.12e9, "mm": 23.75e12, "validated": True},
    "trn2": {"bw": 2.9e12 / 8, "vec": 2 * 128 * 0.96e9, "mm": 20e12, "validated": False},
}


DIMS = {
    "mamba": "MCS", "silu": "MN", "add_rmsnorm_matmul": "MNK", "matmul_add_rmsnorm": "MNK",
    "rmsnorm_matmul": "MNK", "swiglu": "MNK", "matmul": "MNK", "transpose_matmul": "MNK",
    "gqa_full": ("B", "N", "QH", "KH", "D"), "rope_single_freq_apply": "BHND", "bmm": "BMNK",
    "bmm_softmax": "BMNK", "lora": "MNKR", "adamw": "MN",
}


def _work(problem, v):
    """Returns (vec_flops, mm_flops, bytes) of ``problem`` for dimension values ``v``.

    Raises KeyError for an unknown problem or a missing dimension.
    """
    if problem not in DIMS:
        raise KeyError(f"no peak model for problem {problem!r}")
    missing = [d for d in DIMS[problem] if d not in v]
    if missing:
        raise KeyError(f"{problem}: missing dimension(s) {missing}")
    M, N, K = v.get("M"), v.get("N"), v.get("K")
    if problem == "mamba":
        C, S = v["C"], v["S"]
        return (M * C * S * 8, 0, 4 * (2 * C * M + C * S + 2 * S * M + C * M))
    if problem == "silu":
        return (3 * M * N, 0, 4 * 2 * M * N)
    if problem == "add_rmsnorm_matmul":
        return (6 * M * K, 2 * M * N * K, 4 * (2 * M * K + K * N + K + M * N))
    if problem == "matmul_add_rmsnorm":
        return (6 * M * N, 2 * M * N * K, 4 * (M * K + N * K + M * N + N + M * N))
    if problem == "rmsnorm_matmul":
        return (4 * M * K, 2 * M * N * K, 4 * (M * K + K * N + M * N))
    if problem == "swiglu":
        return (5 * M * N, 6 * M * N * K, 4 * (2 * M * K + 3 * K * N))
    if problem in ("matmul", "transpose_matmul"):
        return (0, 2 * M * N * K, 4 * (M * N + N * K + M * K))
    if problem == "gqa_full":
        B, QH, KH, D = v["B"], v["QH"], v["KH"], v["D"]
        return (5 * B * QH * N * N, 4 * B * QH * N * N * D,
                4 * (2 * B * QH * N * D + 2 * B * KH * N * D))
    if problem == "rope_single_freq_apply":
        elems = v["B"] * v["H"] * N * v["D"]
        return (3 * elems, 0, 4 * 3 * elems)
    if problem in ("bmm", "bmm_softmax"):
        B = v["B"]
        vec = 5 * B * M * N if problem == "bmm_softmax" else 0
        return (vec, 2 * B * M * N * K, 4 * (B * M * N + B * N * K + B * M * K))
    if problem == "lora":
        R = v["R"]
        return (M * N, 2 * M * N * K + 2 * M * K * R + 2 * M * N * R,
                4 * (M * K + K * N + K * R + R * N) + 4 * M * N)
    if problem == "adamw":
        return (7 * M * N, 0, 4 * 4 * M * N + 4 * M * N)
    raise KeyError(f"no peak model for problem {problem!r}")


_DECLARED = {}  # (path, mtime_ns, size) -> (vec, mm, bytes) or the KeyError message
_DECLARED_LOCK = threading.Lock()
WORK_KEYS = ("vec_flops", "mm_flops", "bytes")


def declared_work(reference):
    """(vec_flops, mm_flops, bytes) from ``peak_work()`` of the reference module at path
    ``reference``, or None when it declares none. The reference is trusted code (the
    host computes its outputs); it is imported once per file version. Raises KeyError
    naming the file when ``peak_work()`` does not return the three non-negative numbers."""
    try:
        info = os.stat(reference)
    except (OSError, TypeError, ValueError):
        return None
    key = (os.path.abspath(reference), info.st_mtime_ns, info.st_size)
    with _DECLARED_LOCK:
        if key not in _DECLARED:
            _DECLARED[key] = _load_declared(reference)
        found = _DECLARED[key]
    if isinstance(found, str):
        raise KeyError(found)
    return found


def _load_declared(reference):
    spec = importlib.util.spec_from_file_location(f"_accelopt_peak_ref_{abs(hash(reference))}", reference)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - a broken reference has no peak model; say why
        return f"{reference}: cannot import the reference for its peak_work(): {type(error).__name__}: {error}"
    declare = getattr(module, "peak_work", None)
    if declare is None:
        return None
    try:
        work = declare()
    except Exception as error:  # noqa: BLE001
        return f"{reference}: peak_work() raised {type(error).__name__}: {error}"
    if not isinstance(work, dict) or any(
            not isinstance(work.get(k), (int, float)) or isinstance(work.get(k), bool) or work.get(k) < 0
            for k in WORK_KEYS):
        return (f"{reference}: peak_work() must return {{'vec_flops', 'mm_flops', 'bytes'}} as non-negative numbers, "
                f"got {work!r}")
    return tuple(work[k] for k in WORK_KEYS)


def _how_to_declare(problem, reference):
    where = f" in its reference module ({reference})" if reference else " in its reference module"
    return (f"no peak model for problem {problem!r}: declare peak_work() -> {{'vec_flops', 'mm_flops', 'bytes'}}"
            f"{where} (nkibench/README.md, 'Peak model')")


def peak_breakdown(problem, values, target="trn1", reference=None):
    """Returns the model's parts for ``problem`` at ``values`` ({dim: int}) on ``target``.

    ``reference``: the path of the case's reference module; its ``peak_work()``, when
    declared, gives the work (``declared_work``). Dict keys: vec_flops, mm_flops, bytes
    (counts), vec_ms, mm_ms, memory_ms, peak_ms (ms), bound ("vec"|"mm"|"memory"),
    validated (bool; False on trn2), source ("reference" | "accelopt.peak").
    Raises KeyError for an unknown problem (saying how to declare its work), a missing
    dimension or target.
    """
    if target not in PEAK:
        raise KeyError(f"no peak constants for target {target!r}")
    consts = PEAK[target]
    declared = declared_work(reference) if reference else None
    if declared is not None:
        vec, mm, nbytes = declared
        source = "reference"
    elif problem in DIMS:
        vec, mm, nbytes = _work(problem, values)
        source = "accelopt.peak"
    else:
        raise KeyError(_how_to_declare(problem, reference))
    times = {"vec": vec / consts["vec"] * 1e3, "mm": mm / consts["mm"] * 1e3,
             "memory": nbytes / consts["bw"] * 1e3}
    bound = max(times, key=times.get)
    return {"vec_flops": vec, "mm_flops": mm, "bytes": nbytes, "vec_ms": times["vec"],
            "mm_ms": times["mm"], "memory_ms": times["memory"], "peak_ms": times[bound],
            "bound": bound, "validated": consts["validated"], "source": source}


def peak_latency_ms(problem, values, target="trn1"):
    """Returns (peak latency in ms: float, bound key: "vec"|"mm"|"memory").

    Raises KeyError as peak_breakdown does.
    """
    parts = peak_breakdown(problem, values, target)
    return parts["peak_ms"], parts["bound"]


def percent_of_peak(latency_ms, problem, values, target="trn1"):
    """Returns 100 * peak / ``latency_ms`` (float percent). Raises ValueError if latency_ms <= 0."""
    if not latency_ms > 0:
        raise ValueError(f"latency must be positive, got {latency_ms!r}")
    return 100.0 * peak_latency_ms(problem, values, target)[0] / latency_ms


def describe(request):
    """JSON entry point for the host: the peak model applied to one measured latency.

    ``request`` (dict): ``problem`` (str), ``values`` ({dim: int}),
    ``latency_ms`` (float ms, optional), ``target`` ("trn1"|"trn2", default "trn1"),
    ``reference`` (the case's reference module, optional: its ``peak_work()``).
    Returns peak_breakdown's dict plus ``target`` and, when a positive latency is
    given, ``latency_ms`` and ``percent_of_peak`` (float percent).
    Raises KeyError for an unknown problem/target or a missing dimension.
    """
    target = request.get("target", "trn1")
    parts = peak_breakdown(request["problem"], request.get("values") or {}, target, request.get("reference"))
    parts["target"] = target
    latency = request.get("latency_ms")
    if isinstance(latency, (int, float)) and not isinstance(latency, bool) and latency > 0:
        parts["latency_ms"] = float(latency)
        parts["percent_of_peak"] = 100.0 * parts["peak_ms"] / latency
    return parts

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
"""
# What a Lua stage may call through accel.python_call (accelopt/lua_calls.py): arithmetic only.
LUA_CALLABLE = ("peak_breakdown", "peak_latency_ms", "percent_of_peak", "describe")

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


def peak_breakdown(problem, values, target="trn1"):
    """Returns the model's parts for ``problem`` at ``values`` ({dim: int}) on ``target``.

    Dict keys: vec_flops, mm_flops, bytes (counts), vec_ms, mm_ms, memory_ms,
    peak_ms (ms), bound ("vec"|"mm"|"memory"), validated (bool; False on trn2).
    Raises KeyError for an unknown problem, a missing dimension or target.
    """
    if target not in PEAK:
        raise KeyError(f"no peak constants for target {target!r}")
    consts = PEAK[target]
    vec, mm, nbytes = _work(problem, values)
    times = {"vec": vec / consts["vec"] * 1e3, "mm": mm / consts["mm"] * 1e3,
             "memory": nbytes / consts["bw"] * 1e3}
    bound = max(times, key=times.get)
    return {"vec_flops": vec, "mm_flops": mm, "bytes": nbytes, "vec_ms": times["vec"],
            "mm_ms": times["mm"], "memory_ms": times["memory"], "peak_ms": times[bound],
            "bound": bound, "validated": consts["validated"]}


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
    ``latency_ms`` (float ms, optional), ``target`` ("trn1"|"trn2", default "trn1").
    Returns peak_breakdown's dict plus ``target`` and, when a positive latency is
    given, ``latency_ms`` and ``percent_of_peak`` (float percent).
    Raises KeyError for an unknown problem/target or a missing dimension.
    """
    target = request.get("target", "trn1")
    parts = peak_breakdown(request["problem"], request["values"], target)
    parts["target"] = target
    latency = request.get("latency_ms")
    if isinstance(latency, (int, float)) and not isinstance(latency, bool) and latency > 0:
        parts["latency_ms"] = float(latency)
        parts["percent_of_peak"] = 100.0 * parts["peak_ms"] / latency
    return parts

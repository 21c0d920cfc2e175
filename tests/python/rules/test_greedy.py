"""End to end: the greedy driver improves small NKIBench cases on the emulator."""
from accelopt import nkibench
from accelopt.rules import greedy


def _run(problem, rounds, max_plans):
    (case,) = nkibench.iter_cases(problems=[problem], case_ids=["small"])
    res = greedy.search(case, rounds=rounds, max_plans=max_plans, seed=0)
    gain = 1.0 - res["best_ms"] / res["baseline_ms"]
    print(f"{problem}/small: {res['baseline_ms']:.4f} -> {res['best_ms']:.4f} ms ({100 * gain:.1f}%): "
          + " -> ".join(step["id"] for step in res["chain"]))
    return res, gain


def test_greedy_improves_silu_small():
    res, gain = _run("silu", rounds=2, max_plans=4)
    assert gain > 0.03, res
    assert res["chain"] and res["source"] != open(nkibench.iter_cases(problems=["silu"], case_ids=["small"])[0]
                                                   .kernel, encoding="utf-8").read()
    # the chain's latencies only go down
    lat = [res["baseline_ms"]] + [s["latency_ms"] for s in res["chain"]]
    assert all(b < a for a, b in zip(lat, lat[1:])), lat


def test_greedy_improves_adamw_small():
    res, gain = _run("adamw", rounds=1, max_plans=3)
    assert gain > 0.03, res

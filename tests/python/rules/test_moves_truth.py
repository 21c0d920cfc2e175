"""What ``moves`` offers is true for the kernel at hand (issue 36, item 5).

* with the arguments' shapes known, tile-size moves (``tunable``, ``retile``) offer only
  values that divide the dimension they tile (silu at N = 1024: no TILE_N = 2048);
* a plan's effect names the direction of its change (smaller tiles are not "fewer, larger
  instructions");
* ranked by predicted gain, the gains are in rank order.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

from accelopt import rules  # noqa: E402

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _silu():
    with open(os.path.join(_REPO, "nkibench", "kernels", "silu_0.py"), encoding="utf-8") as handle:
        return handle.read()


def _propose(source, shapes=None, metrics=None, rule=None, **extra):
    request = {"source": source, "metrics": metrics or {}, "max_plans": 100}
    if shapes is not None:
        request["input_shapes"] = shapes
    if rule is not None:
        request["rules"] = [rule]
    request.update(extra)
    out = rules.propose(request)
    assert "error" not in out, out
    return out["plans"]


RETILE = H.kernel_source('''
    @nki.jit
    def kernel(x):
        M, N = x.shape
        TILE_N = 512
        out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            for j in nl.affine_range(N // TILE_N):
                t = nl.load(x[i * 128:(i + 1) * 128, j * TILE_N:(j + 1) * TILE_N])
                nl.store(out[i * 128:(i + 1) * 128, j * TILE_N:(j + 1) * TILE_N], value=nl.exp(t))
        return out
''')


def test_tunable_offers_only_choices_that_divide_the_tiled_dimension():
    silu = _silu()
    values = sorted(p["params"]["value"] for p in _propose(silu, rule="tunable"))
    assert values == [128, 256, 1024, 2048], values  # without shapes: every declared choice
    values = sorted(p["params"]["value"] for p in _propose(silu, shapes=[[256, 1024]], rule="tunable"))
    assert values == [128, 256, 1024], values  # N = 1024: TILE_N = 2048 fails the kernel's assert
    values = sorted(p["params"]["value"] for p in _propose(silu, shapes=[[256, 512]], rule="tunable"))
    assert values == [128, 256], values


def test_retile_offers_only_values_that_divide_the_tiled_dimension():
    values = sorted(p["params"]["value"] for p in _propose(RETILE, rule="retile"))
    assert values == [256, 1024, 2048], values
    values = sorted(p["params"]["value"] for p in _propose(RETILE, shapes=[[256, 1024]], rule="retile"))
    assert values == [256, 1024], values


def test_tile_size_effects_name_the_direction():
    for source, rule in ((_silu(), "tunable"), (RETILE, "retile")):
        plans = _propose(source, shapes=[[256, 1024]], rule=rule)
        assert plans, rule
        for plan in plans:
            larger = plan["params"]["value"] > plan["params"]["old"]
            text = plan["effect"] + " " + plan["description"]
            if larger:
                assert "fewer, larger instructions" in plan["effect"], plan
            else:
                assert "fewer" not in text and "larger" not in text, plan
                assert "smaller" in plan["effect"], plan


def test_ranked_by_predicted_gain_the_gains_are_in_rank_order():
    metrics = {"vector_engine_active_time_percent": 0.55, "scalar_engine_active_time_percent": 0.3,
               "dma_active_time_percent": 0.7, "tensor_engine_active_time_percent": 0.0, "bottleneck": "dma"}
    plans = _propose(_silu(), shapes=[[256, 1024]], metrics=metrics, rank="predicted_gain")
    gains = [p["predicted_gain"] for p in plans]
    assert len(gains) > 5 and gains == sorted(gains, reverse=True), gains
    # the search's own order is kept as a field
    assert sorted(p["search_rank"] for p in plans) == list(range(1, len(plans) + 1))
    bad = rules.propose({"source": _silu(), "rank": "nonsense"})
    assert bad.get("error", {}).get("kind") == "bad_request", bad

"""The per-engine bottleneck model (accelopt.search.bottleneck) on hand-built
profiles: which category each kind of bottleneck puts under pressure, and which
moves it favours through their `relieves`."""
from accelopt.search import bottleneck as bn
from accelopt.search.vocabulary import KIND_RELIEVES


def _profile(tensor=0.0, vector=0.0, scalar=0.0, gpsimd=0.0, dma=0.0, **extra):
    m = {"tensor_engine_active_time_percent": tensor, "vector_engine_active_time_percent": vector,
         "scalar_engine_active_time_percent": scalar, "gpsimd_engine_active_time_percent": gpsimd,
         "dma_active_time_percent": dma}
    m.update(extra)
    return m


def _order(model, kinds):
    """Kinds by weight under the model, best first (ties by name)."""
    return sorted(kinds, key=lambda k: (-bn.move_weight(KIND_RELIEVES[k], model["pressure"]), k))


def test_vector_bound_favours_fusions_over_dma_and_tensor_moves():
    model = bn.classify(_profile(vector=0.85, scalar=0.3, dma=0.2))
    assert model["bottleneck"] == "vector"
    order = _order(model, ["fuse_silu", "hoist_load", "hoist_transpose", "square_to_activation"])
    assert order[-2:] == ["hoist_load", "hoist_transpose"] or order[-2:] == ["hoist_transpose", "hoist_load"]
    assert bn.move_weight(KIND_RELIEVES["fuse_silu"], model["pressure"]) == bn.PRIOR_FLOOR + 1.0


def test_dma_bound_with_large_transfers_favours_traffic_moves():
    # 64 MiB in 16 DMAs of 4 MiB: the fixed share is small, HBM bytes set the time.
    model = bn.classify(_profile(vector=0.3, dma=0.9, dma_count=16, hbm_read_bytes=48 << 20, hbm_write_bytes=16 << 20))
    assert model["bottleneck"] == "dma" and model["dma_fixed_share"] < 0.1
    order = _order(model, ["hoist_load", "widen_loop", "fuse_silu", "hoist_transpose"])
    assert order[0] == "hoist_load" and order[-1] == "hoist_transpose"


def test_many_small_dmas_make_the_count_the_bottleneck():
    # The same bytes in 8192 DMAs of 8 KiB: fixed costs dominate -> fewer, larger DMAs.
    model = bn.classify(_profile(vector=0.3, dma=0.9, dma_count=8192, hbm_read_bytes=48 << 20, hbm_write_bytes=16 << 20))
    assert model["dma_fixed_share"] > 0.9
    assert model["bottleneck"] == "dma_count"
    assert model["pressure"]["instructions"] > model["pressure"]["vector"]
    # Moves that cut the DMA count (fewer, larger tiles) close up on those that cut bytes.
    large = bn.classify(_profile(vector=0.3, dma=0.9, dma_count=16, hbm_read_bytes=48 << 20, hbm_write_bytes=16 << 20))

    def ratio(m):
        return bn.move_weight(KIND_RELIEVES["widen_loop"], m["pressure"]) / bn.move_weight(KIND_RELIEVES["hoist_load"], m["pressure"])
    assert ratio(model) > 0.95 and ratio(large) < 0.8
    assert _order(model, ["widen_loop", "hoist_transpose", "square_to_activation"])[0] == "widen_loop"


def test_tensor_bound_favours_the_transpose_hoist():
    model = bn.classify(_profile(tensor=0.8, vector=0.2, scalar=0.1, dma=0.25))
    assert model["bottleneck"] == "tensor"
    assert _order(model, ["hoist_transpose", "fuse_silu", "hoist_load", "widen_loop"])[0] == "hoist_transpose"


def test_underutilized_kernel_favours_fixed_cost_moves():
    model = bn.classify(_profile(tensor=0.1, vector=0.2, scalar=0.15, dma=0.2), {"bound": "memory", "percent_of_peak": 12.0})
    assert model["bottleneck"] == "underutilized"
    assert model["pressure"]["instructions"] == 0.8
    assert _order(model, ["widen_loop", "hoist_load", "hoist_transpose", "reciprocal_to_scalar"])[0] == "widen_loop"


def test_percent_of_peak_is_a_floor_on_the_bound_resource():
    # DMA busy figure missing, but the kernel runs at 70 % of its memory roofline.
    model = bn.classify({"vector_engine_active_time_percent": 0.3}, {"bound": "memory", "percent_of_peak": 70.0})
    assert model["pressure"]["dma"] == 0.7 and model["bottleneck"] == "dma"
    assert "roofline" in model["why"]


def test_busy_ms_fallback_no_figures_and_the_batch_entry():
    model = bn.classify({"latency_ms": 2.0, "engine_busy_ms": {"vector": 1.6, "dma": 0.4}})
    assert model["busy"] == {"vector": 0.8, "dma": 0.2} and model["bottleneck"] == "vector"
    assert bn.classify({}) is None and bn.classify(None) is None
    out = bn.weigh({"nodes": [{"metrics": _profile(vector=0.9), "moves": [{"relieves": {"vector": 1.0}}, {"relieves": {}}]},
                              {"metrics": {}, "moves": [{"relieves": {"dma": 1.0}}]}]})
    assert out["nodes"][0]["weights"] == [1.1, bn.PRIOR_FLOOR]
    assert out["nodes"][1] == {"model": None, "weights": [None]}
    assert bn.weigh({"nodes": 3})["error"]["kind"] == "bad_request"

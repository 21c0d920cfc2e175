"""Cost model tests on hand-built instruction sequences (nki-facts §3.3, 3.4, 3.6, 5.2)."""
import numpy as np

from dataclasses import replace

from nki_emu.cost import formulas, scheduler, targets
from nki_emu.cost.residency import Residency
from nki_emu.cost.scheduler import Rings, Scheduler

T1 = targets.get("trn1")


def test_documented_formulas():
    c = formulas.cycles
    assert c("nc_matmul", 512, {"n_stationary": 128, "fp32": True}, "tensor", T1) == 4 * 512
    assert c("nc_matmul", 128, {"n_stationary": 128, "fp32": True, "onezero": True}, "tensor", T1) == 256
    assert c("nc_matmul", 16, {"n_stationary": 128, "fp32": False}, "tensor", T1) == 64
    assert c("activation", 10, {}, "scalar", T1) == 64  # MIN_II
    # the documented 2N, N with a PSUM operand, N for tensor_reduce (the calibrated defaults differ)
    doc = replace(T1, tensor_tensor_factor=2.0, tensor_tensor_psum_factor=1.0, tensor_reduce_factor=1.0)
    assert c("tensor_tensor", 512, {}, "vector", doc) == 1024
    assert c("tensor_tensor", 512, {"in_psum": True}, "vector", doc) == 512
    assert c("tensor_reduce", 512, {}, "vector", doc) == 512
    # calibrated to the measured VectorE active times (issue 35, docs/benchmarks/engine-time.txt)
    assert c("tensor_tensor", 512, {"in_psum": True}, "vector", T1) == 871  # ceil(1.7 x 512)
    assert c("tensor_reduce", 512, {}, "vector", T1) == 743  # ceil(1.45 x 512)
    assert c("tensor_tensor", 10, {"in_psum": True}, "vector", T1) == 64  # MIN_II still the floor
    assert c("tensor_tensor_scan", 512, {}, "vector", T1) == 1024
    assert c("iota", 10, {}, "gpsimd", T1) == 160
    assert c("nc_transpose", 20, {"partitions": 20}, "vector", T1) == 64


def test_engines_run_in_parallel_and_in_order():
    s = Scheduler(T1)
    r = [(1, 0, 0, 0, 10)]
    s.compute("vector", 100.0, [], r, [], False, True)
    s.compute("vector", 100.0, [], [(2, 0, 0, 0, 10)], [], False, True)
    _, end = s.compute("scalar", 50.0, [], [(3, 0, 0, 0, 10)], [], False, False)
    assert end == 50.0 and s.free["vector"] == 200.0


def test_dependency_adds_semaphore_latency():
    s = Scheduler(T1)
    s.compute("vector", 100.0, [], [(1, 0, 0, 0, 10)], [], False, True)
    start, _ = s.compute("scalar", 10.0, [(1, 0, 0, 5, 6)], [], [], False, False)
    assert start == 100.0 + T1.sync_ns
    start2, _ = s.compute("scalar", 10.0, [(1, 0, 0, 20, 30)], [], [], False, False)
    assert start2 == start + 10.0  # no overlap with the written span: only queue order


def test_trn1_shared_psum_port_serialises_vector_and_scalar():
    s = Scheduler(T1)
    s.compute("vector", 100.0, [], [(1, 0, 0, 0, 1)], [(9, 0)], True, True)
    start, _ = s.compute("scalar", 10.0, [(5, 0, 0, 0, 1)], [], [(9, 0)], True, False)
    assert start >= 100.0
    s2 = Scheduler(targets.get("trn2"))
    s2.compute("vector", 100.0, [], [(1, 0, 0, 0, 1)], [(9, 0)], True, True)
    start2, _ = s2.compute("scalar", 10.0, [(5, 0, 0, 0, 1)], [], [(10, 0)], True, False)
    assert start2 == 0.0  # another PSUM bank: in parallel on trn2 (same bank: next test)


def test_dma_model_bandwidth_and_queues():
    s = Scheduler(T1)
    nbytes = 128 * 4096  # 4 KiB per partition: the documented 17 B/ns per engine (nki-facts §3.1)
    start, end = s.dma(128, nbytes, 128, [], [])
    n_q, occupancy, _ = scheduler.dma_occupancy(T1, 128, nbytes, 128)
    assert n_q == 16 and start == 0.0 and abs(end - (T1.dma_latency_ns + occupancy)) < 1e-6
    assert abs(nbytes / 16 / occupancy - 17.0) < 0.05
    small = scheduler.dma_occupancy(T1, 128, 128 * 512, 128)[1]  # 512 B rows: overhead-bound
    assert 128 * 512 / 16 / small < 0.6 * 17.0
    start2, _ = s.dma(8, 4096, 8, [], [])  # one engine only, busy with the first transfer: waits
    assert abs(start2 - occupancy) < 1e-6


def test_psum_bank_reuse_waits_for_eviction():
    s, rings = Scheduler(T1), Rings()
    banks = [((b, 0), ("psum",), T1.psum_banks) for b in range(T1.psum_banks)]
    for entry in banks:  # eight accumulation groups take the eight banks in program order
        assert rings.place([entry]) == []
        s.compute("tensor", 10.0, [], [], [entry[0]], True, False, uses=[entry[0]])
    for b in range(T1.psum_banks):  # ScalarE evicts the banks one after the other
        s.compute("scalar", 100.0, [], [], [(b, 0)], True, False, uses=[(b, 0)])
    previous = rings.place([((99, 0), ("psum",), T1.psum_banks)])
    assert previous == [(0, 0)]  # a ninth group reuses the first bank
    start, _ = s.compute("tensor", 10.0, [], [], [(99, 0)], True, False, waits=previous)
    assert start == 100.0  # tensor engine free at 80 ns, first bank released at 100 ns


def test_residency_hoists_repeated_load_when_it_fits():
    r = Residency(capacity=16 * 1024)
    assert r.load(("w", 0), ("a", 0), 4096, 1 << 19) is False
    assert r.load(("w", 0), ("b", 0), 4096, 1 << 19) is True


def test_residency_reissues_evicted_load_and_spills_computed_data():
    r = Residency(capacity=8 * 1024)
    r.load(("w", 0), ("a", 0), 4096, 1000)
    r.write(("c", 0), 4096)
    r.write(("d", 0), 4096)  # evicts ("a", 0)
    assert r.read(("a", 0), 500) == ("reload", 0, 500)
    r.write(("e", 0), 4096)
    r.write(("f", 0), 4096)  # evicts c, d ...
    kind, save, reload = r.read(("c", 0), 300)
    assert kind == "spill" and save == 300 and reload == 300



def test_residency_release_frees_dead_blocks_but_keeps_data_a_later_load_reuses():
    r = Residency(capacity=8 * 1024)
    r.load(("w", 0), ("a", 0), 4096, 1000)  # w: loaded again later
    r.write(("c", 0), 4096)
    later_load = {("w", 0)}
    r.release(("a", 0), lambda src: src in later_load)  # the block is dead, its data is not
    r.release(("c", 0), lambda src: False)  # a dead computed tile frees its buffer
    r.write(("d", 0), 4096)  # fits in c's space: w stays
    assert r.load(("w", 0), ("b", 0), 4096, 1000) is True
    later_load.clear()
    r.release(("b", 0), lambda src: False)
    r.write(("e", 0), 4096)
    r.write(("f", 0), 4096)  # only d can be evicted now; without the releases w would be
    assert r.used <= r.capacity
    assert r.read(("d", 0), 100) == ("spill", 100, 100)


def test_dead_block_release_keeps_a_reused_input_that_dead_tiles_would_evict():
    # w (2 KiB per partition) is loaded in every iteration next to a chain of fresh tiles;
    # in a 6 KiB SBUF the LRU evicts w for tiles that are already dead, while releasing
    # them keeps w resident (one load). The option changes nothing else.
    import nki_emu
    nki_emu.install()
    import neuronxcc.nki.language as nl
    from nki_emu.cost import tracer

    def kernel(x, w):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0] // 128):
            w_t = nl.load(w[nl.arange(128)[:, None], nl.arange(512)[None, :]])
            t = nl.load(x[i * 128 + nl.arange(128)[:, None], nl.arange(512)[None, :]])
            v = nl.multiply(t, w_t)
            u = nl.exp(nl.exp(nl.exp(v)))  # each tile is dead once the next one exists
            nl.store(out[i * 128 + nl.arange(128)[:, None], nl.arange(512)[None, :]], value=u)
        return out

    x, w = np.ones((1024, 512), np.float32), np.ones((128, 512), np.float32)
    records, counters = nki_emu.run(kernel, [x, w], keep_trace=True).trace
    # static hoisting off: it would pin w too (tested on its own below)
    small = replace(T1, sbuf_partition_bytes=T1.sbuf_reserved_bytes + 6 * 1024, static_hoist_share=0.0)
    lru = tracer.replay(records, counters, small)
    freed = tracer.replay(records, counters, replace(small, release_dead_blocks=True))
    assert tracer.replay(records, counters, replace(small, release_dead_blocks=False)) == lru
    assert freed["dma_count"] == lru["dma_count"] - 1  # the re-issue is gone, nothing else
    x_bytes, w_bytes = x.nbytes, w.nbytes
    assert lru["hbm_read_bytes"] > x_bytes + w_bytes  # w evicted by dead tiles and re-issued
    assert freed["hbm_read_bytes"] == x_bytes + w_bytes  # w read once

def test_profile_fields_of_a_run():
    import nki_emu
    nki_emu.install()
    import neuronxcc.nki.language as nl

    def k(x):
        o = nl.ndarray(x.shape, dtype=np.float32, buffer=nl.shared_hbm)
        nl.store(o, nl.exp(nl.load(x)))
        return o
    res = nki_emu.run(k, [np.ones((128, 512), np.float32)])
    p = res.profile
    for key in ("total_time", "latency_ms", "hbm_read_bytes", "hbm_write_bytes", "psum_read_bytes",
                "psum_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes", "spill_save_bytes",
                "spill_reload_bytes", "hardware_flops", "transpose_flops", "peak_flops_bandwidth_ratio",
                "mm_arithmetic_intensity", "hfu_estimated_percent", "scalar_engine_active_time_percent",
                "vector_engine_active_time_percent", "gpsimd_engine_active_time_percent",
                "tensor_engine_active_time_percent", "engine_busy_ms", "bottleneck", "instruction_count"):
        assert key in p, key
    assert p["hbm_read_bytes"] == 128 * 512 * 4 and p["hbm_write_bytes"] == 128 * 512 * 4
    assert abs(p["latency_ms"] - p["total_time"] * 1e3) < 1e-12 and p["estimated"] is True
    assert abs(p["peak_flops_bandwidth_ratio"] - 223.78) < 0.01
    act_ns = (512 + T1.act_overhead_cycles) / 1.4  # N cycles + the per-instruction access bubble
    assert abs(p["engine_busy_ms"]["scalar"] - act_ns * 1e-6) < 1e-9
    assert nki_emu.run(k, [np.ones((128, 512), np.float32)], target="trn2").profile["target_status"] == "unvalidated"


def test_buffer_ring_makes_new_tile_wait_for_last_reader():
    t = replace(T1, buffers_affine=2)
    s, rings = Scheduler(t), Rings()
    site = ("kernel.py", 10)
    # tiles A, B, C of one allocation site with 2 physical buffers: C reuses A's buffer
    assert rings.place([((1, 0), site, 2)]) == []
    s.compute("vector", 100.0, [], [(1, 0, 0, 0, 1)], uses=[(1, 0)])
    s.compute("scalar", 500.0, [(1, 0, 0, 0, 1)], [], uses=[(1, 0)])  # reads A until 100+sync+500
    assert rings.place([((1, 1), site, 2)]) == []
    s.compute("vector", 10.0, [], [(1, 1, 1, 0, 1)], uses=[(1, 1)])
    previous = rings.place([((1, 2), site, 2)])
    assert previous == [(1, 0)]
    start, _ = s.compute("vector", 10.0, [], [(1, 2, 2, 0, 1)], waits=previous, uses=[(1, 2)])
    assert start == 100.0 + t.sync_ns + 500.0
    assert t.buffers("affine", 200 * 1024) == 1 and t.buffers("sequential", 64) == t.buffers_sequential


def test_replay_with_other_knobs_and_cost_only_path():
    import nki_emu
    from nki_emu.cost import tracer
    nki_emu.install()
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl

    def k(x, w):
        o = nl.ndarray((128, 512), dtype=np.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            a = nl.load(x[i * 128:(i + 1) * 128, :])
            b = nl.load(w)
            p = nisa.nc_matmul(a, b)
            nl.store(o, nl.copy(p)) if i == 3 else None
        return o
    x, w = np.ones((512, 128), np.float32), np.ones((128, 512), np.float32)
    full = nki_emu.run(k, [x, w], keep_trace=True)
    fast = nki_emu.run(k, [x, w], compute=False, keep_trace=True)
    assert np.allclose(full.outputs, 128.0) and np.all(fast.outputs == 0.0)
    assert abs(full.profile["latency_ms"] - fast.profile["latency_ms"]) < 1e-12
    records, counters = fast.trace
    slow = tracer.replay(records, counters, replace(T1, dma_fixed_ns=5000.0))
    assert slow["latency_ms"] > full.profile["latency_ms"] + 4 * 5e-3 * 0.9
    assert full.profile["hoisted_loads"] == 3  # w is loop-invariant: loaded once (nki-facts §5.2)


def test_residency_keeps_reissued_loop_invariant_loads_over_streamed_tiles():
    # w (4 blocks of 4 KiB) is reloaded every iteration next to 8 KiB of fresh tiles
    # in a 20 KiB SBUF: a plain LRU thrashes, the protected segment keeps w (nki-facts §5.2)
    def misses(share):
        r = Residency(capacity=20 * 1024, protected_share=share)
        n = 0
        for it in range(6):
            for j in range(4):
                n += not r.load(("w", j), ("wt", it, j), 4096, 4096)
                r.write(("tmp", it, j), 2048)
        return n
    assert misses(0.0) == 24  # every load re-issued
    assert misses(0.9) == 8  # first load + one re-issue, then hoisted


def test_dma_queues_per_direction_and_the_shared_bandwidth_floor():
    """Loads and stores have their own in-order queues on each engine (a store waiting for
    its data never holds up a load), each at the documented 17 B/ns; together they cannot
    outrun the engines' shared bandwidth, the core's HBM share (nki-facts §3.4)."""
    t = replace(T1, dma_fixed_ns=0.0, dma_desc_ns=0.0, dma_latency_ns=0.0, dma_start_ns=0.0)
    s = Scheduler(t)
    s.compute("vector", 10000.0, [], [(7, 0, 0, 0, 10)])  # data of the store ready at 10 us
    nbytes = 128 * 1024
    occ = nbytes / 16 / t.dma_queue_bytes_per_ns
    assert occ == scheduler.dma_occupancy(t, 128, nbytes, 128)[1]
    st, _ = s.dma(128, nbytes, 128, [(7, 0, 0, 0, 10)], [], "store")
    assert st >= 10000.0 + t.dma_start_ns
    ld, ld_end = s.dma(128, nbytes, 128, [], [(8, 0, 0, 0, 10)], "load")
    assert ld == 0.0 and abs(ld_end - occ) < 1e-6  # issued later, not blocked by the waiting store
    ld2, _ = s.dma(128, nbytes, 128, [], [(9, 0, 0, 0, 10)], "load")
    assert abs(ld2 - occ) < 1e-6  # in order behind the first load
    # the shared bandwidth: 410 GB/s for both directions together on trn1 [D]
    assert abs(scheduler.dma_rate(T1) * 16 - 410.0) < 1e-9
    s2 = Scheduler(t)
    for _ in range(10):
        s2.dma(128, nbytes, 128, [], [], "load")
        s2.dma(128, nbytes, 128, [], [], "store")
    assert abs(s2.end - 20 * nbytes / 410.0) < 1e-6  # neither queue alone would take this long
    assert 10 * occ < s2.end


def test_narrow_dma_uses_ceil_p_over_8_engines_round_robin():
    import nki_emu
    nki_emu.install()
    import neuronxcc.nki.language as nl
    from nki_emu.cost import tracer

    def k(x):
        o = nl.ndarray((32, 512), dtype=np.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            t = nl.load(x[i * 32:(i + 1) * 32, :])  # 32 partitions: 4 engines each
            nl.store(o, value=t) if i == 3 else None
        return o
    records, counters = nki_emu.run(k, [np.ones((128, 512), np.float32)], keep_trace=True).trace
    state = tracer._Replay(T1, counters).run(records)
    firsts = [job[11] for job in state.jobs if job[0] == "D" and job[1] == "load"]
    assert firsts == [0, 4, 8, 12]  # the four loads run on disjoint engines, in parallel
    assert scheduler.dma_engines(T1, 32) == 4 and scheduler.dma_engines(T1, 128) == 16


def _cyclic_trace(w_blocks, iterations, tmp_bpp):
    """Records of a loop that reloads w (w_blocks x 4 KiB per partition) every
    iteration next to a fresh computed tile of tmp_bpp bytes per partition."""
    records = []
    for it in range(iterations):
        for j in range(w_blocks):
            src = ("w", 0, j)  # (uid, version, region)
            block = ("wt", it, j)
            records.append(("L", 128, 4096 * 128, 1, src, block, 4096, None, None, ()))
            records.append(("C", "vector", "tensor_copy", 1, {}, [], [], [], [(block, 4096 * 128, 128)],
                            [(("tmp", it, j), tmp_bpp)], ()))
    return records


def test_static_hoisting_pins_a_cyclic_input_only_when_it_lowers_traffic():
    from nki_emu.cost import tracer
    t = replace(T1, sbuf_partition_bytes=36 * 1024, sbuf_reserved_bytes=0, static_hoist_share=0.9)
    records = _cyclic_trace(w_blocks=6, iterations=5, tmp_bpp=4096)  # w: 24 KiB of 36, 48 KiB touched per iteration
    assert tracer.plan_static_hoisting(records, t) == {("w", 0): 24 * 1024}
    pinned = tracer._traffic(records, t, {("w", 0): 24 * 1024})
    lru = tracer._traffic(records, t, {})
    assert pinned == 6 * 4096 * 128 < lru  # read once instead of thrashing
    # On by default for trn1 (fitted to nki-facts §5.2's matmul_add_rmsnorm traffic)
    assert 0.0 < T1.static_hoist_share < 1.0


def test_static_hoisting_pins_what_fits_of_a_larger_input_and_reissues_the_rest():
    from nki_emu.cost import tracer
    t = replace(T1, sbuf_partition_bytes=36 * 1024, sbuf_reserved_bytes=0, static_hoist_share=0.5)
    records = _cyclic_trace(w_blocks=6, iterations=5, tmp_bpp=4096)
    plan = tracer.plan_static_hoisting(records, t)
    assert plan == {("w", 0): 18 * 1024}  # half of SBUF for a 24 KiB input
    # 4 of the 6 blocks fit in 18 KiB and are read once; the other two go through the
    # LRU, which keeps at most one of them (its protected slot) between iterations
    block = 4096 * 128
    partial = tracer._traffic(records, t, plan)
    assert (6 + 1 * 4) * block <= partial <= (6 + 2 * 4) * block
    assert 6 * block < partial < tracer._traffic(records, t, {})
    # An input whose footprint exceeds SBUF is never hoisted (matmul's rhs, nki-facts §5.2)
    huge = _cyclic_trace(w_blocks=10, iterations=3, tmp_bpp=4096)  # 40 KiB > 36 KiB
    assert tracer.plan_static_hoisting(huge, t) == {}


def test_masked_tail_loads_have_stable_keys_so_profiles_repeat():
    # out-of-bound (masked) loads are gathers; their residency key must describe the access,
    # not the Python object (ids are reused, which made repeated runs differ)
    import nki_emu
    from nki_emu.index_expr import arange
    from nki_emu.layout import gather_signature, resolve
    nki_emu.install()
    import neuronxcc.nki.language as nl

    layout = nki_emu.tensor.NkiTensor.allocate((200, 64), np.float32, "shared_hbm").layout
    p, f = arange(128)[:, None], arange(64)[None, :]
    tail = resolve(layout, (128 + p, f), "x")
    assert tail.__class__.__name__ == "Gather"
    assert gather_signature(resolve(layout, (128 + p, f), "x")) == gather_signature(tail)
    assert gather_signature(resolve(layout, (100 + p, f), "x")) != gather_signature(tail)

    def k(x):
        o = nl.ndarray((200, 64), dtype=np.float32, buffer=nl.shared_hbm)
        for rep in nl.sequential_range(3):
            for i in nl.affine_range(2):
                i_p = i * 128 + nl.arange(128)[:, None]
                t = nl.load(x[i_p, nl.arange(64)[None, :]], mask=(i_p < 200))
                nl.store(o[i_p, nl.arange(64)[None, :]], value=t, mask=(i_p < 200))
        return o
    x = np.ones((200, 64), np.float32)
    first, second = (nki_emu.run(k, [x]).profile for _ in range(2))
    assert first["latency_ms"] == second["latency_ms"]
    assert first["hbm_read_bytes"] == second["hbm_read_bytes"] == 200 * 64 * 4  # repeats hit SBUF


def test_trn2_vector_and_scalar_share_psum_except_one_bank():
    """trn2 lifts trn1's shared PSUM port, but VectorE and ScalarE still take turns on one bank
    (nki-facts §3.1: "not the same bank")."""
    from nki_emu.cost import targets
    from nki_emu.cost.scheduler import Scheduler
    s = Scheduler(targets.get("trn2"))
    _, end = s.compute("vector", 100.0, [], [], psum_blocks=[(1, 0)], touches_psum=True)
    start_same, _ = s.compute("scalar", 100.0, [], [], psum_blocks=[(1, 0)], touches_psum=True)
    s2 = Scheduler(targets.get("trn2"))
    s2.compute("vector", 100.0, [], [], psum_blocks=[(1, 0)], touches_psum=True)
    start_other, _ = s2.compute("scalar", 100.0, [], [], psum_blocks=[(2, 0)], touches_psum=True)
    t1 = Scheduler(targets.get("trn1"))
    t1.compute("vector", 100.0, [], [], psum_blocks=[(1, 0)], touches_psum=True)
    start_trn1, _ = t1.compute("scalar", 100.0, [], [], psum_blocks=[(2, 0)], touches_psum=True)
    assert start_same >= end and start_other == 0.0 and start_trn1 >= 100.0


def test_trn2_vector_performance_mode_for_16_bit_tiles():
    """trn2 guide: tensor_copy/tensor_scalar 4x with 16-bit tiles all in SBUF, 2x with one in PSUM;
    tensor_tensor 2x with all in SBUF; nothing on trn1 or for fp32 (nki-facts §3.3)."""
    t2, t1 = targets.get("trn2"), targets.get("trn1")
    assert formulas.cycles("tensor_scalar", 2048, {"dt16": "sbuf"}, "vector", t2) == 512
    assert formulas.cycles("tensor_copy", 2048, {"dt16": "psum"}, "vector", t2) == 1024
    assert formulas.cycles("tensor_tensor", 2048, {"dt16": "sbuf"}, "vector", t2) == 2048
    assert formulas.cycles("tensor_scalar", 2048, {"dt16": "sbuf"}, "vector", t1) == 2048
    assert formulas.cycles("tensor_scalar", 2048, {"dt16": "sbuf"}, "scalar", t2) == 2048
    assert formulas.cycles("tensor_scalar", 2048, {}, "vector", t2) == 2048
    import nki_emu
    nki_emu.install()  # the nki / neuronxcc.nki aliases (each test may run alone)
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl

    def k(x):
        o = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        t = nl.load(x, dtype=nl.bfloat16)
        nl.store(o, nisa.tensor_scalar(t, op0=nl.multiply, operand0=2.0, engine=nisa.vector_engine))
        return o
    records, _ = nki_emu.run(k, [np.ones((128, 2048), np.float32)], keep_trace=True).trace
    infos = [r[4] for r in records if r[0] == "C" and r[2] == "tensor_scalar"]
    assert infos and infos[0].get("dt16") == "sbuf"


def test_dma_transpose_and_hardware_dge_in_the_dma_model():
    """A DMA transpose from HBM runs at 90 % of the DMA bandwidth, hardware DGE delays a
    dma_copy by ~600 ns (nki-facts §3.1); plain loads keep their 10-field records."""
    import nki_emu
    nki_emu.install()  # the nki / neuronxcc.nki aliases (each test may run alone)
    import nki.isa as nisa
    import nki.language as nl

    def kernel(mode):
        def k(x):
            t = nl.ndarray((128, 128), dtype=np.float32, buffer=nl.sbuf)
            if mode == "transpose":
                nisa.dma_transpose(dst=t, src=x)
            else:
                nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge if mode == "hwdge" else nisa.dge_mode.unknown)
            o = nl.ndarray((128, 128), dtype=np.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=o, src=t)
            return o
        return k
    x = np.ones((128, 128), np.float32)
    runs = {m: nki_emu.run(kernel(m), [x], target="trn2", keep_trace=True) for m in ("plain", "transpose", "hwdge")}
    loads = {m: [r for r in r_.trace[0] if r[0] == "L"][0] for m, r_ in runs.items()}
    # the last element also carries the record's pipelining tag (Tracer.pipe_stages)
    flags = {m: {k: v for k, v in rec[10].items() if k != "pipe"} for m, rec in loads.items()}
    assert len(loads["plain"]) == 11 and flags["plain"] == {} and flags["transpose"] == {"transpose": "hbm"}
    assert flags["hwdge"] == {"dge": "hwdge"}
    busy = {m: r.profile["engine_busy_ms"]["dma"] for m, r in runs.items()}
    t2 = targets.get("trn2")
    from nki_emu.cost import tracer
    # without the HBM-share floor (on trn2 the 362 GB/s share binds even one direction)
    uncapped = replace(t2, hbm_bytes_per_ns=0.0)
    lat = {m: tracer.replay(*r.trace, uncapped)["latency_ms"] for m, r in runs.items()}
    one_load = 128 * 128 * 4 / 16 / t2.dma_queue_bytes_per_ns * 1e-6  # ms per engine, 16 engines
    assert abs((busy["transpose"] - busy["plain"]) - one_load * (1 / 0.9 - 1)) < 1e-9
    assert abs((lat["hwdge"] - lat["plain"]) - 600e-6) < 1e-9 and busy["hwdge"] == busy["plain"]


def test_sbuf_to_sbuf_dma_copy_moves_no_hbm_bytes():
    import nki_emu
    nki_emu.install()  # the nki / neuronxcc.nki aliases (each test may run alone)
    import nki.isa as nisa
    import nki.language as nl

    def k(x):
        a = nl.ndarray((128, 64), dtype=np.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, 64), dtype=np.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        nisa.dma_copy(dst=b, src=a)
        nisa.dma_copy(dst=b, src=a)
        o = nl.ndarray((128, 64), dtype=np.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o, src=b)
        return o
    p = nki_emu.run(k, [np.ones((128, 64), np.float32)]).profile
    assert p["hbm_read_bytes"] == 128 * 64 * 4 and p["hbm_write_bytes"] == 128 * 64 * 4
    assert p["dma_count"] == 4 and p["hoisted_loads"] == 0

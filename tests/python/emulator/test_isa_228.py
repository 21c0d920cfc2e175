"""SDK 2.28 ``nki.isa`` conformance (issue 20): each ``dst=`` form and each new instruction
against a NumPy statement of its documented semantics (docs/nki-facts.md §2.9), plus the
2.28 rules (direct vs automatic allocation, I/O in HBM) and the NC-v3-only APIs on trn1."""
import numpy as np

from emulator.emu_helpers import expect_error, rand
import nki_emu
import nki.isa as nisa
import nki.language as nl


def _run(body, *args, target="trn2"):
    return nki_emu.run(body, list(args), trace=False, target=target).outputs


def _hbm(shape, dtype=np.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


def _sb(shape, dtype=np.float32, buffer=nl.sbuf):
    return nl.ndarray(shape, dtype=dtype, buffer=buffer)


def _load(x):
    t = _sb(x.shape, x.dtype)
    nisa.dma_copy(dst=t, src=x)
    return t


def _ret(t):
    o = _hbm(t.shape, t.dtype)
    nisa.dma_copy(dst=o, src=t)
    return o


def test_nc_matmul_dst_accumulates_over_k():
    def k(s_hbm, a_hbm):
        p = _sb((32, 64), buffer=nl.psum)
        for i in nl.affine_range(2):
            s = _load(s_hbm[i * 128:(i + 1) * 128, :])
            a = _load(a_hbm[i * 128:(i + 1) * 128, :])
            nisa.nc_matmul(p, s, a)  # positional 2.28 form
        r = _sb((32, 64))
        nisa.tensor_copy(dst=r, src=p)
        return _ret(r)
    s, a = rand(256, 32), rand(256, 64, seed=1)
    assert np.allclose(_run(k, s, a), s.T @ a, rtol=1e-4, atol=1e-4)


def test_nc_matmul_dst_must_be_psum():
    def k(s_hbm):
        s = _load(s_hbm)
        nisa.nc_matmul(dst=_sb((8, 8)), stationary=s, moving=s)
    expect_error("err_unsupported_memory", _run, k, rand(8, 8))


def test_elementwise_dst_forms():
    def k(x_hbm, y_hbm, v_hbm):
        x, y, v = _load(x_hbm), _load(y_hbm), _load(v_hbm)
        outs = [_sb(x.shape) for _ in range(7)]
        nisa.tensor_tensor(dst=outs[0], data1=x, data2=y, op=nl.subtract)
        nisa.tensor_scalar(outs[1], x, nl.multiply, v, op1=nl.add, operand1=1.5)
        nisa.activation(dst=outs[2], op=nl.exp, data=x, bias=v, scale=0.5)
        nisa.reciprocal(dst=outs[3], data=y)
        nisa.tensor_tensor_scan(outs[4], x, y, 0.25, np.multiply, np.add)
        nisa.memset(dst=outs[5], value=3.0)
        nisa.tensor_copy(dst=outs[6], src=x, engine=nisa.scalar_engine)  # ScalarE copy: NC-v3
        red = _sb((x.shape[0], 1))
        nisa.tensor_reduce(dst=red, op=nl.max, data=x, axis=[1], negate=True)
        return tuple(_ret(o) for o in outs) + (_ret(red),)
    x, y, v = rand(16, 8), np.abs(rand(16, 8, seed=1)) + 0.5, rand(16, 1, seed=2)
    got = _run(k, x, y, v)
    scan, prev = np.empty_like(x), np.full(16, 0.25, np.float32)
    for i in range(8):
        prev = x[:, i] * prev + y[:, i]
        scan[:, i] = prev
    want = [x - y, x * v + 1.5, np.exp(x * 0.5 + v), 1 / y, scan, np.full_like(x, 3.0), x,
            -x.max(axis=1, keepdims=True)]
    for g, w in zip(got, want):
        assert np.allclose(g, w, rtol=1e-5, atol=1e-6)


def test_activation_reduce_registers():
    def k(x_hbm):
        x = _load(x_hbm)
        a, b, res = _sb(x.shape), _sb(x.shape), _sb((x.shape[0], 1))
        nisa.activation(dst=a, op=nl.square, data=x, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activation(dst=b, op=nl.copy, data=x, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reduce,
                        reduce_res=res)
        r2 = _sb((x.shape[0], 1))
        nisa.activation_reduce(dst=b, op=nl.copy, data=x, reduce_op=nl.add, reduce_res=r2)
        return _ret(res), _ret(r2)
    x = rand(8, 16)
    res, r2 = _run(k, x)
    assert np.allclose(res, (x * x + x).sum(axis=1, keepdims=True), rtol=1e-5)
    assert np.allclose(r2, x.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_iota_and_affine_select_patterns():
    def k(x_hbm):
        x = _load(x_hbm)
        io = _sb((8, 12), np.int32)
        nisa.iota(io, [[4, 3], [1, 4]], 5, channel_multiplier=100)
        sel = _sb((8, 12))
        nisa.affine_select(sel, [[-1, 12]], 0, 1, x, -9.0, cmp_op=nl.greater_equal)  # causal: c - j >= 0
        return _ret(io), _ret(sel)
    x = rand(8, 12)
    io, sel = _run(k, x)
    c, j = np.arange(8)[:, None], np.arange(12)[None, :]
    assert np.array_equal(io, 5 + 100 * c + 4 * (j // 4) + (j % 4))
    assert np.array_equal(sel, np.where(c - j >= 0, x, np.float32(-9.0)))


def test_nc_transpose_dst():
    def k(x_hbm):
        x = _load(x_hbm)
        t = _sb((16, 32), buffer=nl.psum)
        nisa.nc_transpose(dst=t, data=x)
        r = _sb((16, 32))
        nisa.tensor_copy(r, t)
        return _ret(r)
    x = rand(32, 16)
    assert np.array_equal(_run(k, x), x.T)


def test_dma_copy_cast_rmw_and_dge():
    def k(x_hbm, y_hbm):
        x = _load(x_hbm)
        low = _sb(x.shape, nl.bfloat16)
        nisa.dma_copy(dst=low, src=x_hbm, dge_mode=nisa.dge_mode.hwdge)
        acc = _load(y_hbm)
        nisa.dma_copy(dst=acc, src=x, dst_rmw_op=nl.add)
        o = _hbm(x.shape)
        nisa.dma_copy(dst=o, src=low)
        return o, _ret(acc)
    x, y = rand(16, 8), rand(16, 8, seed=1)
    low, acc = _run(k, x, y)
    bits = x.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).view(np.float32)
    assert np.array_equal(low, rounded) and np.allclose(acc, x + y)


def test_dma_copy_hwdge_needs_trn2_and_sizes_must_match():
    def k(x_hbm):
        t = _sb(x_hbm.shape)
        nisa.dma_copy(dst=t, src=x_hbm, dge_mode=nisa.dge_mode.hwdge)
    expect_error("err_unsupported_arch", lambda: _run(k, rand(8, 8), target="trn1"))
    def k2(x_hbm):
        nisa.dma_copy(dst=_sb((8, 4)), src=x_hbm)
    expect_error("err_dma_size_mismatch", _run, k2, rand(8, 8))
    def k3(x_hbm):
        nisa.dma_copy(dst=_sb((8, 8), buffer=nl.psum), src=x_hbm)
    expect_error("err_unsupported_memory", _run, k3, rand(8, 8))


def test_dma_copy_indirect_gather_with_oob_skip():
    def k(x_hbm, idx_hbm):
        idx = _load(idx_hbm)
        t = _sb((4, 6))
        nisa.memset(t, -1.0)
        nisa.dma_copy(dst=t, src=x_hbm[idx[nl.arange(4)[:, None], 0], nl.arange(6)[None, :]],
                      oob_mode=nisa.oob_mode.skip)
        return _ret(t)
    x = rand(10, 6)
    idx = np.array([[3], [0], [42], [9]], np.int32)
    got = _run(k, x, idx)
    want = np.stack([x[3], x[0], np.full(6, -1.0, np.float32), x[9]])
    assert np.array_equal(got, want)


def test_dma_transpose_axes():
    def k(a_hbm, b_hbm):
        a = _sb((8, 16))
        nisa.dma_transpose(dst=a, src=a_hbm)
        b = _sb((5, 3, 4))
        nisa.dma_transpose(b, b_hbm, axes=(2, 1, 0))
        return _ret(a), _ret(b)
    a, b = rand(16, 8), rand(4, 3, 5, seed=1)
    ga, gb = _run(k, a, b)
    assert np.array_equal(ga, a.T) and np.array_equal(gb, b.transpose(2, 1, 0))
    def bad(a_hbm):
        nisa.dma_transpose(_sb((8, 16)), a_hbm, axes=(0, 1))
    expect_error("err_dma_transpose_axes", _run, bad, a)


def test_scalar_tensor_tensor_and_tensor_scalar_reduce():
    def k(x_hbm, y_hbm, v_hbm):
        x, y, v = _load(x_hbm), _load(y_hbm), _load(v_hbm)
        a, b, r = _sb(x.shape), _sb(x.shape), _sb((x.shape[0], 1))
        nisa.scalar_tensor_tensor(dst=a, data=x, op0=nl.subtract, operand0=v, op1=nl.multiply, operand1=y)
        nisa.tensor_scalar_reduce(dst=b, data=x, op0=nl.multiply, operand0=2.0, reduce_op=nl.max, reduce_res=r)
        return _ret(a), _ret(b), _ret(r)
    x, y, v = rand(8, 16), rand(8, 16, seed=1), rand(8, 1, seed=2)
    a, b, r = _run(k, x, y, v)
    assert np.allclose(a, (x - v) * y) and np.allclose(b, 2 * x) and np.allclose(r, (2 * x).max(1, keepdims=True))


def test_partition_reduce_max8_find_match_replace():
    def k(x_hbm):
        x = _load(x_hbm)
        pr, top, idx, rep, ridx = _sb((1, 32)), _sb((8, 8)), _sb((8, 8), nl.uint32), _sb(x.shape), \
            _sb((8, 8), nl.uint32)
        nisa.tensor_partition_reduce(dst=pr, op=nl.add, data=x)
        nisa.max8(dst=top, src=x)
        nisa.nc_find_index8(dst=idx, data=x, vals=top)
        nisa.nc_match_replace8(dst=rep, data=x, vals=top, imm=0.0, dst_idx=ridx)
        return _ret(pr), _ret(top), _ret(idx), _ret(rep), _ret(ridx)
    x = rand(8, 32)
    pr, top, idx, rep, ridx = _run(k, x)
    order = np.argsort(-x, axis=1)[:, :8]
    want_rep = x.copy()
    np.put_along_axis(want_rep, order, 0.0, axis=1)
    assert np.allclose(pr, x.sum(axis=0, keepdims=True), rtol=1e-5)
    assert np.array_equal(top, np.take_along_axis(x, order, axis=1))
    assert np.array_equal(idx, order) and np.array_equal(ridx, order) and np.array_equal(rep, want_rep)


def test_stream_shuffle_bn_stats_aggr():
    def k(x_hbm):
        x = _load(x_hbm)
        sh = _sb(x.shape)
        nisa.memset(sh, 7.0)
        mask = [(i + 1) % 32 for i in range(31)] + [255]
        nisa.nc_stream_shuffle(dst=sh, src=x, shuffle_mask=mask)
        st, ag = _sb((64, 6)), _sb((64, 2))
        nisa.bn_stats(dst=st, data=x)
        nisa.bn_aggr(dst=ag, data=st)
        return _ret(sh), _ret(st), _ret(ag)
    x = rand(64, 10)
    sh, st, ag = _run(k, x)
    want = np.full_like(x, 7.0)
    for q in (0, 32):
        for i in range(31):
            want[q + i] = x[q + i + 1]
    ev, od = x[:, 0::2], x[:, 1::2]
    assert np.array_equal(sh, want)
    assert np.allclose(st, np.stack([np.full(64, 5.0), ev.mean(1), ev.var(1) * 5, np.full(64, 5.0), od.mean(1),
                                     od.var(1) * 5], axis=1), rtol=1e-5, atol=1e-5)
    assert np.allclose(ag, np.stack([x.mean(1), x.var(1)], axis=1), rtol=1e-5, atol=1e-5)


def test_dropout_predicated_copy_selects_gathers():
    def k(x_hbm, pred_hbm, idx_hbm, b_hbm):
        x, pred, idx, b = _load(x_hbm), _load(pred_hbm), _load(idx_hbm), _load(b_hbm)
        d0, d1, cp, rs, sr, ng = (_sb(x.shape) for _ in range(6))
        nisa.dropout(dst=d0, data=x, prob=0.0)
        nisa.dropout(dst=d1, data=x, prob=1.0)
        nisa.memset(cp, 0.0)
        nisa.tensor_copy_predicated(dst=cp, src=x, predicate=pred)
        rr, srr = _sb((8, 1)), _sb((8, 1))
        nisa.range_select(dst=rs, on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=b,
                          bound1=b + 4.0, reduce_res=rr, reduce_op=nl.maximum)
        nisa.select_reduce(dst=sr, predicate=pred, on_true=x, on_false=-2.0, reduce_res=srr,
                           reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.maximum)
        g = _sb((8, 3))
        nisa.nc_n_gather(dst=g, data=x, indices=idx)
        g2 = nl.gather_flattened(x, idx)
        return tuple(_ret(t) for t in (d0, d1, cp, rs, rr, sr, srr, g)) + (_ret(nl.copy(g2)),)
    x = rand(8, 16)
    pred = (np.random.default_rng(3).random((8, 16)) > 0.5).astype(np.uint8)
    idx = np.random.default_rng(4).integers(0, 16, (8, 3)).astype(np.uint32)
    b = np.arange(8, dtype=np.float32)[:, None]
    d0, d1, cp, rs, rr, sr, srr, g, g2 = _run(k, x, pred, idx, b)
    i = np.arange(16)[None, :]
    want_rs = np.where((i >= b) & (i < b + 4), x, np.float32(-3.4028235e38))
    want_sr = np.where(pred != 0, x, np.float32(-2.0))
    assert np.array_equal(d0, x) and np.array_equal(d1, np.zeros_like(x))
    assert np.array_equal(cp, np.where(pred != 0, x, 0))
    assert np.array_equal(rs, want_rs) and np.array_equal(rr, want_rs.max(1, keepdims=True))
    assert np.array_equal(sr, want_sr) and np.array_equal(srr, want_sr.max(1, keepdims=True))
    assert np.array_equal(g, np.take_along_axis(x, idx.astype(np.int64), 1)) and np.array_equal(g2, g)


def test_tensor_scalar_cumulative_and_load_transpose2d():
    def k(x_hbm):
        x = _load(x_hbm)
        c = _sb(x.shape)
        nisa.tensor_scalar_cumulative(dst=c, src=x, op0=nl.multiply, op1=nl.add, imm0=2.0)
        return _ret(c), _ret(nl.load_transpose2d(x_hbm))
    x = rand(8, 16)
    c, t = _run(k, x)
    assert np.allclose(c, np.cumsum(2 * x, axis=1), rtol=1e-5, atol=1e-5) and np.array_equal(t, x.T)


def test_gen3_only_apis_refused_on_trn1_and_v4_apis_everywhere():
    def k(x_hbm):
        x = _load(x_hbm)
        b = _load(x_hbm[:, 0:1])
        nisa.range_select(dst=_sb(x.shape), on_true_tile=x, comp_op0=nl.less, comp_op1=nl.less, bound0=b, bound1=b)
    expect_error("err_unsupported_arch", lambda: _run(k, rand(8, 8), target="trn1"))
    def k2(x_hbm):
        nisa.exponential(dst=_sb((8, 8)), src=_load(x_hbm))
    err = expect_error("err_api_not_emulated", _run, k2, rand(8, 8))
    assert "exponential" in err.message and "NeuronCore-v4" in err.message


def test_never_mix_automatic_and_direct_allocation():
    def direct(x_hbm):
        a = nl.ndarray((8, 8), dtype=np.float32, buffer=nl.sbuf, address=(0, 0))
        b = nl.ndarray((8, 8), dtype=np.float32, buffer=nl.sbuf, address=(0, 1024))
        nisa.dma_copy(dst=a, src=x_hbm)
        nisa.tensor_copy(dst=b, src=a)
        return _ret(b)
    x = rand(8, 8)
    assert np.array_equal(_run(direct, x), x)
    def mixed(x_hbm):
        nl.ndarray((8, 8), dtype=np.float32, buffer=nl.sbuf, address=(0, 0))
        nl.ndarray((8, 8), dtype=np.float32, buffer=nl.sbuf)
    err = expect_error("err_mixed_allocation", _run, mixed, x)
    assert "never mix automatic and direct allocation" in err.message
    def too_far(x_hbm):
        nl.ndarray((64, 8), dtype=np.float32, buffer=nl.sbuf, address=(100, 0))
    expect_error("err_direct_allocation_address", _run, too_far, x)


def test_kernel_io_lives_in_hbm():
    def k(x_hbm):
        return _load(x_hbm)  # an SBUF tile is no kernel output
    try:
        _run(k, rand(8, 8))
    except nki_emu.UnwrittenOutputError as err:
        assert "SBUF tile" in str(err) and "HBM" in str(err)
    else:
        raise AssertionError("an SBUF output was accepted")


def test_tile_size_per_target():
    seen = {}

    def k(x_hbm):
        seen[nisa.get_nc_version()] = (nl.tile_size.total_available_sbuf_size, nl.tile_size.sbuf_size_bytes,
                                       nl.tile_size.psum_num_banks, nl.tile_size.pmax)
    _run(k, rand(2, 2), target="trn1")
    _run(k, rand(2, 2), target="trn2")
    assert seen[nisa.nc_version.gen2] == (176 * 1024, 128 * 192 * 1024, 8, 128)
    assert seen[nisa.nc_version.gen3] == (208 * 1024, 128 * 224 * 1024, 8, 128)


def test_dynamic_range_and_no_reorder():
    def k(x_hbm):
        acc = _sb(x_hbm.shape)
        nisa.memset(acc, 0.0)
        x = _load(x_hbm)
        with nl.no_reorder():
            for _ in nl.dynamic_range(3):
                nisa.tensor_tensor(acc, acc, x, nl.add)
        return _ret(acc)
    x = rand(4, 4)
    assert np.allclose(_run(k, x), 3 * x)


def test_local_gather_per_16_partition_group():
    def k(src_hbm, idx_hbm):
        src, idx = _load(src_hbm), _load(idx_hbm)
        out = _sb((32, 6 * 2))
        nisa.local_gather(dst=out, src_buffer=src, index=idx, num_elem_per_idx=2, num_valid_indices=6)
        return _ret(out)
    src = rand(32, 40)
    idx = np.random.default_rng(5).integers(0, 39, (32, 2)).astype(np.uint16)
    got = _run(k, src, idx)
    want = np.empty((32, 12), np.float32)
    for g in range(2):
        offsets = [int(idx[g * 16 + r, c]) for c in range(2) for r in range(16)][:6]  # partition-first order
        for p in range(g * 16, g * 16 + 16):
            want[p] = np.concatenate([src[p, o:o + 2] for o in offsets])
    assert np.array_equal(got, want)


def test_sequence_bounds_runs_and_padding():
    def k(ids_hbm):
        ids = _load(ids_hbm)
        out = _sb((1, 2, 10))
        nisa.sequence_bounds(dst=out, segment_ids=ids)
        return _ret(out)
    ids = np.array([[0, 3, 3, 3, 5, 0, 0, 7, 7, 2]], np.float32)
    got = _run(k, ids)
    start = [10, 1, 1, 1, 4, 10, 10, 7, 7, 9]
    end = [-1, 4, 4, 4, 5, -1, -1, 9, 9, 10]
    assert np.array_equal(got, np.array([[start, end]], np.float32))


def test_nonzero_with_count_on_core_partitions():
    def k(x_hbm):
        x = _load(x_hbm)
        out = _sb((32, 9), nl.int32)
        nisa.memset(out, 5)
        nisa.nonzero_with_count(dst=out, src=x, index_offset=16, padding_val=-1)
        return _ret(out)
    x = np.zeros((32, 8), np.float32)
    x[0, [1, 2, 5]] = 1.0
    x[16, [0]] = 2.0
    x[3, [4]] = 1.0  # not a core's first partition: ignored
    got = _run(k, x)
    assert list(got[0]) == [17, 18, 21, -1, -1, -1, -1, -1, 3]
    assert list(got[16]) == [16, -1, -1, -1, -1, -1, -1, -1, 1]
    assert (got[3] == 5).all()
    expect_error("err_unsupported_arch", lambda: _run(k, x, target="trn1"))


def test_nc_matmul_fp8_double_row():
    def k(s_hbm, m_hbm):
        s = _sb((16, 2, 8), nl.float8_e4m3)
        m = _sb((16, 2, 32), nl.float8_e4m3)
        nisa.dma_copy(dst=s, src=s_hbm)
        nisa.dma_copy(dst=m, src=m_hbm)
        p = _sb((8, 32), buffer=nl.psum)
        nisa.nc_matmul(p, s, m, perf_mode=nisa.matmul_perf_mode.double_row)
        r = _sb((8, 32))
        nisa.tensor_copy(r, p)
        return _ret(r)
    rng = np.random.default_rng(7)
    s = rng.integers(-3, 4, (16, 2, 8)).astype(np.float32)  # exact in fp8
    m = rng.integers(-3, 4, (16, 2, 32)).astype(np.float32)
    want = np.einsum("kjm,kjn->mn", s, m)
    assert np.array_equal(_run(k, s, m), want)
    expect_error("err_unsupported_arch", lambda: _run(k, s, m, target="trn1"))
    from nki_emu.cost import formulas, targets
    t2 = targets.get("trn2")
    assert formulas.cycles("nc_matmul", 512, {"fp32": False, "double_row": True, "n_stationary": 128}, "tensor",
                           t2) == 256


def test_legacy_tile_returning_forms_of_the_new_instructions():
    """SDK 2.26 (neuronxcc.nki) spelled these instructions without dst: they return a tile."""
    import neuronxcc.nki.isa as legacy

    def k(x_hbm, y_hbm):
        x, y = nl.load(x_hbm), nl.load(y_hbm)
        r = nl.ndarray((16, 1), dtype=np.float32, buffer=nl.sbuf)
        outs = [legacy.scalar_tensor_tensor(data=x, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y),
                legacy.tensor_scalar_reduce(data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add, reduce_res=r),
                legacy.max8(src=x), legacy.bn_aggr(legacy.bn_stats(x)), legacy.dropout(x, 0.0),
                legacy.tensor_partition_reduce(nl.add, x), legacy.dma_transpose(x_hbm)]
        legacy.dma_copy(dst=y, src=x_hbm, mask=None)
        return tuple(_ret(t) for t in outs) + (_ret(r), _ret(y))
    x, y = rand(16, 32), rand(16, 32, seed=1)
    stt, tsr, top, ag, dr, pr, tr, r, cp = _run(k, x, y, target="trn1")
    assert np.allclose(stt, 2 * x + y) and np.allclose(tsr, x + 1) and np.allclose(r, (x + 1).sum(1, keepdims=True))
    assert np.array_equal(top, -np.sort(-x, axis=1)[:, :8]) and np.array_equal(dr, x) and np.array_equal(tr, x.T)
    assert np.allclose(ag, np.stack([x.mean(1), x.var(1)], 1), rtol=1e-4, atol=1e-5)
    assert np.allclose(pr, x.sum(0, keepdims=True), rtol=1e-5) and np.array_equal(cp, x)
    def masked(x_hbm):
        legacy.max8(src=nl.load(x_hbm), mask=nl.arange(16)[:, None] < 8)
    err = expect_error("err_api_not_emulated", lambda: _run(masked, x))
    assert "mask=" in err.message


def test_legacy_forms_of_gathers_bounds_and_match():
    import neuronxcc.nki.isa as legacy

    def k(src_hbm, idx_hbm, ids_hbm):
        src, idx, ids = nl.load(src_hbm), nl.load(idx_hbm), nl.load(ids_hbm)
        g = legacy.local_gather(src, idx, 2, 4)
        b = legacy.sequence_bounds(segment_ids=ids)
        top = legacy.max8(src=src)
        where = legacy.nc_find_index8(data=src, vals=top)
        rep = legacy.nc_match_replace8(data=src, vals=top, imm=0.0)
        return _ret(g), _ret(b), _ret(where), _ret(rep)
    src = rand(16, 40)
    idx = np.random.default_rng(2).integers(0, 39, (16, 2)).astype(np.uint16)
    ids = np.array([[1, 1, 0, 4]], np.float32)
    g, b, where, rep = _run(k, src, idx, ids, target="trn1")
    offsets = [int(idx[r, c]) for c in range(2) for r in range(16)][:4]
    assert g.shape == (16, 4, 2) and np.array_equal(g, np.stack([[src[p, o:o + 2] for o in offsets] for p in range(16)]))
    assert np.array_equal(b, np.array([[[0, 0, 4, 3], [2, 2, -1, 4]]], np.float32))
    order = np.argsort(-src, axis=1)[:, :8]
    want = src.copy()
    np.put_along_axis(want, order, 0.0, axis=1)
    assert np.array_equal(where, order) and np.array_equal(rep, want)


def test_nc_stream_shuffle_positional_tiles_are_ambiguous():
    """SDK 2.26 took (src, dst, mask), 2.28 takes (dst, src, mask): refused, never guessed."""
    def k(x_hbm):
        x = _load(x_hbm)
        nisa.nc_stream_shuffle(_sb(x.shape), x, list(range(32)))
    err = expect_error("err_ambiguous_positional_arguments", _run, k, rand(32, 4))
    assert "dst=" in err.message


def test_mixed_positional_and_keyword_2_28_calls_bind_to_the_2_28_form():
    def k(a_hbm, b_hbm):
        a, b = _load(a_hbm), _load(b_hbm)
        out = _sb(a.shape)
        nisa.tensor_tensor_scan(out, a, b, initial=0.0, op0=np.multiply, op1=np.add)
        return _ret(out)
    a, b = rand(4, 6), rand(4, 6, seed=1)
    ref, prev = np.empty_like(a), np.zeros(4, np.float32)
    for i in range(6):
        prev = a[:, i] * prev + b[:, i]
        ref[:, i] = prev
    assert np.allclose(_run(k, a, b), ref, rtol=1e-5, atol=1e-6)

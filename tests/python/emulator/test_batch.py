"""Batched execution (nki_emu.batch, nki_emu.run_batched; docs/nki-emulator.md "Batched
execution"): every op, run once for several input sets on random data, gives each set
bit-for-bit what a run of that set alone gives, and the traced member's profile is that
of its own traced run."""
import io

import numpy as np

from emulator.emu_helpers import rand
import nki_emu
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
from nki_emu import batch, dtypes, language, tensor

MEMBERS = 4


def _out(shape, dtype=np.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


def _io(shape):
    """Full-tile index grid of a 2-D shape."""
    return nl.arange(shape[0])[:, None], nl.arange(shape[1])[None, :]


def _sets(*makers):
    """MEMBERS input sets; ``makers``: callables seed -> argument (random per set)."""
    return [[make(seed) for make in makers] for seed in range(1, MEMBERS + 1)]


def _same(a, b):
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, y.shape, x.dtype, y.dtype)
        assert np.array_equal(x, y, equal_nan=True), np.nanmax(np.abs(x.astype(np.float64) - y))


def check(kernel, input_sets, trace_member=None, target="trn1"):
    """Runs ``kernel`` batched and set by set on ``target``; asserts equal outputs (and profiles)."""
    trace_member = len(input_sets) - 1 if trace_member is None else trace_member
    batched = nki_emu.run_batched(kernel, input_sets, trace_member=trace_member, target=target)
    assert len(batched.outputs) == len(input_sets)
    for member, args in enumerate(input_sets):
        single = nki_emu.run(kernel, args, trace=member == trace_member, target=target)
        _same(single.outputs, batched.outputs[member])
        if member == trace_member:
            assert single.profile == batched.profile
    distinct = [np.asarray(o if not isinstance(o, tuple) else o[0]) for o in batched.outputs]
    return batched, distinct


def _unary(name):
    fn = getattr(nl, name)

    def k(x):
        o = _out(x.shape)
        nl.store(o, fn(nl.load(x)))
        return o
    return k


def _binary(name):
    fn = getattr(nl, name)

    def k(x, y):
        o = _out(x.shape)
        a, b = nl.load(x), nl.load(y)
        nl.store(o[_io((16, 32))], fn(a, b))
        nl.store(o[_io((16, 32))], nl.add(fn(a, 1.5), fn(2.0, b)))  # scalars either side
        return o
    return k


def test_every_unary_op_matches_its_per_seed_runs():
    positive = {"log", "sqrt", "rsqrt"}
    for name in ("exp", "log", "sqrt", "rsqrt", "square", "reciprocal", "sigmoid", "tanh", "relu", "gelu",
                 "gelu_apprx_tanh", "gelu_dx", "silu", "silu_dx", "softplus", "mish", "erf", "erf_dx", "abs",
                 "sign", "sin", "cos", "tan", "arctan", "negative", "ceil", "floor", "trunc", "identity"):
        make = (lambda s: np.abs(rand(16, 32, seed=s)) + 0.1) if name in positive else (lambda s: rand(16, 32, seed=s))
        _, outs = check(_unary(name), _sets(make))
        assert not np.array_equal(outs[0], outs[1]), name  # the sets really differ


def test_every_binary_op_matches_its_per_seed_runs():
    for name in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "equal", "not_equal",
                 "greater", "greater_equal", "less", "less_equal", "fmod"):
        check(_binary(name), _sets(lambda s: np.abs(rand(16, 32, seed=s)) + 0.5,
                                   lambda s: rand(16, 32, seed=100 + s)))
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"):
        def k(x, y, fn=getattr(nl, name)):
            o = _out(x.shape, np.int32)
            nl.store(o, fn(nl.load(x), nl.load(y)))
            return o
        check(k, _sets(lambda s: np.random.default_rng(s).integers(0, 1000, (16, 8)).astype(np.int32),
                       lambda s: np.random.default_rng(50 + s).integers(0, 5, (16, 8)).astype(np.int32)))


def test_operators_broadcasting_and_dtypes():
    def k(x, r):
        o = _out(x.shape)
        t, row = nl.load(x), nl.load(r)
        y = (t * 2.0 - row) / (1.0 + nl.abs(t))  # (P, F) with (P, 1)
        y = -y + np.float32(0.25) * t
        low = nl.copy(y, dtype=nl.bfloat16)  # rounded on write
        nl.store(o, nl.add(low, t.astype(nl.tfloat32)))
        return o
    check(k, _sets(lambda s: rand(32, 16, seed=s), lambda s: rand(32, 1, seed=20 + s)))


def test_reductions_and_loop_reduce():
    def k(x):
        o = _out((x.shape[0], 6))
        t = nl.load(x)
        for j, fn in enumerate((nl.sum, nl.max, nl.min, nl.mean, nl.prod)):
            nl.store(o[nl.arange(x.shape[0])[:, None], j + nl.arange(1)[None, :]], fn(t, axis=[1]))
        acc = nl.ndarray((x.shape[0], 1), dtype=np.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            part = nl.sum(t[nl.arange(x.shape[0])[:, None], i * 4 + nl.arange(4)[None, :]], axis=1)
            acc[...] = nl.loop_reduce(part, op=np.add, loop_indices=[i])
        nl.store(o[nl.arange(x.shape[0])[:, None], 5 + nl.arange(1)[None, :]], acc)
        return o
    check(k, _sets(lambda s: rand(8, 16, seed=s) * 0.5 + 1.0))


def test_loads_and_stores_with_masks_views_and_block_dims():
    def k(x):
        m, n = x.shape
        o = _out((m, n))
        buf = nl.ndarray((3, nl.par_dim(128), 64), dtype=np.float32, buffer=nl.sbuf)
        for i in nl.affine_range(3):
            ip, jf = nl.arange(128)[:, None], nl.arange(64)[None, :]
            rows = i * 128 + ip
            buf[i, ip, jf] = nl.load(x[rows, jf], mask=rows < m)  # the tail tile is masked
            buf[i, ip, jf] += 1.0  # PSUM-style in-place update of an adopted block (copy-on-write)
            nl.store(o[rows, jf], value=nl.exp(buf[i, ip, jf]), mask=rows < m)
        return o
    check(k, _sets(lambda s: rand(300, 64, seed=s)))


def test_copy_broadcast_expand_transpose_and_reshape():
    def k(x, r):
        o = _out((32, 32))
        o2 = _out((32, 32))
        t = nl.load(x)
        row = nl.load(r)  # (1, 32)
        b = nl.broadcast_to(row, (32, 32))  # TensorE broadcast of one partition
        e = nl.expand_dims(nl.sum(t, axis=1), 1)
        tt = nl.transpose(t)
        nl.store(o, nl.add(nl.copy(tt), nl.multiply(b, e.reshape((32, 1)) if False else nl.copy(b))))
        nl.store(o2.reshape((32, 32)), nl.subtract(t, b))
        return o, o2
    check(k, _sets(lambda s: rand(32, 32, seed=s), lambda s: rand(1, 32, seed=40 + s)))


def test_matmuls_and_psum_accumulation():
    def k(a, b):
        o = _out((64, 128))
        o2 = _out((64, 128))
        acc = nl.zeros((64, 128), dtype=np.float32, buffer=nl.psum)
        for kk in nl.affine_range(2):
            lhs = nl.load(a[kk * 64 + nl.arange(64)[:, None], nl.arange(64)[None, :]])  # (K, M)
            rhs = nl.load(b[kk * 64 + nl.arange(64)[:, None], nl.arange(128)[None, :]])  # (K, N)
            acc += nisa.nc_matmul(lhs, rhs)
        nl.store(o, nl.copy(acc))
        x = nl.load(a[nl.arange(64)[:, None], nl.arange(64)[None, :]])
        y = nl.load(b[nl.arange(64)[:, None], nl.arange(128)[None, :]])
        nl.store(o2, nl.add(nl.matmul(x, y, transpose_x=True), nl.matmul(x, y)))
        return o, o2
    check(k, _sets(lambda s: rand(128, 64, seed=s), lambda s: rand(128, 128, seed=60 + s)))


def test_isa_vector_scalar_and_gpsimd_ops():
    def k(x, y, s, b):
        outs = [_out((16, 32)) for _ in range(9)]
        t, u, sv, bv = nl.load(x), nl.load(y), nl.load(s), nl.load(b)
        red = nl.ndarray((16, 1), dtype=np.float32, buffer=nl.sbuf)
        results = [
            nisa.activation(op=nl.exp, data=t, bias=bv, scale=sv),
            nisa.activation_reduce(op=nl.tanh, data=t, reduce_op=nl.add, reduce_res=red, scale=-0.5),
            nisa.tensor_scalar(t, op0=nl.subtract, operand0=sv, reverse0=True, op1=nl.maximum, operand1=0.1),
            nisa.tensor_tensor(t, u, op=nl.multiply),
            nisa.tensor_tensor_scan(t, u, initial=bv, op0=np.multiply, op1=np.add),
            nisa.reciprocal(nisa.tensor_scalar(t, op0=nl.add, operand0=3.0)),
            nisa.tensor_copy(nisa.nc_transpose(t[nl.arange(16)[:, None], nl.arange(16)[None, :]],
                                               engine=nisa.vector_engine)).broadcast_to((16, 16)),
            nisa.affine_select(nl.arange(16)[:, None] >= nl.arange(32)[None, :], t, -9.0),
            nisa.tensor_scalar(nisa.iota(nl.arange(32)[None, :] + 0 * nl.arange(16)[:, None], dtype=np.float32),
                               op0=nl.multiply, operand0=sv),
        ]
        for o, r in zip(outs, results):
            if r.shape == (16, 16):
                nl.store(o[nl.arange(16)[:, None], nl.arange(16)[None, :]], r)
                nl.store(o[nl.arange(16)[:, None], 16 + nl.arange(16)[None, :]], red.broadcast_to((16, 16)))
            else:
                nl.store(o, r)
        m = nisa.memset((16, 32), 2.5, np.float32)
        nl.store(outs[0], nl.add(results[0], m))
        nl.store(outs[1], nisa.tensor_reduce(nl.max, data=nl.add(t, red), axis=[1], negate=True).broadcast_to((16, 32)))
        return tuple(outs)
    check(k, _sets(lambda s: rand(16, 32, seed=s), lambda s: rand(16, 32, seed=30 + s),
                   lambda s: rand(16, 1, seed=70 + s), lambda s: rand(16, 1, seed=80 + s) * 0.1))


def test_indirect_dma_with_different_indices_per_member():
    def k(table, idx):
        o = _out((8, 16))
        ids = nl.load(idx)
        gathered = nl.load(table[ids[nl.arange(8)[:, None], 0], nl.arange(16)[None, :]])
        nl.store(o, nl.multiply(gathered, 2.0))
        scattered = _out((32, 16))
        nl.store(scattered[nl.arange(32)[:, None], nl.arange(16)[None, :]], value=nl.load(table))
        nl.store(scattered[ids[nl.arange(8)[:, None], 0], nl.arange(16)[None, :]], value=gathered)
        return o, scattered
    sets = _sets(lambda s: rand(32, 16, seed=s),
                 lambda s: np.random.default_rng(s).permutation(32)[:8].reshape(8, 1).astype(np.int32))
    for trace_member in (0, MEMBERS - 1):  # the trace holds the traced member's addresses
        check(k, sets, trace_member)


def test_out_of_bound_indirect_index_in_one_member_is_not_uniform():
    def k(table, idx):
        o = _out((4, 8))
        ids = nl.load(idx)
        nl.store(o, nl.load(table[ids[nl.arange(4)[:, None], 0], nl.arange(8)[None, :]]))
        return o
    good = np.array([[1], [0], [3], [2]], np.int32)
    sets = [[rand(16, 8, seed=s), good] for s in range(3)]
    sets[1][1] = np.array([[1], [0], [99], [2]], np.int32)
    try:
        nki_emu.run_batched(k, sets)
    except nki_emu.NKICompileError as err:
        assert err.code == "err_tensor_access_out_of_bound" and err.uniform is False
    else:
        raise AssertionError("an out-of-bound member must refuse the batch")
    try:
        nki_emu.run_batched(_unary("exp"), [[rand(8, 300, seed=s)] for s in range(3)])  # PSUM-free: fine
        nki_emu.run_batched(k, [[rand(16, 8, seed=s), np.array([[1], [0], [3], [2]], np.int32)] for s in range(2)]
                            + [[rand(16, 8), np.array([[1], [0], [3], [2]], np.int32)]])
    except nki_emu.NKICompileError as err:  # pragma: no cover - must not happen
        raise AssertionError(err) from err


def test_refusals_raised_for_all_members_are_uniform():
    def k(x):
        t = nl.load(x)
        return nisa.nc_transpose(t, engine=nisa.vector_engine)  # 64x64 on VectorE: refused
    try:
        nki_emu.run_batched(k, [[rand(64, 64, seed=s)] for s in range(3)])
    except nki_emu.NKICompileError as err:
        assert err.uniform is True and err.code == "err_size_of_dimension_exceed_arch_limit"
    else:
        raise AssertionError("expected a refusal")

    def partial(x):
        o = _out((8, 8))
        nl.store(o[0:4, 0:8], value=nl.load(x[0:4, 0:8]))
        return o
    try:
        nki_emu.run_batched(partial, [[rand(8, 8, seed=s)] for s in range(3)])
    except nki_emu.UnwrittenOutputError as err:
        assert err.uniform is True
    else:
        raise AssertionError("expected unwritten_output")


def test_tensor_values_never_become_python_numbers():
    for convert in (int, float, complex, lambda t: range(t), lambda t: [0, 1][t], round):
        def k(x, convert=convert):
            convert(nl.sum(nl.load(x), axis=1)[0:1, 0:1])
        try:
            nki_emu.run(k, [rand(4, 4)])
        except nki_emu.NKICompileError as err:
            assert err.code == "err_dynamic_control_flow_not_supported", err
        else:
            raise AssertionError(f"{convert} of a tensor was not refused")


def test_mutable_arguments_get_copies_and_inputs_are_never_written():
    def k(x: nt.mutable_tensor, y):
        o = _out(x.shape)
        t = nl.load(x)
        nl.store(x, value=nl.multiply(t, 3.0))
        nl.store(o, nl.add(nl.load(x), nl.load(y)))
        return o
    sets = _sets(lambda s: rand(8, 8, seed=s), lambda s: rand(8, 8, seed=9 + s))
    for args in sets:
        args[1].flags.writeable = False  # what the worker gets: read-only attachments
    originals = [[a.copy() for a in args] for args in sets]
    batched = nki_emu.run_batched(k, sets, trace_member=0)
    for member, args in enumerate(sets):
        assert all(np.array_equal(a, b) for a, b in zip(args, originals[member]))  # untouched
        assert np.array_equal(batched.arguments[member][0], 3 * originals[member][0])  # the kernel's copy
        assert batched.arguments[member][1] is args[1]  # immutable: the caller's own array
        _same(nki_emu.run(k, [a.copy() for a in originals[member]], trace=False).outputs, batched.outputs[member])


def test_returned_inputs_keep_aliasing_visible():
    def k(x):
        return x
    sets = _sets(lambda s: rand(4, 4, seed=s))
    batched = nki_emu.run_batched(k, sets)
    assert all(out is args[0] for out, args in zip(batched.outputs, sets))


def test_sets_that_cannot_share_a_call_are_refused_before_running():
    k = _unary("exp")
    for sets in ([[rand(4, 4)], [rand(4, 5)]], [[rand(4, 4)], [rand(4, 4).astype(np.float64)]],
                 [[rand(4, 4), 1.0], [rand(4, 4), 2.0]]):
        try:
            nki_emu.run_batched(k, sets)
        except nki_emu.NotBatchable:
            continue
        raise AssertionError("expected NotBatchable")


def test_device_print_prints_every_member():
    stream = io.StringIO()
    saved = language._PRINT_STREAM
    language._PRINT_STREAM = stream
    try:
        def k(x):
            nl.device_print("value", nl.load(x))
            o = _out(x.shape)
            nl.store(o, nl.load(x))
            return o
        nki_emu.run_batched(k, [[np.full((1, 1), float(s), np.float32)] for s in range(3)])
    finally:
        language._PRINT_STREAM = saved
    assert stream.getvalue().count("value") == 3 and "[[2.]]" in stream.getvalue()


def test_batch_helpers_line_up_members_as_numpy_lines_up_one_member():
    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(2 * 4, dtype=np.float32).reshape(2, 4)
    x, y = batch.align(a, b)
    assert (x + y).shape == (2, 3, 4) and np.array_equal((x + y)[1], a[1] + b[1])
    assert batch.expand(b, (3, 4)).shape == (2, 3, 4)
    assert batch.static(np.ones((3, 4)), 5).shape == (5, 3, 4)
    assert batch.fit(np.ones(12), (2, 3, 4), batched=False).shape == (3, 4)
    assert batch.fit(np.ones((2, 12)), (2, 3, 4)).shape == (2, 3, 4)
    assert batch.reduce_axes((1, 2, -1)) == (2, 3, -1)
    assert tensor.Members((a[0], a[1]))[1] is not None and dtypes.storage(np.float32) == np.float32


def test_sdk228_dst_forms_dma_and_new_ops_match_their_per_seed_runs():
    """Issue 20: the 2.28 ``dst=`` forms, dma_copy/dma_transpose and the new instructions
    vectorize over the members like the legacy ops (registers and dropout masks included)."""
    import nki.isa as bisa

    def k(x_hbm, y_hbm, idx_hbm):
        def sb(shape, dtype=np.float32, buffer=nl.sbuf):
            return nl.ndarray(shape, dtype=dtype, buffer=buffer)
        x, y, idx = sb((16, 32)), sb((16, 32)), sb((16, 4), np.uint32)
        bisa.dma_copy(dst=x, src=x_hbm)
        bisa.dma_copy(dst=y, src=y_hbm)
        bisa.dma_copy(dst=idx, src=idx_hbm)
        p = sb((32, 32), buffer=nl.psum)
        bisa.nc_matmul(p, x, y)
        bisa.nc_matmul(p, y, x)
        outs = [sb((16, 32)) for _ in range(12)]
        bisa.tensor_tensor(outs[0], x, y, nl.multiply)
        bisa.tensor_scalar(outs[1], x, nl.add, 1.0, op1=nl.multiply, operand1=-2.0)
        red = sb((16, 1))
        bisa.activation(outs[2], nl.exp, x, scale=0.1, reduce_op=nl.add,
                        reduce_cmd=bisa.reduce_cmd.reset_reduce, reduce_res=red)
        bisa.scalar_tensor_tensor(outs[3], x, nl.subtract, red, nl.multiply, y)
        r2 = sb((16, 1))
        bisa.tensor_scalar_reduce(outs[4], y, nl.multiply, 3.0, nl.add, r2)
        bisa.tensor_copy(outs[5], x)
        bisa.tensor_tensor_scan(outs[6], x, y, 0.0, np.multiply, np.add)
        bisa.dropout(outs[7], x, 0.5)
        top = sb((16, 8))
        bisa.max8(top, x)
        bisa.nc_match_replace8(outs[8], x, top, 0.0)
        st, ag = sb((16, 6)), sb((16, 2))
        bisa.bn_stats(st, x)
        bisa.bn_aggr(ag, st)
        g = sb((16, 4))
        bisa.nc_n_gather(g, y, idx)
        bisa.nc_stream_shuffle(dst=outs[9], src=x, shuffle_mask=[(i + 3) % 16 for i in range(16)] + [255] * 16)
        bisa.tensor_scalar_cumulative(outs[10], x, nl.multiply, nl.add, 1.0)
        tr = sb((32, 16))
        bisa.dma_transpose(tr, x_hbm)
        pr = sb((1, 32))
        bisa.tensor_partition_reduce(pr, nl.max, y)
        mm = sb((32, 32))
        bisa.tensor_copy(mm, p)
        o = nl.ndarray((16, 32 * 11 + 1 + 1 + 8 + 6 + 2 + 4), dtype=np.float32, buffer=nl.shared_hbm)
        for i, t in enumerate(outs[:11]):
            bisa.dma_copy(dst=o[:, i * 32:(i + 1) * 32], src=t)
        col = 32 * 11
        for t in (red, r2, top, st, ag, g):
            bisa.dma_copy(dst=o[:, col:col + t.shape[1]], src=t)
            col += t.shape[1]
        o2 = nl.ndarray((32, 16 + 32), dtype=np.float32, buffer=nl.shared_hbm)
        bisa.dma_copy(dst=o2[:, 0:16], src=tr)
        bisa.dma_copy(dst=o2[:, 16:48], src=mm)
        o3 = nl.ndarray((1, 32), dtype=np.float32, buffer=nl.shared_hbm)
        bisa.dma_copy(dst=o3, src=pr)
        return o, o2, o3
    sets = _sets(lambda s: rand(16, 32, seed=s), lambda s: rand(16, 32, seed=40 + s),
                 lambda s: np.random.default_rng(s).integers(0, 32, (16, 4)).astype(np.uint32))
    nki_emu.run(k, sets[0], target="trn2")
    _, outs = check(k, sets)
    assert not np.array_equal(outs[0], outs[1])


def test_dma_copy_gather_with_oob_skip_per_member():
    """Indirect dma_copy with oob_mode.skip: each member skips its own out-of-bound indices."""
    import nki.isa as bisa

    def k(x_hbm, idx_hbm):
        idx = nl.ndarray((4, 1), dtype=np.int32, buffer=nl.sbuf)
        bisa.dma_copy(dst=idx, src=idx_hbm)
        t = nl.ndarray((4, 6), dtype=np.float32, buffer=nl.sbuf)
        bisa.memset(t, -1.0)
        bisa.dma_copy(dst=t, src=x_hbm[idx[nl.arange(4)[:, None], 0], nl.arange(6)[None, :]],
                      oob_mode=bisa.oob_mode.skip)
        o = nl.ndarray((4, 6), dtype=np.float32, buffer=nl.shared_hbm)
        bisa.dma_copy(dst=o, src=t)
        return o
    sets = _sets(lambda s: rand(10, 6, seed=s),
                 lambda s: np.random.default_rng(s).integers(0, 14, (4, 1)).astype(np.int32))
    check(k, sets)


def test_sdk228_gpsimd_gathers_and_bounds_match_their_per_seed_runs():
    """local_gather, nc_n_gather, sequence_bounds and nonzero_with_count with member-specific data."""
    import nki.isa as bisa

    def k(src_hbm, idx_hbm, ids_hbm):
        def sb(shape, dtype=np.float32):
            return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)
        src, idx, ids = sb((16, 40)), sb((16, 2), np.uint16), sb((1, 12))
        bisa.dma_copy(dst=src, src=src_hbm)
        bisa.dma_copy(dst=idx, src=idx_hbm)
        bisa.dma_copy(dst=ids, src=ids_hbm)
        g = sb((16, 8))
        bisa.local_gather(g, src, idx, num_elem_per_idx=2, num_valid_indices=4)
        b = sb((1, 24))
        bisa.sequence_bounds(b, ids)
        nz = sb((16, 41), np.int32)
        bisa.memset(nz, 0)
        bisa.nonzero_with_count(nz, src)
        outs = []
        for t in (g, b, nz):
            o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
            bisa.dma_copy(dst=o, src=t)
            outs.append(o)
        return tuple(outs)
    rng = np.random.default_rng
    sets = _sets(lambda s: np.where(rng(s).random((16, 40)) > 0.6, rand(16, 40, seed=s), 0).astype(np.float32),
                 lambda s: rng(10 + s).integers(0, 39, (16, 2)).astype(np.uint16),
                 lambda s: np.sort(rng(20 + s).integers(0, 4, (1, 12))).astype(np.float32))
    _, outs = check(k, sets, target="trn2")
    assert not np.array_equal(outs[0], outs[1])


def test_a_batch_of_one_set_is_that_set_s_run_also_with_mutable_arguments():
    def k(x: nt.mutable_tensor, y):
        o = _out(x.shape)
        nl.store(x, value=nl.multiply(nl.load(x), 3.0))
        nl.store(o, nl.add(nl.load(x), nl.load(y)))
        return o
    args = [rand(8, 8, seed=1), rand(8, 8, seed=2)]
    original = [a.copy() for a in args]
    batched = nki_emu.run_batched(k, [args], trace_member=0)
    single = nki_emu.run(k, [a.copy() for a in original])
    assert all(np.array_equal(a, b) for a, b in zip(args, original))  # the caller's arrays untouched
    assert batched.arguments[0][0].shape == (8, 8) and np.array_equal(batched.arguments[0][0], 3 * original[0])
    _same(single.outputs, batched.outputs[0])
    assert batched.profile == single.profile

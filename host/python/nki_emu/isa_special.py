"""Special-purpose ``nki.isa`` instructions in their SDK 2.28 ``dst=`` form: fused scalar/tensor
ops, top-8 search and replace, batch-norm statistics, gathers, shuffles, predicated copies and
selects (the SDK 2.28 list's instructions beyond the core set of ``nki_emu.isa``).

Every function has the parameter list of the SDK 2.28 ``nki.isa`` stub
(aws-neuron-sdk ``nki/api/nki/isa/__init__.py``; docs/nki-facts.md §2.9) and
the semantics its docstring states (the NumPy form is in the conformance test
``tests/python/emulator/test_isa_228.py``). Values are batched (docs/nki-emulator.md,
"Batched execution"): one NumPy call covers every member. Each records one
instruction for the cost model on the engine the docs name; the cycle formulas
are in ``nki_emu.cost.formulas`` (nki-facts §3.3).

APIs of the 2.28 list whose hardware exists only from NeuronCore-v4 (trn3) or
that need multi-core/registers (``exponential``, ``nc_matmul_mx``,
``quantize_mx``, ``rand2``, ``dma_compute``, ``register_*``, ``core_barrier``,
``sendrecv``, ``rng``, ``rand_*``, ``set_rng_seed``) refuse with ``err_api_not_emulated``
naming the API, never silently.
"""
import numpy as np

from . import assign, batch, isa, ops, runtime, trace
from .errors import fail
from .isa import nc_version, reduce_cmd
from .isa_dst import dst_tile, read_registers, registers
from .operands import free_size, on_chip, result as _result
from .tensor import NkiTensor
from .tensor import values as tensor_values


def _f32(x):
    return tensor_values(x).astype(np.float32, copy=False)


def _flat(x):
    """Batched values of tile ``x`` as (S, P, F) fp32."""
    v = _f32(x)
    return batch.reshape(v, v.shape[0], x.shape[0], -1)


def _vector(x, p, api, what):
    """A scalar or a (P, 1) tile operand, batched-broadcastable against (S, P, F)."""
    if isinstance(x, NkiTensor):
        on_chip(x, what, api)
        if x.shape[0] != p or free_size(x.shape) != 1:
            fail(f"err_{api}_{what}_scalar_or_vector",
                 f"'{what}' of '{api}' must be a scalar or a vector of shape [{p}, 1], got {list(x.shape)}")
        return _f32(x).reshape(-1, p, 1)
    return np.float32(x)


def _emit(dst, vals, op, engine, reads, n, **info):
    """Writes batched ``vals`` (S, P, F...) into ``dst`` as one traced instruction."""
    res = _result(vals.reshape((vals.shape[0],) + dst.shape), dst.dtype)
    trace.compute(op, engine, [r for r in reads if isinstance(r, NkiTensor)], res, n, **info)
    assign.assign(dst, res)


def _needs_gen3(api):
    if isa.get_nc_version() == nc_version.gen2:
        fail("err_unsupported_arch", f"'{api}' is available only on NeuronCore-v3 (trn2) or newer")


def _same_shape(api, a, b, names):
    if a.shape[0] != b.shape[0] or free_size(a.shape) != free_size(b.shape):
        fail("err_shape_mismatch", f"'{names[0]}{list(a.shape)}' and '{names[1]}{list(b.shape)}' of '{api}' must "
                                   f"have the same partitions and elements per partition")


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, name=None):
    """``dst = (data op0 operand0) op1 operand1``; operand0 scalar or (P, 1), operand1 a tile
    of data's shape; fp32 math on VectorE."""
    dst_tile(dst, "scalar_tensor_tensor")
    on_chip(data, "data", "scalar_tensor_tensor")
    on_chip(operand1, "operand1", "scalar_tensor_tensor")
    _same_shape("scalar_tensor_tensor", data, operand1, ("data", "operand1"))
    if data.buffer == "psum" and operand1.buffer == "psum":
        fail("err_tensor_tensor_both_psum", "'data' and 'operand1' of 'scalar_tensor_tensor' cannot both be in PSUM")
    p = data.shape[0]
    x, v0, y = _flat(data), _vector(operand0, p, "scalar_tensor_tensor", "operand0"), _flat(operand1)
    f0, f1 = ops.binary(op0), ops.binary(op1)
    t = f0(v0, x) if reverse0 else f0(x, v0)
    res = f1(y, t) if reverse1 else f1(t, y)
    _emit(dst, res, "scalar_tensor_tensor", "vector", [data, operand0, operand1], free_size(data.shape))


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res, reverse0=False, name=None):
    """``dst = data op0 operand0`` and ``reduce_res = reduce_op(dst)`` over all free axes (P, 1), VectorE."""
    dst_tile(dst, "tensor_scalar_reduce")
    dst_tile(reduce_res, "tensor_scalar_reduce")
    on_chip(data, "data", "tensor_scalar_reduce")
    name0 = ops.op_name(op0)
    if name0 in ops.BITVEC:
        fail("err_tensor_scalar_mixed_ops", "'op0' of 'tensor_scalar_reduce' must be an arithmetic operator")
    p = data.shape[0]
    x, v0 = _flat(data), _vector(operand0, p, "tensor_scalar_reduce", "operand0")
    res = ops.binary(op0)(v0, x) if reverse0 else ops.binary(op0)(x, v0)
    _emit(dst, res, "tensor_scalar_reduce", "vector", [data, operand0], free_size(data.shape))
    red = ops.reducer(reduce_op)(res, axis=2, keepdims=True) if ops.op_name(reduce_op) != "subtract" else \
        res[:, :, :1] - res[:, :, 1:].sum(axis=2, keepdims=True)
    assign.assign(reduce_res, _result(red, reduce_res.dtype))


def tensor_partition_reduce(dst, op, data, name=None):
    """``dst[0, :] = op-reduce(data, axis=partition)`` on GpSimd (add, max, bitwise_or, bitwise_and)."""
    dst_tile(dst, "tensor_partition_reduce")
    on_chip(data, "data", "tensor_partition_reduce")
    if data.buffer == "psum" or dst.buffer == "psum":
        fail("err_unsupported_memory", "GpSimd ('tensor_partition_reduce') cannot access PSUM")
    name_ = ops.op_name(op)
    v = tensor_values(data)
    v = batch.reshape(v, v.shape[0], data.shape[0], -1)
    if name_ in ("bitwise_or", "bitwise_and"):
        fn = np.bitwise_or if name_ == "bitwise_or" else np.bitwise_and
        res = fn.reduce(v, axis=1, keepdims=True)
    else:
        res = ops.reducer(op)(v.astype(np.float32), axis=1, keepdims=True)
    _emit(dst, res, "tensor_partition_reduce", "gpsimd", [data], free_size(data.shape), partitions=data.shape[0])


def max8(dst, src, name=None):
    """``dst[p, :] = the 8 largest values of src[p]`` in descending order (8..16384 elements)."""
    dst_tile(dst, "max8")
    on_chip(src, "src", "max8")
    n = free_size(src.shape)
    if not 8 <= n <= 16384 or free_size(dst.shape) != 8:
        fail("err_max8_size", f"'max8' reads 8..16384 elements per partition into [P, 8], got src{list(src.shape)} "
                              f"dst{list(dst.shape)}")
    v = _flat(src)
    res = -np.sort(-v, axis=2)[:, :, :8]
    _emit(dst, res, "max8", "vector", [src], n)


def _first_indices(data2d, vals2d):
    """(S, P, 8) uint32 indices of the first occurrence of each value (0 if absent)."""
    eq = data2d[:, :, None, :] == vals2d[:, :, :, None]  # (S, P, 8, N)
    return np.argmax(eq, axis=3).astype(np.uint32), eq.any(axis=3)


def nc_find_index8(dst, data, vals, name=None):
    """``dst[p, j] = index of the first vals[p, j] in data[p]`` (uint16/uint32, 8 per partition)."""
    dst_tile(dst, "nc_find_index8")
    on_chip(data, "data", "nc_find_index8")
    on_chip(vals, "vals", "nc_find_index8")
    if free_size(vals.shape) != 8:
        fail("err_find_index8_size", f"'vals' of 'nc_find_index8' must have 8 elements per partition, got "
                                     f"{list(vals.shape)}")
    idx, _ = _first_indices(_flat(data), _flat(vals))
    _emit(dst, idx, "nc_find_index8", "vector", [data, vals], free_size(data.shape))


def nc_match_replace8(dst, data, vals, imm, dst_idx=None, name=None):
    """``dst = data`` with the first occurrence of each of the 8 ``vals[p]`` replaced by ``imm``;
    their indices optionally into ``dst_idx``."""
    dst_tile(dst, "nc_match_replace8")
    on_chip(data, "data", "nc_match_replace8")
    on_chip(vals, "vals", "nc_match_replace8")
    d, v = _flat(data).copy(), _flat(vals)
    idx, found = _first_indices(d, v)
    for j in range(v.shape[2]):  # sequential: a value replaced earlier is no longer matched
        cur = d[:, :, None, :] == v[:, :, j:j + 1, None]
        pos = np.argmax(cur[:, :, 0, :], axis=2)
        hit = cur[:, :, 0, :].any(axis=2)
        idx[:, :, j] = np.where(hit, pos, idx[:, :, j])
        s_idx, p_idx = np.nonzero(hit)
        d[s_idx, p_idx, pos[s_idx, p_idx]] = np.float32(imm)
    _emit(dst, d, "nc_match_replace8", "vector", [data, vals], free_size(data.shape))
    if dst_idx is not None:
        dst_tile(dst_idx, "nc_match_replace8")
        assign.assign(dst_idx, _result(idx, dst_idx.dtype))


def nc_stream_shuffle(dst, src, shuffle_mask, name=None):
    """Within each 32-partition quadrant, ``dst[i] = src[shuffle_mask[i]]`` (255: dst[i] unchanged), VectorE.
    Note the SDK 2.28 order ``(dst, src, ...)`` (changed from the legacy ``(src, dst, ...)``)."""
    dst_tile(dst, "nc_stream_shuffle")
    on_chip(src, "src", "nc_stream_shuffle")
    mask = [int(m) for m in shuffle_mask]
    if len(mask) != 32:
        fail("err_shuffle_mask_size", f"'shuffle_mask' of 'nc_stream_shuffle' must have 32 elements, got {len(mask)}")
    if free_size(src.shape) != free_size(dst.shape):
        fail("err_shape_mismatch", "'src' and 'dst' of 'nc_stream_shuffle' must have the same elements per partition")
    s, cur = _flat(src), _flat(dst).copy()
    out = cur.copy()
    for i in range(dst.shape[0]):
        m = mask[i % 32]
        if m == 255:
            continue
        q = (i // 32) * 32 + m
        if q >= src.shape[0]:
            fail("err_shuffle_mask_out_of_bound", f"shuffle_mask[{i % 32}] = {m} reads partition {q} of a "
                                                  f"{src.shape[0]}-partition 'src'")
        out[:, i] = s[:, q]
    _emit(dst, out, "nc_stream_shuffle", "vector", [src], free_size(src.shape))


def bn_stats(dst, data, name=None):
    """Per partition, for the even- and odd-indexed elements: (count, mean, variance*count), 6
    values; at most 512 elements (``nl.tile_size.bn_stats_fmax``); VectorE."""
    dst_tile(dst, "bn_stats")
    on_chip(data, "data", "bn_stats")
    n = free_size(data.shape)
    if n > 512:
        fail("err_bn_stats_fmax", f"'data' of 'bn_stats' has {n} elements per partition; at most 512 "
                                  f"(bn_stats_fmax) are supported")
    v = _flat(data)
    out = []
    for part in (v[:, :, 0::2], v[:, :, 1::2]):
        count = np.full(part.shape[:2] + (1,), part.shape[2], np.float32)
        mean = part.mean(axis=2, keepdims=True) if part.shape[2] else np.zeros_like(count)
        m2 = ((part - mean) ** 2).sum(axis=2, keepdims=True)
        out += [count, mean, m2]
    _emit(dst, np.concatenate(out, axis=2), "bn_stats", "vector", [data], n)


def bn_aggr(dst, data, name=None):
    """Aggregates ``bn_stats`` tuples (count, mean, variance*count) of a partition into
    (mean, variance), VectorE."""
    dst_tile(dst, "bn_aggr")
    on_chip(data, "data", "bn_aggr")
    n = free_size(data.shape)
    if n % 3:
        fail("err_bn_aggr_size", f"'data' of 'bn_aggr' must hold (count, mean, var*count) triples, got {n} elements")
    t = _flat(data).reshape(-1, data.shape[0], n // 3, 3).astype(np.float64)
    count, mean, m2 = t[..., 0], t[..., 1], t[..., 2]
    total = count.sum(axis=2, keepdims=True)
    mu = (count * mean).sum(axis=2, keepdims=True) / total
    var = (m2.sum(axis=2, keepdims=True) + (count * (mean - mu) ** 2).sum(axis=2, keepdims=True)) / total
    _emit(dst, np.concatenate([mu, var], axis=2).astype(np.float32), "bn_aggr", "vector", [data], n)


def dropout(dst, data, prob, name=None):
    """Replaces each element of ``data`` by 0 with probability ``prob`` (scalar or (P, 1)), no
    rescaling; VectorE. The emulator's random stream is seeded by the call's index in the run,
    so every input set of a batched run gets the same mask as its own run."""
    dst_tile(dst, "dropout")
    on_chip(data, "data", "dropout")
    run = runtime.current()
    seed = 0
    if run is not None:
        run.random_calls += 1
        seed = run.random_calls
    p = data.shape[0]
    draw = np.random.default_rng(seed).random((p, free_size(data.shape)), dtype=np.float32)
    keep = draw >= _vector(prob, p, "dropout", "prob")
    v = _flat(data)
    _emit(dst, np.where(keep, v, np.float32(0)), "dropout", "vector", [data, prob], free_size(data.shape))


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None):
    """``dst = where(predicate, src, dst)`` (``~predicate`` with ``reverse_pred``); ``src`` a tile
    or a scalar; VectorE."""
    dst_tile(dst, "tensor_copy_predicated")
    on_chip(predicate, "predicate", "tensor_copy_predicated")
    _same_shape("tensor_copy_predicated", dst, predicate, ("dst", "predicate"))
    pred = _flat(predicate) != 0
    if reverse_pred:
        pred = ~pred
    cur = _flat(dst)
    s = _flat(src) if isinstance(src, NkiTensor) else np.float32(src)
    in_psum = predicate.buffer == "psum" or (isinstance(src, NkiTensor) and src.buffer == "psum")
    _emit(dst, np.where(pred, s, cur), "tensor_copy_predicated", "vector", [src, predicate, dst],
          free_size(dst.shape), in_psum=in_psum)


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.reset_reduce,
                 reduce_res=None, reduce_op=None, range_start=0.0, on_false_value=-3.4028235e+38, name=None):
    """``dst = where(comp_op0(i, bound0) & comp_op1(i, bound1), on_true_tile, FP32_MIN)`` with ``i`` =
    ``range_start`` + free index, and ``reduce_res = max(dst)`` per partition; NC-v3+, VectorE
    (``on_false_value`` and ``reduce_cmd`` are ignored as documented)."""
    _needs_gen3("range_select")
    dst_tile(dst, "range_select")
    on_chip(on_true_tile, "on_true_tile", "range_select")
    p, n = on_true_tile.shape[0], free_size(on_true_tile.shape)
    idx = (np.float32(range_start) + np.arange(n, dtype=np.float32))[None, None, :]
    b0, b1 = _vector(bound0, p, "range_select", "bound0"), _vector(bound1, p, "range_select", "bound1")
    keep = ops.binary(comp_op0)(idx, b0) & ops.binary(comp_op1)(idx, b1)
    res = np.where(keep, _flat(on_true_tile), np.float32(-3.4028235e+38))
    _emit(dst, res, "range_select", "vector", [on_true_tile, bound0, bound1], n)
    if reduce_res is not None:
        read_registers(reduce_res, res.max(axis=2, keepdims=True), "range_select")


def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle, reduce_op=None,
                  reverse_pred=False, name=None):
    """``dst = where(predicate, on_true, on_false)`` (``on_false`` scalar or (P, 1)); with
    ``reduce_cmd`` reset_reduce/reduce the per-partition max accumulates in VectorE's registers,
    read out into ``reduce_res``."""
    dst_tile(dst, "select_reduce")
    on_chip(on_true, "on_true", "select_reduce")
    on_chip(predicate, "predicate", "select_reduce")
    _same_shape("select_reduce", on_true, predicate, ("on_true", "predicate"))
    p = on_true.shape[0]
    pred = _flat(predicate) != 0
    if reverse_pred:
        pred = ~pred
    res = np.where(pred, _flat(on_true), _vector(on_false, p, "select_reduce", "on_false"))
    _emit(dst, res, "select_reduce", "vector", [predicate, on_true, on_false], free_size(on_true.shape))
    regs = registers("vector_regs")
    if reduce_cmd == isa.reduce_cmd.reset_reduce:
        regs[:, :p] = -np.inf
    if reduce_cmd in (isa.reduce_cmd.reduce, isa.reduce_cmd.reset_reduce):
        regs[:, :p] = np.maximum(regs[:, :p], res.max(axis=2, keepdims=True))
    if reduce_res is not None:
        read_registers(reduce_res, regs[:, :p] if reduce_cmd != isa.reduce_cmd.idle else
                       res.max(axis=2, keepdims=True), "select_reduce")


def nc_n_gather(dst, data, indices, name=None):
    """``dst[p, j] = data[p].flat[indices[p, j]]`` per partition on GpSimd (SBUF only; uint32 indices)."""
    dst_tile(dst, "nc_n_gather")
    on_chip(data, "data", "nc_n_gather")
    on_chip(indices, "indices", "nc_n_gather")
    if "psum" in (dst.buffer, data.buffer, indices.buffer):
        fail("err_unsupported_memory", "GpSimd ('nc_n_gather') cannot access PSUM")
    src = tensor_values(data)
    src = batch.reshape(src, src.shape[0], data.shape[0], -1)
    idx = tensor_values(indices).astype(np.int64)
    idx = batch.reshape(idx, idx.shape[0], indices.shape[0], -1)
    if idx.size and (idx.min() < 0 or idx.max() >= src.shape[2]):
        run = runtime.current()
        if run is not None and idx.shape[0] > 1:
            run.data_dependent = True  # the members' indices may differ
        fail("err_tensor_access_out_of_bound", f"an index of 'nc_n_gather' is outside [0, {src.shape[2]})")
    idx = np.broadcast_to(idx, (src.shape[0],) + idx.shape[1:])
    res = np.take_along_axis(src, idx, axis=2)
    k = idx.shape[2]
    _emit(dst, res, "nc_n_gather", "gpsimd", [data, indices], k)


def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None, reduce_cmd=reduce_cmd.reset_reduce):
    """Per partition ``reg = op1(op0(src[i], imm0), reg); dst[i] = reg`` along the flattened free
    axis; ``reg`` starts at op1's identity (reset_reduce), ``imm1`` (load_reduce) or the VectorE
    registers (reduce)."""
    dst_tile(dst, "tensor_scalar_cumulative")
    on_chip(src, "src", "tensor_scalar_cumulative")
    p = src.shape[0]
    x = _flat(src)
    t = ops.binary(op0)(x, _vector(imm0, p, "tensor_scalar_cumulative", "imm0"))
    name1 = ops.op_name(op1)
    regs = registers("vector_regs")
    if reduce_cmd == isa.reduce_cmd.reset_reduce:
        init = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "max": -np.inf, "maximum": -np.inf,
                "min": np.inf, "minimum": np.inf}[name1]
        reg = np.full(x.shape[:2] + (1,), init, np.float32)
    elif reduce_cmd == isa.reduce_cmd.load_reduce:
        reg = np.broadcast_to(_vector(imm1, p, "tensor_scalar_cumulative", "imm1"), x.shape[:2] + (1,)).copy()
    else:
        reg = np.broadcast_to(regs[:, :p], x.shape[:2] + (1,)).copy()
    f1 = ops.binary(op1)
    out = np.empty_like(t)
    for i in range(t.shape[2]):
        reg = f1(t[:, :, i:i + 1], reg)
        out[:, :, i:i + 1] = reg
    regs[:, :p] = reg
    _emit(dst, out, "tensor_scalar_cumulative", "vector", [src], free_size(src.shape))


_LOCAL_GATHER_K = (1, 2, 4, 8, 16, 32)


def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, name=None):
    """GpSimd gather within each 16-partition group g (one GpSimd core each): the group's
    ``index`` values, flattened partition-first (column-major) and cut to
    ``num_valid_indices``, are element offsets into the free axis of *each* of the group's
    partitions, and ``num_elem_per_idx`` contiguous elements are read at each:
    ``dst[p, j*k + e] = src_buffer[p].flat[idx_g[j] + e]`` (the SDK docs' NumPy example).
    src_buffer/index partitions equal and a multiple of 16, k in 1..32 (powers of 2), at
    most 4096 indices per core; dst holds num_valid_indices*k elements per partition.
    An out-of-bound index (undefined on hardware) is refused."""
    api = "local_gather"
    dst_tile(dst, api)
    on_chip(src_buffer, "src_buffer", api)
    on_chip(index, "index", api)
    p, k = src_buffer.shape[0], int(num_elem_per_idx)
    if "psum" in (dst.buffer, src_buffer.buffer, index.buffer):
        fail("err_unsupported_memory", "GpSimd ('local_gather') cannot access PSUM")
    if index.shape[0] != p or p % 16:
        fail("err_local_gather_partitions", f"'src_buffer' and 'index' of 'local_gather' must have the same "
                                            f"partitions, a multiple of 16; got {p} and {index.shape[0]}")
    if k not in _LOCAL_GATHER_K:
        fail("err_local_gather_elem_per_idx", f"'num_elem_per_idx' of 'local_gather' must be one of "
                                              f"{list(_LOCAL_GATHER_K)}, got {num_elem_per_idx}")
    per_core = 16 * free_size(index.shape)
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    if not 0 < valid <= min(per_core, 4096):
        fail("err_local_gather_indices", f"'num_valid_indices' of 'local_gather' must be in 1..{min(per_core, 4096)}, "
                                         f"got {valid}")
    if free_size(dst.shape) != valid * k or dst.shape[0] != p:
        fail("err_shape_mismatch", f"'dst' of 'local_gather' must be [{p}, {valid * k} elements], got "
                                   f"{list(dst.shape)}")
    src = tensor_values(src_buffer)
    members, groups = src.shape[0], p // 16
    src = batch.reshape(src, members, groups, 16, -1)
    idx = tensor_values(index).astype(np.int64)
    idx = batch.reshape(batch.reshape(idx, idx.shape[0], groups, 16, -1).swapaxes(2, 3), idx.shape[0], groups, -1)[:, :, :valid]
    pos = (idx[..., None] + np.arange(k)).reshape(idx.shape[0], groups, 1, valid * k)
    if pos.size and (pos.min() < 0 or pos.max() >= src.shape[3]):
        run = runtime.current()
        if run is not None and idx.shape[0] > 1:
            run.data_dependent = True
        fail("err_tensor_access_out_of_bound", f"an index of 'local_gather' reads outside the {src.shape[3]} "
                                               f"elements of a partition")
    pos = np.broadcast_to(pos, (members, groups, 16, valid * k))
    res = np.take_along_axis(src, pos, axis=3).reshape(members, p, valid * k)
    res = _result(res.reshape((members,) + dst.shape), dst.dtype)
    trace.compute("local_gather", "gpsimd", [src_buffer, index], res, valid * k, elem_per_idx=k,
                  itemsize=src_buffer.itemsize)
    assign.assign(dst, res)


def sequence_bounds(dst, segment_ids, name=None):
    """For a (1, n) tile of segment ids (0 = padding): per element the [start, end) of the
    run of equal ids it belongs to, written as dst (1, 2, n) (starts, then ends); padding
    gets start n and end -1 (the SDK docs' NumPy form); GpSimd; float32 or int32."""
    api = "sequence_bounds"
    dst_tile(dst, api)
    on_chip(segment_ids, "segment_ids", api)
    if segment_ids.shape[0] != 1 or dst.shape[0] != 1:
        fail("err_sequence_bounds_partition", "'sequence_bounds' works on one partition (shape (1, n))")
    v = tensor_values(segment_ids)
    members = v.shape[0]
    seq = batch.reshape(v, members, -1)
    n = seq.shape[1]
    if free_size(dst.shape) != 2 * n:
        fail("err_shape_mismatch", f"'dst' of 'sequence_bounds' must hold 2 x {n} elements, got {list(dst.shape)}")
    positions = np.arange(n)
    new_run = np.ones_like(seq, dtype=bool)
    new_run[:, 1:] = seq[:, 1:] != seq[:, :-1]
    start = np.maximum.accumulate(np.where(new_run, positions, 0), axis=1)
    run_end = np.ones_like(seq, dtype=bool)
    run_end[:, :-1] = seq[:, :-1] != seq[:, 1:]
    end = np.minimum.accumulate(np.where(run_end, positions + 1, n + 1)[:, ::-1], axis=1)[:, ::-1]
    pad = seq == 0
    start = np.where(pad, n, start)
    end = np.where(pad, -1, end)
    res = np.stack([start, end], axis=1).astype(np.float64)
    res = _result(res.reshape((members,) + dst.shape), dst.dtype)
    trace.compute("sequence_bounds", "gpsimd", [segment_ids], res, n)
    assign.assign(dst, res)


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1):
    """NC-v3+, GpSimd: in partitions 0, 16, ..., 112 only (one per GpSimd core), the indices
    (+ ``index_offset``) of the nonzero elements of ``src``, then ``padding_val`` up to the
    input length, then their count: dst has one more element per partition than src;
    other partitions of dst are left unchanged (int32 dst, float32/int32 src)."""
    api = "nonzero_with_count"
    _needs_gen3(api)
    dst_tile(dst, api)
    on_chip(src, "src", api)
    if "psum" in (dst.buffer, src.buffer):
        fail("err_unsupported_memory", "GpSimd ('nonzero_with_count') cannot access PSUM")
    n = free_size(src.shape)
    if dst.shape[0] != src.shape[0] or free_size(dst.shape) != n + 1:
        fail("err_shape_mismatch", f"'dst' of 'nonzero_with_count' must have src's partitions and {n + 1} elements "
                                   f"per partition, got {list(dst.shape)}")
    v = tensor_values(src)
    v = v.reshape(v.shape[0], src.shape[0], n)
    out = tensor_values(dst).reshape(v.shape[0] if tensor_values(dst).shape[0] == v.shape[0] else 1,
                                     dst.shape[0], n + 1).astype(np.int64)
    out = np.broadcast_to(out, (v.shape[0],) + out.shape[1:]).copy()
    for part in range(0, src.shape[0], 16):
        row = v[:, part, :] != 0
        count = row.sum(axis=1)
        order = np.argsort(~row, axis=1, kind="stable")  # nonzero positions first, in order
        idx = np.where(np.arange(n)[None, :] < count[:, None], order + int(index_offset), int(padding_val))
        out[:, part, :n] = idx
        out[:, part, n] = count
    res = _result(out.reshape((out.shape[0],) + dst.shape), dst.dtype)
    trace.compute(api, "gpsimd", [src, dst], res, n)
    assign.assign(dst, res)


def _not_emulated(api, why):
    def refuse(*args, **kwargs):
        fail("err_api_not_emulated", f"'nki.isa.{api}' is not emulated: {why} (docs/nki-emulator.md, API table)")
    refuse.__name__ = api
    refuse.__doc__ = f"``nki.isa.{api}``: not emulated ({why}); refuses with err_api_not_emulated."
    return refuse


_V4 = "available only on NeuronCore-v4 (trn3); the emulator targets trn1 and trn2"
NOT_EMULATED = {
    "exponential": _V4, "nc_matmul_mx": _V4, "quantize_mx": _V4, "rand2": _V4,
    "dma_compute": "DMA-engine compute is not modelled",
    "register_alloc": "engine registers and dynamic control flow are not modelled",
    "register_load": "engine registers are not modelled", "register_move": "engine registers are not modelled",
    "register_store": "engine registers are not modelled",
    "core_barrier": "the emulator runs one NeuronCore (no LNC=2)", "sendrecv": "the emulator runs one NeuronCore",
    "rng": "hardware random streams are not modelled", "rand_set_state": "hardware random streams are not modelled",
    "rand_get_state": "hardware random streams are not modelled",
    "set_rng_seed": "hardware random streams are not modelled",
    "tensor_copy_dynamic_src": "a legacy (SDK <= 2.26) API absent from the 2.28 list; register offsets are not "
                               "emulated",
    "tensor_copy_dynamic_dst": "a legacy (SDK <= 2.26) API absent from the 2.28 list; register offsets are not "
                               "emulated",
}
REFUSALS = {name: _not_emulated(name, why) for name, why in NOT_EMULATED.items()}

NEW_APIS = {
    "scalar_tensor_tensor": scalar_tensor_tensor, "tensor_scalar_reduce": tensor_scalar_reduce,
    "tensor_partition_reduce": tensor_partition_reduce, "max8": max8, "nc_find_index8": nc_find_index8,
    "nc_match_replace8": nc_match_replace8, "nc_stream_shuffle": nc_stream_shuffle, "bn_stats": bn_stats,
    "bn_aggr": bn_aggr, "dropout": dropout, "tensor_copy_predicated": tensor_copy_predicated,
    "range_select": range_select, "select_reduce": select_reduce, "nc_n_gather": nc_n_gather,
    "tensor_scalar_cumulative": tensor_scalar_cumulative, "local_gather": local_gather,
    "sequence_bounds": sequence_bounds, "nonzero_with_count": nonzero_with_count,
}

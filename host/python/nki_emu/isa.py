"""``neuronxcc.nki.isa`` on NumPy.

Semantics per nki-facts §2.6 (SDK 2.24 ``nki.isa`` docstrings); the
estimated cycle formulas they quote are in ``nki_emu.cost.formulas``.
"""
import enum

import numpy as np

from . import batch, dtypes, ops, runtime, trace
from .errors import fail
from .index_expr import mask_array
from .operands import free_size, on_chip, result as _result, values
from .tensor import NkiTensor
from .tensor import values as tensor_values, write as tensor_write


class engine(enum.IntEnum):
    """Engine enum [D S3]: tensor=1, scalar=2, gpsimd=3, vector=5, sync=6, unknown=0; dma=4 [D S9]."""
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4  # SDK 2.28 [D nki.isa stub]
    vector = 5
    sync = 6


unknown_engine, tensor_engine, scalar_engine = engine.unknown, engine.tensor, engine.scalar
gpsimd_engine, vector_engine, sync_engine = engine.gpsimd, engine.vector, engine.sync


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3


class reduce_cmd(enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4  # SDK 2.28 [D nki.isa stub]


class oob_mode(enum.IntEnum):
    """Out-of-bound handling of dynamic DMA addresses (SDK 2.28): error 0, skip 1."""
    error = 0
    skip = 1


class dge_mode(enum.IntEnum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


def get_nc_version():
    """``nisa.get_nc_version()``: gen3 while a trn2 run is active, else gen2."""
    run = runtime.current()
    return nc_version.gen3 if run is not None and run.target == "trn2" else nc_version.gen2


def _engine_name(eng, default):
    return {engine.vector: "vector", engine.scalar: "scalar", engine.gpsimd: "gpsimd",
            engine.tensor: "tensor"}.get(eng, default)


def _pmismatch(api, names, tiles):
    parts = {t.shape[0] for t in tiles if isinstance(t, NkiTensor)}
    if len(parts) > 1:
        desc = ", ".join(f"{n}[{', '.join(map(str, t.shape))}]" for n, t in zip(names, tiles) if isinstance(t, NkiTensor))
        fail("err_num_partition_mismatch",
             f"number of partitions (dimension 0 size of a tile) mismatch in parameters ({desc}) of '{api}'")


def _per_partition(x, p, what, api):
    """A scalar or a (P, 1) tile operand as a broadcastable value."""
    if isinstance(x, NkiTensor):
        on_chip(x, what, api)
        if x.shape[0] != p or free_size(x.shape) != 1:
            fail(f"err_{api}_{what}_scalar_or_vector",
                 f"'{what}' of '{api}' must be a scalar or a vector of shape [{p}, 1], got {list(x.shape)}")
        return tensor_values(x).reshape(-1, p, 1).astype(np.float32, copy=False)
    return np.float32(x)


_FLOAT32 = np.dtype(np.float32)


def _f32(x):
    a = values(x)
    return a if a.dtype == np.float32 else np.asarray(a, dtype=np.float32)


def _nd(v, ndim):
    return v.reshape(v.shape + (1,) * (ndim - v.ndim)) if isinstance(v, np.ndarray) and v.ndim < ndim else v


# --- TensorE ----------------------------------------------------------------------------
def nc_matmul(stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, tile_position=(), tile_size=(), mask=None):
    """``stationary.T @ moving`` into a new PSUM tile, fp32 accumulation (nki-facts §2.6, 4.3)."""
    on_chip(stationary, "stationary", "nc_matmul")
    on_chip(moving, "moving", "nc_matmul")
    for t, name in ((stationary, "stationary"), (moving, "moving")):
        if t.buffer != "sbuf":
            fail("err_unsupported_memory",
                 f"Expected operand '{name}' of 'nc_matmul' to be in address space 'sbuf', "
                 f"but got a tile in '{t.buffer}' instead.")
    k, m, n = stationary.shape[0], free_size(stationary.shape), free_size(moving.shape)
    if moving.shape[0] != k:
        _pmismatch("nc_matmul", ("stationary", "moving"), (stationary, moving))
    if m > 128:
        fail("err_stationary_free_size_exceed_limit",
             f"free size {m} of 'stationary' of 'nc_matmul' exceeds gemm_stationary_fmax of 128.")
    if n > 512:
        fail("err_moving_free_size_exceed_limit",
             f"free size {n} of 'moving' of 'nc_matmul' exceeds gemm_moving_fmax of 512.")
    a = _f32(stationary)
    a = a.reshape(a.shape[0], k, m)  # (S, K, M): one GEMM per member, batched
    b = _f32(moving)
    b = b.reshape(b.shape[0], k, n)
    valid = mask_array(mask, (m, n))
    res = np.matmul(a.swapaxes(1, 2), b) if runtime.computing() else np.zeros((a.shape[0], m, n), np.float32)
    out = NkiTensor.fresh(res, np.float32, "psum", valid=valid)
    cols = n if valid is None else int(valid.any(axis=0).sum())
    fp32 = stationary.dtype == _FLOAT32 or moving.dtype == _FLOAT32  # fp32 runs at 1/4 rate
    trace.compute("nc_matmul", "tensor", [stationary, moving], out, cols, n_stationary=m, fp32=fp32,
                  onezero=bool(is_stationary_onezero or is_moving_onezero),
                  flops=2 * k * m * cols, transpose=bool(is_transpose))
    return out


def nc_transpose(data, mask=None, dtype=None, engine=engine.unknown):
    """Partition<->free transpose; TensorE up to 128x128, VectorE up to 32x32 (nki-facts §2.6)."""
    on_chip(data, "data", "nc_transpose")
    p, f = data.shape[0], free_size(data.shape)
    eng = _engine_name(engine, "tensor" if (p > 32 or f > 32) else "vector")
    limit = 128 if eng == "tensor" else 32
    if p > limit or f > limit:
        fail("err_size_of_dimension_exceed_arch_limit",
             f"nc_transpose on {eng} engine supports at most {limit}x{limit}, got [{p}, {f}]")
    res = values(data)
    res = res.reshape(res.shape[0], p, f).swapaxes(1, 2)
    out = _result(res, dtype or data.dtype, "psum" if eng == "tensor" else "sbuf", mask)
    trace.compute("nc_transpose", eng, [data], out, f, partitions=p, fp32=True, transpose=True,
                  flops=2 * p * f * p if eng == "tensor" else 0)
    return out


# --- ScalarE ----------------------------------------------------------------------------
def activation(op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmd.idle, mask=None, dtype=None):
    """``op(data * scale + bias)`` on ScalarE, fp32 math (nki-facts §2.6, 4.7)."""
    on_chip(data, "data", "activation")
    p = data.shape[0]
    gen2 = get_nc_version() == nc_version.gen2
    if reduce_op is not None and ops.op_name(reduce_op) != "add" and gen2:
        fail("err_activation_reduce_op_unsupported",
             f"reduce_op '{ops.op_name(reduce_op)}' of 'activation' is not supported on NeuronCore-v2; "
             f"only nl.add is supported.")
    if bias is not None and gen2 and ops.op_name(op) == "reciprocal":
        fail("err_activation_reciprocal_bias_unsupported",
             "'activation' with op=reciprocal does not support a bias on NeuronCore-v2.")
    if isinstance(scale, NkiTensor) and dtypes.name(scale.dtype) != "float32":
        fail("err_activation_scale_invalid_type",
             "Scale parameter of activation or activation_reduce must be a scalar or vector of type float32.")
    if isinstance(bias, NkiTensor) and dtypes.name(bias.dtype) not in ("float32", "float16", "bfloat16"):
        fail("err_activation_bias_invalid_type",
             "Bias parameter of activation or activation_reduce must be a vector of type float32, float16, "
             "or bfloat16.")
    x = _f32(data)
    s = _per_partition(scale, p, "scale", "activation")
    z = x * _nd(s, x.ndim) if not (isinstance(s, np.float32) and s == 1.0) else x
    if bias is not None:
        if not isinstance(bias, NkiTensor):
            fail("err_activation_bias_invalid_type", "'bias' of 'activation' must be a [P, 1] vector tile")
        z = z + _nd(_per_partition(bias, p, "bias", "activation"), x.ndim)
    res = ops.unary(op)(z)
    out = _result(res, dtype or data.dtype, mask=mask)
    reduces = reduce_res is not None or reduce_op is not None
    if reduce_res is not None:
        red = np.sum(batch.reshape(res, res.shape[0], p, -1), axis=2, keepdims=True)
        tensor_write(reduce_res, red)
    trace.compute("activation_reduce" if reduces else "activation", "scalar", [data, bias] +
                  ([scale] if isinstance(scale, NkiTensor) else []), out, free_size(data.shape))
    return out


def activation_reduce(op, data, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None):
    return activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                      reduce_cmd=reduce_cmd.reset_reduce, mask=mask, dtype=dtype)


# --- VectorE / GpSimdE ------------------------------------------------------------------
_SCALAR_OK = {"multiply", "add", "subtract"}


def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  dtype=None, mask=None, engine=engine.unknown):
    """``(data op0 operand0) op1 operand1`` with scalar or (P, 1) operands, fp32 math (nki-facts §2.6, 4.8)."""
    on_chip(data, "data", "tensor_scalar")
    p = data.shape[0]
    x = _f32(data)
    names = [ops.op_name(op0)] + ([ops.op_name(op1)] if op1 is not None else [])
    if any(n in ops.BITVEC for n in names) and not all(n in ops.BITVEC for n in names):
        fail("err_tensor_scalar_mixed_ops", "op0 and op1 of 'tensor_scalar' must both be bitvec or both arithmetic")
    bitvec = any(n in ops.BITVEC for n in names)
    if bitvec and engine not in (globals()["engine"].vector, globals()["engine"].unknown):
        fail("err_tensor_scalar_bitvec_engine", "bitvec operators of 'tensor_scalar' run on the Vector engine only.")
    if engine == globals()["engine"].scalar:
        combo = (names[0], names[1] if len(names) > 1 else None)
        if get_nc_version() == nc_version.gen2:
            fail("err_tensor_scalar_engine_unsupported",
                 "'tensor_scalar' on the Scalar engine is not supported on NeuronCore-v2 (trn1); use the "
                 "Vector engine.")
        if combo not in (("multiply", "add"), ("multiply", None), ("add", None)):
            fail("err_tensor_scalar_engine_unsupported",
                 f"'tensor_scalar' on the Scalar engine supports only (multiply, add), (multiply, None) and "
                 f"(add, None), got ({combo[0]}, {combo[1]}).")
    v0 = _nd(_per_partition(operand0, p, "operand0", "tensor_scalar"), x.ndim)
    f0 = ops.binary(op0)
    res = f0(v0, x) if reverse0 else f0(x, v0)
    if op1 is not None:
        v1 = _nd(_per_partition(operand1, p, "operand1", "tensor_scalar"), x.ndim)
        f1 = ops.binary(op1)
        res = f1(v1, res) if reverse1 else f1(res, v1)
    out = _result(res, dtype or data.dtype, mask=mask)
    # engine=unknown: the compiler may place multiply/add patterns on ScalarE (as an
    # activation with scale/bias) -> chosen at replay ("auto", nki-facts §3.5 [I])
    default = "auto" if all(n in _SCALAR_OK for n in names) else "vector"
    tiles = [data] + [o for o in (operand0, operand1) if isinstance(o, NkiTensor)]
    trace.compute("tensor_scalar", _engine_name(engine, default), tiles, out, free_size(data.shape))
    return out


def tensor_tensor(data1, data2, op, dtype=None, mask=None, engine=engine.unknown):
    """Element-wise ``data1 op data2``; same partitions and elements per partition (nki-facts §2.6, 4.5/4.6)."""
    on_chip(data1, "data1", "tensor_tensor")
    on_chip(data2, "data2", "tensor_tensor")
    _pmismatch("tensor_tensor", ("data1", "data2"), (data1, data2))
    if free_size(data1.shape) != free_size(data2.shape):
        fail("err_tensor_tensor_free_size_mismatch",
             f"'tensor_tensor' operands must have the same number of elements per partition, got "
             f"data1{list(data1.shape)} data2{list(data2.shape)}")
    if data1.buffer == "psum" and data2.buffer == "psum":
        fail("err_tensor_tensor_both_psum", "at most one input of 'tensor_tensor' may be in PSUM")
    a, b = _f32(data1), _f32(data2)
    if a.shape != b.shape:
        b = b.reshape(a.shape)
    res = ops.binary(op)(a, b)
    out = _result(res, dtype or dtypes.promote(data1.dtype, data2.dtype), mask=mask)
    eng = _engine_name(engine, "gpsimd" if ops.op_name(op) == "power" else "vector")
    trace.compute("tensor_tensor", eng, [data1, data2], out, free_size(data1.shape),
                  in_psum=data1.buffer == "psum" or data2.buffer == "psum")
    return out


def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False,
                       dtype=None, mask=None):
    """Per-partition scan ``r[i] = op1(op0(data0[i], r[i-1]), data1[i])`` (nki-facts §2.6)."""
    on_chip(data0, "data0", "tensor_tensor_scan")
    on_chip(data1, "data1", "tensor_tensor_scan")
    _pmismatch("tensor_tensor_scan", ("data0", "data1"), (data0, data1))
    p, n = data0.shape[0], free_size(data0.shape)
    a = _f32(data0)
    members = a.shape[0]
    a, b = a.reshape(members, p, n), _f32(data1).reshape(members, p, n)
    prev = _per_partition(initial, p, "initial", "tensor_tensor_scan")
    prev = np.broadcast_to(prev, (members, p, 1)).reshape(members, p).astype(np.float32)
    f0, f1 = ops.binary(op0), ops.binary(op1)
    res = np.empty((members, p, n), np.float32)
    for i in range(n if runtime.computing() else 0):
        t = f0(prev, a[:, :, i]) if reverse0 else f0(a[:, :, i], prev)
        prev = f1(b[:, :, i], t) if reverse1 else f1(t, b[:, :, i])
        res[:, :, i] = prev
    out = _result(res.reshape((members,) + data0.shape), dtype or data0.dtype, mask=mask)
    trace.compute("tensor_tensor_scan", "vector", [data0, data1] +
                  ([initial] if isinstance(initial, NkiTensor) else []), out, n)
    return out


def tensor_reduce(op, data, axis, dtype=None, mask=None, negate=False, keepdims=False):
    """Reduction over free axes (must include axis 1); ``negate`` multiplies by -1 (nki-facts §2.6, 4.9)."""
    on_chip(data, "data", "tensor_reduce")
    axes = tuple(int(a) for a in (axis if isinstance(axis, (list, tuple)) else [axis]))
    if 0 in axes or 1 not in axes:
        fail("err_tensor_reduce_axis", "'axis' of 'tensor_reduce' must be free axes including axis 1")
    res = ops.reducer(op)(_f32(data), axis=batch.reduce_axes(axes), keepdims=True)
    if negate:
        res = -res
    if not keepdims:
        res = batch.reshape(res, res.shape[0], res.shape[1], -1)
    out = _result(res, dtype or data.dtype, mask=mask)
    trace.compute("tensor_reduce", "vector", [data], out, free_size(data.shape))
    return out


def reciprocal(data, dtype=None, mask=None):
    """1/x on VectorE (nki-facts §2.6)."""
    on_chip(data, "data", "reciprocal")
    out = _result(np.reciprocal(_f32(data)), dtype or data.dtype, mask=mask)
    trace.compute("reciprocal", "vector", [data], out, free_size(data.shape))
    return out


def memset(shape, value, dtype, mask=None, engine=engine.unknown):
    """Tile of ``shape`` filled with ``value`` cast to ``dtype`` (nki-facts §2.6)."""
    shape = tuple(int(d) for d in shape)
    vals = np.full(shape, value, dtype=dtypes.storage(dtype))
    out = _result(vals, dtype, mask=mask, batched=False)
    trace.compute("memset", _engine_name(engine, "vector"), [], out, free_size(shape), value=value)
    return out


def tensor_copy(src, mask=None, dtype=None, engine=engine.unknown):
    """Copy within SBUF/PSUM; GpSimd cannot touch PSUM (nki-facts §2.6)."""
    on_chip(src, "src", "tensor_copy")
    eng = _engine_name(engine, "auto")
    if eng == "gpsimd" and src.buffer == "psum":
        fail("err_unsupported_memory", "Expected operand 'src' of 'tensor_copy' on gpsimd to be in "
             "address space 'sbuf', but got a tile in 'psum' instead.")
    out = _result(np.array(values(src), copy=True), dtype or src.dtype, mask=mask)
    trace.compute("tensor_copy", eng, [src], out, free_size(src.shape))
    return out


def iota(expr, dtype, mask=None):
    """Materialises an index expression on GpSimd (cost 150 + N, nki-facts §3.3)."""
    vals = np.asarray(expr)
    if vals.ndim == 1:
        vals = vals.reshape(-1, 1)
    out = _result(vals.astype(dtypes.storage(dtype)), dtype, mask=mask, batched=False)
    trace.compute("iota", "gpsimd", [], out, free_size(vals.shape))
    return out


def affine_select(pred, on_true_tile, on_false_value, mask=None, dtype=None):
    """``where(pred, on_true_tile, on_false_value)`` on GpSimd (nki-facts §2.6)."""
    on_chip(on_true_tile, "on_true_tile", "affine_select")
    vals = values(on_true_tile)
    shape = on_true_tile.shape
    cond = pred.evaluate(shape) if hasattr(pred, "evaluate") else np.asarray(pred, bool)
    out = _result(np.where(cond, vals, on_false_value), dtype or on_true_tile.dtype, mask=mask)
    trace.compute("affine_select", "gpsimd", [on_true_tile], out, free_size(shape))
    return out

"""The SDK 2.28 ``dst=`` forms of ``nki.isa`` ("NKI Beta 2") on top of the legacy ones.

NKI Beta 2 (SDK 2.27 release notes: "all nki.isa APIs have dst as an input
param", "removed dtype and mask support", "memset - removed shape",
"affine_select - ... pattern and cmp_op", "iota - expr replaced with pattern and
offset") writes every result into a caller-provided ``dst`` tile. Each function
here has the exact parameter list of the SDK 2.28 ``nki.isa`` stub
(aws-neuron-sdk ``nki/api/nki/isa/__init__.py``, docs/nki-facts.md §2.9), computes
the result with the legacy implementation (``nki_emu.isa``: same semantics,
validation and cost record, cast to ``dst.dtype``) and assigns it to ``dst``
(``nki_emu.assign``), so the trace records one instruction writing ``dst``.

``nc_matmul(dst, ...)`` accumulates into its PSUM ``dst`` (the Beta 2 spelling of
``psum[...] += nc_matmul(s, m)``); the first matmul into a view of a PSUM tensor
created without a fill value starts the accumulation group and overwrites it [I].
"""
import numpy as np

from . import assign, batch, dtypes, isa, runtime, trace
from .errors import fail
from .isa import engine, nc_version, reduce_cmd
from .operands import free_size, on_chip, result as _result
from .tensor import NkiTensor
from .tensor import values as tensor_values


def dst_tile(dst, api):
    """Checks that ``dst`` is an on-chip tile (SBUF/PSUM) and returns it."""
    if not isinstance(dst, NkiTensor):
        fail("err_failed_to_infer_tile_from_local_tensor", f"'dst' of '{api}' must be a tile, got "
                                                           f"{type(dst).__name__}")
    return on_chip(dst, "dst", api)


def _into(dst, result):
    """``dst[...] = result`` (shape check, cast to dst.dtype, trace retargeted to dst)."""
    assign.assign(dst, result)


# --- TensorE ----------------------------------------------------------------------------
class matmul_perf_mode:
    """``nisa.matmul_perf_mode`` (SDK 2.28): ``none`` or ``double_row`` (FP8, NC-v3+)."""
    none = "none"
    double_row = "double_row"


def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=(), tile_size=(), perf_mode=matmul_perf_mode.none, name=None):
    """``dst += stationary.T @ moving`` on TensorE (PSUM ``dst``, fp32 accumulation; SDK 2.28)."""
    dst_tile(dst, "nc_matmul")
    if dst.buffer != "psum":
        fail("err_unsupported_memory", f"Expected operand 'dst' of 'nc_matmul' to be in address space 'psum', "
                                       f"but got a tile in '{dst.buffer}' instead.")
    if perf_mode in (matmul_perf_mode.double_row, "double_row"):
        res = _double_row(stationary, moving)
    elif perf_mode not in (None, matmul_perf_mode.none, "none"):
        fail("err_invalid_perf_mode", f"perf_mode of 'nc_matmul' must be none or double_row, got {perf_mode!r}")
    else:
        res = isa.nc_matmul(stationary, moving, is_stationary_onezero=is_stationary_onezero,
                            is_moving_onezero=is_moving_onezero, is_transpose=is_transpose,
                            tile_position=tile_position, tile_size=tile_size)
    run = runtime.current()
    key = (dst.root.uid, dst.layout.offset if dst.layout is not None else None, dst.shape)
    started = run.psum_groups if run is not None else set()
    if dst.root.fill is None and key not in started:
        started.add(key)
        assign.assign(dst, res)  # first matmul of the accumulation group
    else:
        assign.accumulate(dst, res, np.add)


_FP8 = ("float8_e4m3", "float8_e5m2")


def _double_row(stationary, moving):
    """FP8 double-row matmul (NC-v3+): stationary (K, 2, M), moving (K, 2, N), both fp8; the
    contraction runs over the partitions and the first free axis (size 2): a PSUM (M, N) fp32
    tile; TensorE at twice the rate (nki-facts §2.9)."""
    if isa.get_nc_version() == nc_version.gen2:
        fail("err_unsupported_arch", "nc_matmul perf_mode=double_row needs NeuronCore-v3 (trn2) or newer")
    for t, what in ((stationary, "stationary"), (moving, "moving")):
        on_chip(t, what, "nc_matmul")
        if t.buffer != "sbuf" or len(t.shape) != 3 or t.shape[1] != 2 or dtypes.name(t.dtype) not in _FP8:
            fail("err_double_row_operand", f"'{what}' of a double_row nc_matmul must be an fp8 SBUF tile of shape "
                                           f"[K, 2, F], got {list(t.shape)} {dtypes.name(t.dtype)}")
    k, m, n = stationary.shape[0], stationary.shape[2], moving.shape[2]
    if moving.shape[0] != k or m > 128 or n > 512:
        fail("err_double_row_operand", f"double_row nc_matmul needs equal partitions, M <= 128, N <= 512; got "
                                       f"stationary{list(stationary.shape)} moving{list(moving.shape)}")
    a = tensor_values(stationary).astype(np.float32).reshape(-1, 2 * k, m)
    b = tensor_values(moving).astype(np.float32).reshape(-1, 2 * k, n)
    vals = np.matmul(a.swapaxes(1, 2), b) if runtime.computing() else np.zeros((a.shape[0], m, n), np.float32)
    out = NkiTensor.fresh(vals, np.float32, "psum")
    trace.compute("nc_matmul", "tensor", [stationary, moving], out, n, n_stationary=m, fp32=False,
                  double_row=True, flops=2 * 2 * k * m * n)
    return out


def nc_transpose(dst, data, engine=engine.unknown, name=None):
    """``dst = data.T`` (partition <-> flattened free axes) on TensorE or VectorE (SDK 2.28)."""
    dst_tile(dst, "nc_transpose")
    _into(dst, isa.nc_transpose(data, dtype=dst.dtype, engine=engine))


# --- ScalarE ----------------------------------------------------------------------------
_REGS = "scalar_regs"


def registers(name):
    """The run's accumulation registers of an engine ("scalar_regs", "vector_regs"): one fp32
    per compute lane, (S, 128, 1) (SDK 2.28 ``activation``/``select_reduce`` docs)."""
    run = runtime.current()
    regs = run.registers if run is not None else {}
    if name not in regs:
        regs[name] = np.zeros((run.batch if run is not None else 1, 128, 1), np.float32)
    return regs[name]


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               name=None):
    """``dst = op(data * scale + bias)`` on ScalarE with the 128 reduce registers driven by
    ``reduce_cmd`` (reset / reduce / reset_reduce) and read out into ``reduce_res`` (SDK 2.28)."""
    dst_tile(dst, "activation")
    if bias is not None and not isinstance(bias, NkiTensor):
        if isa.get_nc_version() == nc_version.gen2:
            fail("err_activation_bias_invalid_type", "a scalar 'bias' of 'activation' needs NeuronCore-v3 or newer")
        # NC-v3: a compile-time scalar bias, broadcast like a (P, 1) vector
        bias = _result(np.full((data.shape[0], 1), bias, np.float32), np.float32, batched=False)
    reduces = reduce_op is not None or reduce_cmd in (isa.reduce_cmd.reduce, isa.reduce_cmd.reset_reduce)
    res = isa.activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op if reduces else None,
                         dtype=dst.dtype)
    p = data.shape[0]
    if reduce_cmd != isa.reduce_cmd.idle or reduce_res is not None:
        regs = registers(_REGS)
        if reduce_cmd in (isa.reduce_cmd.reset, isa.reduce_cmd.reset_reduce):
            regs[...] = 0
        if reduce_cmd in (isa.reduce_cmd.reduce, isa.reduce_cmd.reset_reduce):
            vals = tensor_values(res).astype(np.float32)
            regs[:, :p] += batch.reshape(vals, vals.shape[0], p, -1).sum(axis=2, keepdims=True)
    _into(dst, res)
    if reduce_res is not None:
        read_registers(reduce_res, registers(_REGS)[:, :p], "activation")


def read_registers(reduce_res, regs, api):
    """Writes register values (S, P, 1) into ``reduce_res`` (one extra copy instruction)."""
    dst_tile(reduce_res, api)
    assign.assign(reduce_res, _result(regs.copy(), np.float32))


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    """``activation`` with ``reduce_cmd=reset_reduce``: ``reduce_res = sum(op(data*scale+bias))`` (SDK 2.28)."""
    activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
               reduce_cmd=isa.reduce_cmd.reset_reduce)


# --- VectorE / GpSimd -------------------------------------------------------------------
def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, name=None):
    """``dst = data1 op data2`` element-wise (SDK 2.28)."""
    dst_tile(dst, "tensor_tensor")
    _into(dst, isa.tensor_tensor(data1, data2, op, dtype=dst.dtype, engine=engine))


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=engine.unknown, name=None):
    """``dst = (data op0 operand0) op1 operand1`` with scalar / (P, 1) operands (SDK 2.28)."""
    dst_tile(dst, "tensor_scalar")
    _into(dst, isa.tensor_scalar(data, op0, operand0, reverse0, op1, operand1, reverse1, dtype=dst.dtype,
                                 engine=engine))


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None):
    """Per-partition scan ``dst[:, i] = op1(op0(data0[:, i], dst[:, i-1]), data1[:, i])`` (SDK 2.28)."""
    dst_tile(dst, "tensor_tensor_scan")
    _into(dst, isa.tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0, reverse1, dtype=dst.dtype))


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    """``dst = op-reduce(data, axis)`` over free axes (SDK 2.28)."""
    dst_tile(dst, "tensor_reduce")
    _into(dst, isa.tensor_reduce(op, data, axis, dtype=dst.dtype, negate=negate, keepdims=keepdims))


def reciprocal(dst, data, name=None):
    """``dst = 1 / data`` on VectorE (SDK 2.28)."""
    dst_tile(dst, "reciprocal")
    _into(dst, isa.reciprocal(data, dtype=dst.dtype))


def memset(dst, value, engine=engine.unknown, name=None):
    """Fills ``dst`` with ``value`` cast to ``dst.dtype`` (SDK 2.28)."""
    dst_tile(dst, "memset")
    _into(dst, isa.memset(dst.shape, value, dst.dtype, engine=engine))


def tensor_copy(dst, src, engine=engine.unknown, name=None):
    """``dst = src`` on VectorE/ScalarE/GpSimd; ScalarE only from NC-v3 (SDK 2.28)."""
    dst_tile(dst, "tensor_copy")
    if engine == isa.engine.scalar and isa.get_nc_version() == nc_version.gen2:
        fail("err_unsupported_engine", "'tensor_copy' on the Scalar engine is not supported on NeuronCore-v2; "
                                       "use nisa.activation with op=nl.copy")
    if engine == isa.engine.gpsimd and dst.buffer == "psum":
        fail("err_unsupported_memory", "Expected operand 'dst' of 'tensor_copy' on gpsimd to be in address "
                                       "space 'sbuf', but got a tile in 'psum' instead.")
    _into(dst, isa.tensor_copy(src, dtype=dst.dtype, engine=engine))


def _pattern_values(pattern, offset, channel_multiplier, p, api, free):
    """int64 values ``offset + c*channel_multiplier + sum(i_k*step_k)`` of shape (P, F)."""
    dims = [(int(step), int(num)) for step, num in pattern]
    grid = np.zeros((1,), np.int64)
    for step, num in dims:
        grid = (grid[:, None] + step * np.arange(num, dtype=np.int64)[None, :]).reshape(-1)
    if grid.size != free:
        fail("err_pattern_size_mismatch", f"'{api}': the pattern has {grid.size} elements but 'dst' has {free} "
                                          f"elements per partition")
    chan = np.arange(p, dtype=np.int64)[:, None] * int(channel_multiplier)
    return int(offset) + chan + grid[None, :]


def iota(dst, pattern, offset, channel_multiplier=0, name=None):
    """``dst[c, ...] = offset + c*channel_multiplier + sum(i*step)`` on GpSimd (SDK 2.28)."""
    dst_tile(dst, "iota")
    p, f = dst.shape[0], free_size(dst.shape)
    vals = _pattern_values(pattern, offset, channel_multiplier, p, "iota", f).reshape(dst.shape)
    _into(dst, isa.iota(vals.astype(np.float64 if dtypes.storage(dst.dtype).kind == "f" else np.int64),
                        dst.dtype))


def affine_select(dst, pattern, offset, channel_multiplier, on_true_tile, on_false_value, cmp_op=None, name=None):
    """``dst = where(cmp_op(affine_value, 0), on_true_tile, on_false_value)`` on GpSimd (SDK 2.28;
    ``cmp_op`` defaults to ``nl.equal``)."""
    from . import ops
    dst_tile(dst, "affine_select")
    p, f = dst.shape[0], free_size(dst.shape)
    affine = _pattern_values(pattern, offset, channel_multiplier, p, "affine_select", f).reshape(on_true_tile.shape)
    cond = ops.binary(cmp_op if cmp_op is not None else "equal")(affine, 0)
    _into(dst, isa.affine_select(cond, on_true_tile, on_false_value, dtype=dst.dtype))


DST_FORMS = {
    "nc_matmul": nc_matmul, "nc_transpose": nc_transpose, "activation": activation,
    "activation_reduce": activation_reduce, "tensor_tensor": tensor_tensor, "tensor_scalar": tensor_scalar,
    "tensor_tensor_scan": tensor_tensor_scan, "tensor_reduce": tensor_reduce, "reciprocal": reciprocal,
    "memset": memset, "tensor_copy": tensor_copy, "iota": iota, "affine_select": affine_select,
}


def _tile(x):
    return isinstance(x, NkiTensor)


def _is_op(x):
    return not _tile(x) and (callable(x) or isinstance(x, str))


# Which positional arguments tell the 2.28 form from the legacy one (the legacy call of the
# same API could not have a tile there).
DST_SELECTORS = {
    "nc_matmul": lambda a, k: len(a) >= 3 and _tile(a[2]) or (len(a) >= 1 and "stationary" in k and "moving" in k
                                                               and len(a) == 1),
    "nc_transpose": lambda a, k: len(a) >= 2 and _tile(a[1]) or (len(a) == 1 and "data" in k),
    "activation": lambda a, k: len(a) >= 1 and _tile(a[0]),
    "activation_reduce": lambda a, k: len(a) >= 1 and _tile(a[0]),
    "tensor_tensor": lambda a, k: len(a) >= 3 and _tile(a[2]) or (len(a) == 1 and "data1" in k),
    "tensor_scalar": lambda a, k: len(a) >= 2 and _tile(a[1]) or (len(a) == 1 and "data" in k),
    "tensor_tensor_scan": lambda a, k: len(a) >= 4 and not _is_op(a[3]) or (len(a) == 1 and "data0" in k),
    "tensor_reduce": lambda a, k: len(a) >= 1 and _tile(a[0]),
    "reciprocal": lambda a, k: len(a) >= 2 and _tile(a[1]) or (len(a) == 1 and "data" in k),
    "memset": lambda a, k: len(a) >= 1 and _tile(a[0]),
    "tensor_copy": lambda a, k: len(a) >= 2 and _tile(a[1]) or (len(a) == 1 and "src" in k),
    "iota": lambda a, k: len(a) >= 1 and _tile(a[0]) or "pattern" in k,
    "affine_select": lambda a, k: len(a) >= 1 and _tile(a[0]) or "pattern" in k,
}


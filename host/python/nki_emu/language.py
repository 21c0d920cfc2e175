"""``neuronxcc.nki.language`` (legacy NKI "Beta 1") on NumPy.

Semantics per nki-facts §2.5 (AWS Neuron SDK 2.24 ``nki.language`` docs);
instruction mapping for the cost model per nki-facts §3.5.
"""
import math
import sys

import numpy as np

from . import batch, dtypes, ops, runtime, tensor, trace
from .assign import LoopReduceResult
from .dtypes import (bfloat16, bool_, float8_e4m3, float8_e5m2, float16, float32, int8, int16,  # noqa: F401
                     int32, tfloat32, uint8, uint16, uint32)
from .errors import fail, user_frame_object as _kernel_frame
from .index_expr import arange, mask_array, mgrid  # noqa: F401
from .language_extras import check_allocation, dynamic_range, gather_flattened, load_transpose2d, no_reorder  # noqa: F401
from .language_extras import usable_sbuf_bytes
from .operands import dtype_of as _dtype_of, free_size, is_tile as _is_tile, on_chip, result as _result
from .operands import space as _space, values
from .tensor import HBM_BUFFERS, MAX_PARTITIONS as _PMAX, NkiTensor, par_dim  # noqa: F401
from .tensor import read as tensor_read, write as tensor_write


class _Buffer:
    """Memory space marker (``nl.sbuf``, ``nl.psum``, ``nl.shared_hbm``, ...)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


sbuf, psum = _Buffer("sbuf"), _Buffer("psum")
shared_hbm, private_hbm, hbm = _Buffer("shared_hbm"), _Buffer("private_hbm"), _Buffer("hbm")


class _TileSizeMeta(type):
    """Target-dependent ``nl.tile_size`` attributes (read while a run is active)."""

    @property
    def total_available_sbuf_size(cls):
        """Usable SBUF bytes per partition: trn1 192 KiB - 16 KiB compiler reserve [D S3
        compiler/sbuf.py]; trn2 224 KiB [D S4 trn2 guide] - the same reserve [I]."""
        return usable_sbuf_bytes()

    @property
    def sbuf_size_bytes(cls):
        """Total SBUF bytes of a core: 128 x 192 KiB (trn1), 128 x 224 KiB (trn2) [D S3/S4]."""
        return 128 * (224 if _target() == "trn2" else 192) * 1024

    @property
    def sbuf_fmax_bytes(cls):
        """Largest SBUF tile free size in bytes (the usable bytes per partition)."""
        return cls.total_available_sbuf_size

    @property
    def sbuf_fmax(cls):
        """Largest SBUF tile free size in fp32 elements."""
        return cls.total_available_sbuf_size // 4


def _target():
    run = runtime.current()
    return run.target if run is not None else "trn1"


class tile_size(metaclass=_TileSizeMeta):
    """Hardware tile limits (docs/nki-facts.md §2.5, §3.1; SDK 2.28 adds the psum_*/sbuf_* sizes).
    PSUM: 8 banks x 2 KiB per partition on trn1 and trn2 [D S3/S4]."""
    pmax = _PMAX
    psum_fmax = 512
    psum_fmax_bytes = 2048
    psum_num_banks = 8
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_min_align = 4
    sbuf_min_align = 1


def _buffer_name(buffer):
    if buffer is None:
        return "sbuf"
    return buffer.name if isinstance(buffer, _Buffer) else str(buffer)


# --- creation ---------------------------------------------------------------------------
def ndarray(shape, dtype=np.float32, buffer=None, name="", address=None, lazy_initialization=False):
    """Uninitialised tensor (nki-facts §2.5); NaN-filled when small (nki-facts §2.1 [I]).
    ``address`` = (partition_offset, free_offset): SDK 2.28 direct allocation of an
    SBUF/PSUM tensor (never mixed with automatic allocation in one kernel)."""
    where = _buffer_name(buffer)
    t = NkiTensor.allocate(shape, dtype, where, name=name)
    check_allocation(where, address, t.shape[t.par_axis:], t.itemsize)
    return t


def zeros(shape, dtype=np.float32, buffer=None, name="", lazy_initialization=False):
    """Zero-filled tensor. ``lazy_initialization`` (undocumented, used by NKIBench, nki-facts §1.1)
    is accepted and ignored; any other keyword is refused (nki_emu.signatures)."""
    return full(shape, 0, dtype, buffer, name)


def ones(shape, dtype=np.float32, buffer=None, name="", lazy_initialization=False):
    return full(shape, 1, dtype, buffer, name)


def full(shape, fill_value, dtype=np.float32, buffer=None, name="", lazy_initialization=False):
    """Filled tensor; HBM tensors with an init value are refused (nki-facts §2.5)."""
    where = _buffer_name(buffer)
    if where in HBM_BUFFERS:
        fail("err_hbm_tensor_with_init_value_not_supported",
             "Creating HBM tensor with init value is not supported.")
    t = NkiTensor.allocate(shape, dtype, where, name=name, fill=fill_value)
    check_allocation(where, None, t.shape[t.par_axis:], t.itemsize)
    return t


def zeros_like(a, dtype=None, buffer=None, name=""):
    return zeros(a.shape, dtype or a.dtype, buffer, name)


def ones_like(a, dtype=None, buffer=None, name=""):
    return ones(a.shape, dtype or a.dtype, buffer, name)


def empty_like(a, dtype=None, buffer=None, name=""):
    return ndarray(a.shape, dtype or a.dtype, buffer, name)


def full_like(a, fill_value, dtype=None, buffer=None, name=""):
    return full(a.shape, fill_value, dtype or a.dtype, buffer, name)


def shared_constant(constant, dtype=None):
    """Constant HBM tensor holding ``constant`` (nki-facts §2.5). No store ever writes it, so
    returning it as an output is ``unwritten_output`` (nki_emu.coverage)."""
    arr = np.array(constant, dtype=dtypes.storage(dtype) if dtype is not None else None)
    return NkiTensor.allocate(arr.shape, dtype or arr.dtype, "shared_hbm", name="shared_constant",
                              data=np.ascontiguousarray(arr), immutable=True, track_writes=True)


# --- loops ------------------------------------------------------------------------------
def _range_args(start, stop, step):
    """``range()`` arguments of ``nl.*_range(start, stop=None, step=1)``."""
    return (start,) if stop is None and step == 1 else (0 if stop is None else start,
                                                           start if stop is None else stop, step)


def affine_range(start, stop=None, step=1):
    """Parallel loop: yields ints (LoopIndex) like range()."""
    return runtime.loop_range("affine", _range_args(start, stop, step), _kernel_frame())


def sequential_range(start, stop=None, step=1):
    return runtime.loop_range("sequential", _range_args(start, stop, step), _kernel_frame())


def static_range(start, stop=None, step=1):
    return runtime.loop_range("static", _range_args(start, stop, step), _kernel_frame())


def program_id(axis=0):
    return 0


def num_programs(axes=None):
    return 1


def program_ndim():
    return 0


# Where nl.device_print writes: sys.stdout as it was when the emulator was imported (the
# host's log writer, a worker's stdout), so that kernel code redirecting sys.stdout
# (contextlib.redirect_stdout) cannot capture tensor values.
_PRINT_STREAM = sys.stdout


def device_print(prefix, x, mask=None):
    """Prints ``prefix`` and the values of ``x`` to the standard output the emulator was
    imported with (see ``_PRINT_STREAM``): one line per input set of a batched run."""
    try:
        vals = values(x)
        for member in (vals if _is_tile(x) else [vals]):
            _PRINT_STREAM.write(f"{prefix} {member}\n")
        _PRINT_STREAM.flush()
    except (OSError, ValueError, AttributeError):
        pass  # a closed or missing stream: printing is best effort


# --- data movement ----------------------------------------------------------------------
def load(src, mask=None, dtype=None):
    """HBM -> new SBUF tile (DMA), optional cast (nki-facts §2.5)."""
    if not _is_tile(src) or src.buffer not in HBM_BUFFERS:
        fail("err_unsupported_memory",
             f"Expected operand 'src' of 'load' to be in address space 'hbm', but got a tile in "
             f"'{_space(src) if _is_tile(src) else 'python'}' instead.")
    shape = src.shape if len(src.shape) > 1 else (src.shape[0], 1)
    valid = mask_array(mask, shape)
    src.check_bounds(None if valid is None else valid.reshape(src.shape))
    vals = tensor_read(src)
    vals = vals.reshape(vals.shape[:1] + shape)
    out = NkiTensor.fresh(vals, dtype or src.dtype, "sbuf", valid=valid)
    on_chip(out, "src", "load")
    trace.dma("load", src, out, out=out)
    return out


def store(dst, value, mask=None):
    """SBUF (or PSUM) tile -> HBM (DMA) (nki-facts §2.5)."""
    if not _is_tile(dst) or dst.buffer not in HBM_BUFFERS:
        fail("err_unsupported_memory",
             f"Expected operand 'dst' of 'store' to be in address space 'hbm', but got a tile in "
             f"'{_space(dst) if _is_tile(dst) else 'python'}' instead.")
    if _is_tile(value):
        on_chip(value, "value", "store")
    vals = np.asarray(values(value))
    shape = dst.shape
    valid = mask_array(mask, shape)
    batched = _is_tile(value)
    if batched and value.valid is not None:
        vv = np.broadcast_to(value.valid, value.shape).reshape(shape) if value.valid.size == dst.size \
            else np.broadcast_to(value.valid, shape)
        valid = vv if valid is None else (valid & vv)
    if batched and vals.shape[1:] != shape and vals.size == vals.shape[0] * dst.size:
        vals = vals.reshape(vals.shape[:1] + shape)
    elif not batched and vals.shape != shape and vals.size == dst.size:
        vals = vals.reshape(shape)
    tensor_write(dst, vals, valid, batched=batched)
    run = runtime.current()
    if run is not None and dst.layout is not None:
        run.check_output_dependency(dst.root, dst.layout)
    if _is_tile(value):
        trace.dma("store", value, dst)


def copy(src, mask=None, dtype=None):
    """Element-wise copy to a new SBUF tile, optional cast (nki-facts §2.5; PSUM eviction)."""
    on_chip(src, "src", "copy")
    out = _result(np.array(values(src), copy=True), dtype or src.dtype, mask=mask)
    trace.compute("tensor_copy", "auto", [src], out, free_size(out.shape))
    return out


def broadcast_to(src, shape):
    """NumPy broadcast of a tile to ``shape``; a 1-partition source is broadcast on TensorE (nki-facts §2.5)."""
    shape = tuple(int(d) for d in shape)
    vals = batch.expand(values(src), shape)
    out = NkiTensor.fresh(np.ascontiguousarray(vals), src.dtype, "sbuf")
    if src.shape[0] == 1 and shape[0] > 1:
        trace.compute("nc_matmul", "tensor", [src], out, free_size(shape), n_stationary=shape[0],
                      fp32=True, onezero=True, flops=2 * shape[0] * free_size(shape))
    else:
        trace.compute("tensor_copy", "vector", [src], out, free_size(shape))
    return out


def expand_dims(data, axis):
    """A new tile with a length-1 axis inserted at ``axis`` (of the tile)."""
    axis = int(axis)
    return NkiTensor.fresh(np.expand_dims(values(data), axis + 1 if axis >= 0 else axis), data.dtype, data.buffer)


def transpose(x, dtype=None, mask=None):
    """2-D partition<->free transpose (nki-facts §2.5, 4.10)."""
    on_chip(x, "x", "transpose")
    if len(x.shape) != 2:
        fail("err_exceed_max_supported_dimension",
             f"parameter 'x[{', '.join(map(str, x.shape))}]' of 'transpose' exceed max supported number of dimensions of 2.")
    for dim, n in enumerate(x.shape):
        if n > 128:
            fail("err_size_of_dimension_exceed_arch_limit",
                 f"size of dimension {dim} in 'x[{', '.join(map(str, x.shape))}]' of 'transpose' exceed architecture limitation of 128.")
    out = _result(values(x).swapaxes(-1, -2), dtype or x.dtype, "psum", mask)
    trace.compute("nc_transpose", "tensor", [x], out, x.shape[1], partitions=x.shape[0], fp32=True,
                  flops=2 * x.shape[0] * x.shape[1] * x.shape[1], transpose=True)
    return out


# --- element-wise -----------------------------------------------------------------------
def elementwise(op, a, b, dtype=None, mask=None, operator=False, api=None):
    """Binary element-wise op on tiles/scalars with NumPy broadcasting (nki-facts §2.5)."""
    api = api or ops.op_name(op)
    for name, x in (("x", a), ("y", b)):
        if _is_tile(x):
            on_chip(x, name, api)
    va, vb = values(a), values(b)
    if operator and _is_tile(a) and _is_tile(b) and a.shape[0] != b.shape[0]:
        fail("err_num_partition_mismatch",
             f"number of partitions (dimension 0 size of a tile) mismatch in parameters "
             f"(x[{', '.join(map(str, a.shape))}], y[{', '.join(map(str, b.shape))}]) of '{api}'")
    fn = ops.binary(op)
    batched_a, batched_b = _is_tile(a), _is_tile(b)
    res = fn(*batch.align(va, vb, batched_a, batched_b))
    out_dtype = dtype or dtypes.promote(_dtype_of(a), _dtype_of(b))
    out = _result(res, out_dtype, mask=mask, batched=batched_a or batched_b)
    tiles = [x for x in (a, b) if _is_tile(x)]
    full_tiles = [x for x in tiles if free_size(x.shape) > 1 or free_size(out.shape) == 1]
    n = free_size(out.shape)
    if len(full_tiles) >= 2:
        trace.compute("tensor_tensor", "vector", tiles, out, n, in_psum=any(t.buffer == "psum" for t in tiles))
    else:
        eng = "auto" if ops.op_name(op) in ("add", "subtract", "multiply") else "vector"
        trace.compute("tensor_scalar", eng, tiles, out, n)
    return out


def _binary_api(name):
    np_fn = ops.BINARY[name]

    def api(x, y, dtype=None, mask=None):
        return elementwise(np_fn, x, y, dtype=dtype, mask=mask, api=name)

    api.__name__ = name
    api.op_name = name
    api.__doc__ = f"``nl.{name}(x, y, dtype=None, mask=None)``: element-wise {name} (nki-facts §2.5)."
    return api


def _unary_api(name):
    np_fn = ops.UNARY[name]

    def api(x, dtype=None, mask=None):
        on_chip(x, "x", name)
        vx = values(x)
        res = np_fn(np.asarray(vx, dtype=np.float32) if np.asarray(vx).dtype != np.float32 else vx)
        out = _result(res, dtype or _dtype_of(x), mask=mask, batched=_is_tile(x))
        trace.compute("activation", "scalar", [x] if _is_tile(x) else [], out, free_size(out.shape))
        return out

    api.__name__ = name
    api.op_name = name
    api.__doc__ = f"``nl.{name}(x, dtype=None, mask=None)``: element-wise {name} on ScalarE (nki-facts §2.5)."
    return api


for _name in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "equal",
              "not_equal", "greater", "greater_equal", "less", "less_equal", "bitwise_and",
              "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor",
              "left_shift", "right_shift", "fmod"):
    globals()[_name] = _binary_api(_name)

for _name in ("exp", "log", "sqrt", "rsqrt", "square", "reciprocal", "sigmoid", "tanh", "relu",
              "gelu", "gelu_apprx_tanh", "gelu_dx", "silu", "silu_dx", "softplus", "mish", "erf",
              "erf_dx", "abs", "sign", "sin", "cos", "tan", "arctan", "negative", "ceil", "floor",
              "trunc"):
    globals()[_name] = _unary_api(_name)

copy.op_name = "copy"
identity = _unary_api("identity")


# --- reductions -------------------------------------------------------------------------
def _reduce_api(name):
    def api(x, axis, dtype=None, mask=None, keepdims=False):
        on_chip(x, "x", name)
        axes = tuple(int(a) for a in (axis if isinstance(axis, (list, tuple)) else [axis]))
        if 0 in axes:
            fail("err_reduce_on_partition_axis", f"'{name}' cannot reduce along the partition dimension (axis 0).")
        vals = values(x)
        res = ops.REDUCE[name](vals, axis=batch.reduce_axes(axes), keepdims=True)
        if not keepdims:
            res = batch.reshape(res, res.shape[0], res.shape[1], -1) if res.ndim > 2 else res
        out = _result(res, dtype or x.dtype, mask=mask)
        trace.compute("tensor_reduce", "vector", [x], out, free_size(x.shape))
        return out

    api.__name__ = name
    api.op_name = "add" if name == "sum" else name
    return api


sum = _reduce_api("sum")  # noqa: A001 - NKI API name
prod = _reduce_api("prod")
mean = _reduce_api("mean")
max = _reduce_api("max")  # noqa: A001
min = _reduce_api("min")  # noqa: A001
max.op_name, min.op_name = "max", "min"


def loop_reduce(x, op, loop_indices, mask=None, dtype=None):
    """``dst[...] = nl.loop_reduce(x, op, loop_indices)``: dst = op(x, dst) across the
    listed loops; the first iteration of all of them initialises dst (nki-facts §2.5 [I])."""
    on_chip(x, "x", "loop_reduce")
    valid = mask_array(mask, x.shape)
    return LoopReduceResult(x, op, loop_indices, valid)


# --- matmul -----------------------------------------------------------------------------
def matmul(x, y, transpose_x=False, mask=None):
    """``x @ y`` into PSUM (fp32); without ``transpose_x`` TensorE first transposes x (nki-facts §2.5)."""
    on_chip(x, "x", "matmul")
    on_chip(y, "y", "matmul")
    vx, vy = values(x), values(y)
    k_x = x.shape[0] if transpose_x else (x.shape[1] if len(x.shape) > 1 else 1)
    m = x.shape[1] if transpose_x else x.shape[0]
    if m > 128 or k_x > 128 or y.shape[0] != k_x or free_size(y.shape) > 512:
        fail("err_matmul_shape",
             f"nl.matmul expects x[M<=128, K<=128] and y[K<=128, N<=512], got "
             f"x{list(x.shape)} y{list(y.shape)} (transpose_x={transpose_x})")
    a = vx if transpose_x else vx.swapaxes(-1, -2)  # the stationary operand (S, K, M)
    if runtime.computing():
        res = np.matmul(a.swapaxes(-1, -2).astype(np.float32, copy=False),
                        batch.reshape(vy, vy.shape[0], y.shape[0], -1).astype(np.float32, copy=False))
    else:
        res = np.zeros((vx.shape[0], m, free_size(y.shape)), np.float32)
    out = _result(res, np.float32, "psum", mask)
    n_mov = free_size(y.shape)
    if not transpose_x and trace.active():
        # the transposed copies exist for the cost trace only: roots over `a` (no copy)
        xt = NkiTensor.allocate(a.shape[1:], x.dtype, "psum", data=a)
        trace.compute("nc_transpose", "tensor", [x], xt, k_x, partitions=m, fp32=True,
                      flops=2 * m * k_x * m, transpose=True)
        xs = NkiTensor.allocate(a.shape[1:], x.dtype, "sbuf", data=a)
        trace.compute("tensor_copy", "scalar", [xt], xs, m)
        x = xs
    trace.compute("nc_matmul", "tensor", [x, y], out, n_mov, n_stationary=m, fp32=True,
                  flops=2 * k_x * m * n_mov)
    return out


tensor.bind_operators(elementwise=elementwise, broadcast_to=broadcast_to, copy=copy, expand_dims=expand_dims)

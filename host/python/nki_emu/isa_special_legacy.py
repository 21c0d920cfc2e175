"""Legacy (``neuronxcc.nki``, SDK 2.26) forms of the instructions ``nki_emu.isa_special`` and
``nki_emu.isa_dma`` implement in their SDK 2.28 ``dst=`` form.

SDK 2.26 had the same instructions returning a new SBUF tile, with the parameter lists
of its ``nki.isa`` stub (aws-neuron-sdk ``general/nki/api/nki/isa/__init__.py``, SDK 2.26;
docs/nki-facts.md §2.9): each function here allocates the result tile, calls the 2.28
form on it and returns it, so semantics, validation and cost are those of the 2.28 form.
``nki_emu.isa_api`` dispatches between the two forms. A legacy ``mask=`` other than None
is refused (``err_api_not_emulated``) rather than ignored; ``dtype`` sets the result's
dtype.
"""
import numpy as np

from . import dtypes, isa_dma, isa_special
from .errors import fail
from .isa import dge_mode as _DGE, oob_mode as _OOB, reduce_cmd as _CMD
from .operands import free_size
from .tensor import NkiTensor


def _no_mask(mask, api):
    if mask is not None:
        fail("err_api_not_emulated", f"'mask=' of the legacy form of '{api}' is not emulated; use the SDK 2.28 "
                                     f"form (dst=...) or no mask")


def _tile(shape, dtype, like):
    return NkiTensor.allocate(tuple(int(d) for d in shape),
                              dtype if dtype is not None else (like.dtype if like is not None else np.float32), "sbuf")


def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                         mask=None):
    """Legacy form: returns ``(data op0 operand0) op1 operand1`` as a new tile."""
    _no_mask(mask, "scalar_tensor_tensor")
    dst = _tile(data.shape, dtype, data)
    isa_special.scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0, reverse1)
    return dst


def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None):
    """Legacy form: returns ``data op0 operand0``; the reduction goes to ``reduce_res``."""
    _no_mask(mask, "tensor_scalar_reduce")
    dst = _tile(data.shape, dtype, data)
    isa_special.tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res, reverse0)
    return dst


def max8(*, src, mask=None, dtype=None):
    """Legacy form: returns the (P, 8) tile of the 8 largest values per partition."""
    _no_mask(mask, "max8")
    dst = _tile((src.shape[0], 8), dtype, src)
    isa_special.max8(dst, src)
    return dst


def nc_find_index8(*, data, vals, mask=None, dtype=None):
    """Legacy form: returns the (P, 8) uint32 (or ``dtype``) tile of first indices."""
    _no_mask(mask, "nc_find_index8")
    dst = _tile((data.shape[0], 8), dtype if dtype is not None else dtypes.resolve("uint32"), None)
    isa_special.nc_find_index8(dst, data, vals)
    return dst


def nc_match_replace8(*, data, vals, imm, dst_idx=None, mask=None, dtype=None):
    """Legacy form: returns ``data`` with the 8 values replaced by ``imm``."""
    _no_mask(mask, "nc_match_replace8")
    dst = _tile(data.shape, dtype, data)
    isa_special.nc_match_replace8(dst, data, vals, imm, dst_idx)
    return dst


def bn_stats(data, *, mask=None, dtype=None):
    """Legacy form: returns the (P, 6) statistics tile."""
    _no_mask(mask, "bn_stats")
    dst = _tile((data.shape[0], 6), dtype, data)
    isa_special.bn_stats(dst, data)
    return dst


def bn_aggr(data, *, mask=None, dtype=None):
    """Legacy form: returns the (P, 2) (mean, variance) tile."""
    _no_mask(mask, "bn_aggr")
    dst = _tile((data.shape[0], 2), dtype, data)
    isa_special.bn_aggr(dst, data)
    return dst


def dropout(data, prob, *, mask=None, dtype=None):
    """Legacy form: returns ``data`` with elements zeroed with probability ``prob``."""
    _no_mask(mask, "dropout")
    dst = _tile(data.shape, dtype, data)
    isa_special.dropout(dst, data, prob)
    return dst


def range_select(*, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=_CMD.idle, reduce_res=None,
                 reduce_op=np.amax, range_start=0, on_false_value=-3.4028235e+38, mask=None, dtype=None):
    """Legacy form: returns the selected tile (see the 2.28 form)."""
    _no_mask(mask, "range_select")
    dst = _tile(on_true_tile.shape, dtype, on_true_tile)
    isa_special.range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd, reduce_res, reduce_op,
                         range_start, on_false_value)
    return dst


def tensor_partition_reduce(op, data, *, mask=None, dtype=None):
    """Legacy form: returns the (1, F) tile of the reduction across partitions."""
    _no_mask(mask, "tensor_partition_reduce")
    dst = _tile((1,) + tuple(data.shape[1:]) if len(data.shape) > 1 else (1, 1), dtype, data)
    isa_special.tensor_partition_reduce(dst, op, data)
    return dst


def local_gather(src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, *, mask=None):
    """Legacy form: returns the (P, num_valid_indices, num_elem_per_idx) gathered tile."""
    _no_mask(mask, "local_gather")
    valid = 16 * free_size(index.shape) if num_valid_indices is None else int(num_valid_indices)
    dst = _tile((src_buffer.shape[0], valid, int(num_elem_per_idx)), None, src_buffer)
    isa_special.local_gather(dst, src_buffer, index, num_elem_per_idx, num_valid_indices)
    return dst


def sequence_bounds(*, segment_ids, dtype=None):
    """Legacy form: returns the (1, 2, n) bounds tile."""
    dst = _tile((1, 2, free_size(segment_ids.shape)), dtype, segment_ids)
    isa_special.sequence_bounds(dst, segment_ids)
    return dst


def dma_transpose(src, *, axes=None, mask=None, dtype=None):
    """Legacy form: returns the transposed SBUF tile."""
    _no_mask(mask, "dma_transpose")
    perm = tuple(axes) if axes is not None else isa_dma.DEFAULT_AXES.get(len(src.shape), ())
    if len(perm) != len(src.shape):
        fail("err_dma_transpose_axes", f"'dma_transpose' supports 2-/3-/4-D tiles, got src{list(src.shape)}")
    dst = _tile(tuple(src.shape[a] for a in perm), dtype, src)
    isa_dma.dma_transpose(dst, src, axes)
    return dst


def dma_copy(*, dst, src, mask=None, dst_rmw_op=None, oob_mode=_OOB.error, dge_mode=_DGE.unknown):
    """Legacy (SDK 2.26) keyword form of ``dma_copy`` (with ``mask``)."""
    _no_mask(mask, "dma_copy")
    isa_dma.dma_copy(dst, src, dst_rmw_op, oob_mode, dge_mode)


def _tile_arg(x):
    return isinstance(x, NkiTensor)


# name: (legacy function, selector of the 2.28 form given (args, kwargs))
LEGACY_FORMS = {
    "scalar_tensor_tensor": (scalar_tensor_tensor, lambda a, k: len(a) > 0),
    "tensor_scalar_reduce": (tensor_scalar_reduce, lambda a, k: len(a) > 0),
    "max8": (max8, lambda a, k: len(a) > 0),
    "nc_find_index8": (nc_find_index8, lambda a, k: len(a) > 0),
    "nc_match_replace8": (nc_match_replace8, lambda a, k: len(a) > 0),
    "range_select": (range_select, lambda a, k: len(a) > 0),
    "sequence_bounds": (sequence_bounds, lambda a, k: len(a) > 0),
    "bn_stats": (bn_stats, lambda a, k: len(a) >= 2 or (len(a) == 1 and "data" in k)),
    "bn_aggr": (bn_aggr, lambda a, k: len(a) >= 2 or (len(a) == 1 and "data" in k)),
    "dropout": (dropout, lambda a, k: len(a) >= 3 or (len(a) == 2 and "prob" in k) or (len(a) == 1 and "data" in k)),
    "tensor_partition_reduce": (tensor_partition_reduce, lambda a, k: len(a) >= 1 and _tile_arg(a[0])),
    "local_gather": (local_gather, lambda a, k: (len(a) >= 3 and _tile_arg(a[2]))
                     or (len(a) == 2 and "index" in k) or (len(a) == 1 and "src_buffer" in k)),
    "dma_transpose": (dma_transpose, lambda a, k: len(a) >= 2 or (len(a) == 1 and "src" in k)),
    "dma_copy": (dma_copy, lambda a, k: "mask" not in k),
}

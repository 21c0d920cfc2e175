"""``nki.isa.dma_copy`` and ``nki.isa.dma_transpose`` (SDK 2.28, docs/nki-facts.md §2.9).

Both move data between HBM and SBUF tiles (never PSUM) on the DMA queues. The
cost model records them as the loads/stores of ``nl.load``/``nl.store`` (DMA
model of nki-facts §3.4: ceil(P/8) of the 16 queues, bytes at 17 B/ns per queue
on trn1, 23 B/ns on trn2); an SBUF -> SBUF copy is a load that moves no HBM bytes
and is never hoisted. A transpose runs at
90 % (from HBM) or 50 % (SBUF to SBUF) of the DMA bandwidth; ``dge_mode=hwdge`` (NC-v3
only) delays the transfer by ~600 ns (``targets.Target``, nki-facts §3.1).
"""
import numpy as np

from . import ops, runtime, trace
from .errors import fail
from .isa import dge_mode as _DGE, get_nc_version, nc_version, oob_mode as _OOB
from .layout import gather_inb, gather_members
from .operands import free_size
from .tensor import HBM_BUFFERS, NkiTensor, read, write
from .tensor import values as tensor_values


def _operand(t, what, api):
    if not isinstance(t, NkiTensor):
        fail("err_failed_to_infer_tile_from_local_tensor", f"'{what}' of '{api}' must be a tensor, got "
                                                           f"{type(t).__name__}")
    if t.buffer == "psum":
        fail("err_unsupported_memory", f"Expected operand '{what}' of '{api}' to be in address space 'hbm|sbuf', "
                                       f"but got a tile in 'psum' instead.")
    return t


def _dge(mode, api, allowed):
    if mode not in allowed and mode not in tuple(int(a) for a in allowed):
        fail("err_invalid_dge_mode", f"dge_mode {getattr(mode, 'name', mode)!r} is not allowed for '{api}'")
    if mode == _DGE.hwdge and get_nc_version() == nc_version.gen2:
        fail("err_unsupported_arch", f"hardware DGE (dge_mode=hwdge) of '{api}' needs NeuronCore-v3 (trn2) or newer")


def _skip_mask(t, mode, per_member_ok=False):
    """With ``oob_mode.skip``, the in-bound elements of an indirect access, else None: static
    (t.shape), or (S,) + t.shape when the members' indices differ and ``per_member_ok`` (a
    read); for a write such a mask is reduced to the elements in bounds for every member
    and the run is marked data dependent (docs/nki-emulator.md, Limitations)."""
    if mode != _OOB.skip or t.gather is None:
        return None
    per_member = gather_members(t.gather)
    if per_member is not None:
        if per_member[1] is None:
            return None
        if per_member_ok:
            return per_member[1]
        run = runtime.current()
        if run is not None:
            run.data_dependent = True
        return np.all(per_member[1], axis=0)
    return gather_inb(t.gather)


def _trace(src, dst, dge=None, transpose=False):
    hbm_src, hbm_dst = src.buffer in HBM_BUFFERS, dst.buffer in HBM_BUFFERS
    info = {}
    if dge == _DGE.hwdge:
        info["dge"] = "hwdge"
    if transpose:
        info["transpose"] = "hbm" if hbm_src else "sbuf"
    if not hbm_src and not hbm_dst:
        info["onchip"] = True  # SBUF -> SBUF: a DMA that moves no HBM bytes
    trace.dma("store" if (hbm_dst and not hbm_src) or (hbm_src and hbm_dst) else "load", src, dst, **info)


def _finish(dst):
    run = runtime.current()
    if run is not None and dst.buffer in HBM_BUFFERS and dst.layout is not None:
        run.check_output_dependency(dst.root, dst.layout)


def dma_copy(dst, src, dst_rmw_op=None, oob_mode=_OOB.error, dge_mode=_DGE.unknown, unique_indices=True,
             name=None):
    """``dst = src`` (or ``dst = dst + src`` with ``dst_rmw_op=nl.add``) through the DMA engines,
    HBM/SBUF on either side, cast through fp32 when dtypes differ; equal element counts.
    Indirect (``t[idx[i_p, 0], i_f]``) sides are gathers/scatters; out-of-bound indices are an
    error or, with ``oob_mode=skip``, skipped. Raises NKICompileError."""
    _operand(dst, "dst", "dma_copy")
    _operand(src, "src", "dma_copy")
    _dge(dge_mode, "dma_copy", tuple(_DGE))
    if src.size != dst.size:
        fail("err_dma_size_mismatch", f"'dma_copy' moves {src.size} elements of 'src{list(src.shape)}' into "
                                      f"{dst.size} of 'dst{list(dst.shape)}'; the counts must match")
    if dst_rmw_op is not None and ops.op_name(dst_rmw_op) != "add":
        fail("err_dma_rmw_op", f"'dst_rmw_op' of 'dma_copy' must be nl.add or None, got {ops.op_name(dst_rmw_op)}")
    if dst_rmw_op is not None and oob_mode == _OOB.skip:
        fail("err_dma_rmw_op", "'dma_copy' with dst_rmw_op allows only oob_mode=error")
    skip = _skip_mask(src, oob_mode, per_member_ok=True)
    if skip is None:
        src.check_bounds(None)
    vals = read(src)
    vals = vals.reshape(vals.shape[:1] + dst.shape)
    if skip is not None:
        vals = np.where(skip.reshape(skip.shape[:skip.ndim - len(src.shape)] + dst.shape), vals, tensor_values(dst))
    if dst_rmw_op is not None:
        vals = tensor_values(dst).astype(np.float32) + vals.astype(np.float32)
    write(dst, vals, _skip_mask(dst, oob_mode))
    _finish(dst)
    _trace(src, dst, dge_mode)


DEFAULT_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def dma_transpose(dst, src, axes=None, dge_mode=_DGE.unknown, oob_mode=_OOB.error, name=None):
    """``dst = src.transpose(axes)`` through the DMA engines; ``axes`` (1, 0), (2, 1, 0) or
    (3, 1, 2, 0), by default the one of src's rank. Hardware DGE (NC-v3) needs src.shape[0] == 16,
    src.shape[-1] % 128 == 0 and a 2-byte dtype. Raises NKICompileError."""
    _operand(dst, "dst", "dma_transpose")
    _operand(src, "src", "dma_transpose")
    _dge(dge_mode, "dma_transpose", (_DGE.unknown, _DGE.hwdge, _DGE.swdge))
    rank = len(src.shape)
    perm = tuple(int(a) for a in axes) if axes is not None else DEFAULT_AXES.get(rank)
    if perm not in DEFAULT_AXES.values() or len(perm) != rank:
        fail("err_dma_transpose_axes", f"'dma_transpose' supports axes (1, 0), (2, 1, 0) and (3, 1, 2, 0) for "
                                       f"2-/3-/4-D tiles, got {axes} for src{list(src.shape)}")
    if dge_mode == _DGE.hwdge and (src.shape[0] != 16 or src.shape[-1] % 128 or src.itemsize != 2):
        fail("err_dma_transpose_hwdge", "hardware-DGE 'dma_transpose' needs src.shape[0] == 16, "
                                        "src.shape[-1] % 128 == 0 and a 2-byte dtype")
    shape = tuple(src.shape[a] for a in perm)
    if tuple(dst.shape) != shape and not (dst.size == src.size and free_size(dst.shape) == free_size(shape)
                                         and dst.shape[0] == shape[0]):
        fail("err_dma_size_mismatch", f"'dma_transpose' of src{list(src.shape)} gives {list(shape)}, "
                                      f"but dst is {list(dst.shape)}")
    src.check_bounds(None)
    vals = read(src).transpose((0,) + tuple(a + 1 for a in perm))
    write(dst, np.ascontiguousarray(vals).reshape(vals.shape[:1] + dst.shape))
    _finish(dst)
    _trace(src, dst, dge_mode, transpose=True)

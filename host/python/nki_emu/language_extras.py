"""``nki.language`` beyond the core of ``nki_emu.language``: DMA transposes and gathers, register
loops, ordering, and the direct-allocation rule (SDK 2.28, docs/nki-facts.md §2.9).

* ``load_transpose2d(src, mask=None, dtype=None)``: HBM (F, P) -> SBUF tile (P, F), a DMA
  transpose (trn2 guide: up to 90 % of DMA throughput HBM -> SBUF [D S4]; costed as a load).
* ``gather_flattened(data, indices, axis=0, dtype=None, mask=None)``: per partition
  ``out[p, j] = data[p].flat[indices[p, j]]`` on GpSimd (SBUF only).
* ``dynamic_range(start, stop=None, step=1)``: a loop whose bounds live in a register on
  the device; the emulator runs it as a sequential loop over int bounds (registers are
  not emulated).
* ``no_reorder()``: context manager keeping program order; the emulator runs and costs
  every engine's stream in program order anyway [I].
* Direct allocation: ``nl.ndarray(..., address=(partition_offset, free_offset))`` places
  an SBUF/PSUM tensor; a kernel must not mix it with automatic allocation (SDK 2.28
  rule, ``err_mixed_allocation`` [I]).
"""
import contextlib

import numpy as np

from . import batch, runtime, trace
from .errors import fail, user_frame_object
from .index_expr import mask_array
from .operands import free_size, on_chip, result as _result
from .tensor import HBM_BUFFERS, NkiTensor, read


def load_transpose2d(src, mask=None, dtype=None):
    """HBM 2-D ``src`` (F, P) -> a new SBUF tile ``src.T`` (P <= 128), optional cast. Raises
    NKICompileError (err_unsupported_memory, err_num_partition_exceed_arch_limit)."""
    if not isinstance(src, NkiTensor) or src.buffer not in HBM_BUFFERS:
        fail("err_unsupported_memory", "Expected operand 'src' of 'load_transpose2d' to be in address space 'hbm'")
    if len(src.shape) != 2:
        fail("err_exceed_max_supported_dimension", f"'src{list(src.shape)}' of 'load_transpose2d' must be 2-D")
    src.check_bounds(None)
    vals = read(src).swapaxes(1, 2)
    out = NkiTensor.fresh(np.ascontiguousarray(vals), dtype or src.dtype, "sbuf",
                          valid=mask_array(mask, vals.shape[1:]))
    on_chip(out, "src", "load")
    trace.dma("load", src, out, out=out, transpose="hbm")
    return out


def gather_flattened(data, indices, axis=0, dtype=None, mask=None):
    """``out[p, j] = data[p].flat[indices[p, j]]`` (out has ``indices``' shape), GpSimd."""
    on_chip(data, "data", "gather_flattened")
    on_chip(indices, "indices", "gather_flattened")
    if axis != 0:
        fail("err_gather_axis", f"'gather_flattened' gathers along the flattened free axes (axis=0), got axis={axis}")
    if data.buffer == "psum" or indices.buffer == "psum":
        fail("err_unsupported_memory", "GpSimd ('gather_flattened') cannot access PSUM")
    if data.shape[0] != indices.shape[0]:
        fail("err_num_partition_mismatch", "'data' and 'indices' of 'gather_flattened' must have the same partitions")
    from .tensor import values
    src = values(data)
    src = batch.reshape(src, src.shape[0], data.shape[0], -1)
    idx = values(indices).astype(np.int64)
    idx = batch.reshape(idx, idx.shape[0], indices.shape[0], -1)
    if idx.size and (idx.min() < 0 or idx.max() >= src.shape[2]):
        fail("err_tensor_access_out_of_bound", f"an index of 'gather_flattened' is outside [0, {src.shape[2]})")
    res = np.take_along_axis(src, np.broadcast_to(idx, (src.shape[0],) + idx.shape[1:]), axis=2)
    out = _result(res.reshape((res.shape[0],) + indices.shape), dtype or data.dtype, mask=mask)
    trace.compute("nc_n_gather", "gpsimd", [data, indices], out, free_size(indices.shape))
    return out


def dynamic_range(start, stop=None, step=1):
    """A loop with device-side bounds, run as a sequential loop (int bounds only: the
    emulator has no VirtualRegister)."""
    for bound in (start, stop):
        if bound is not None and not isinstance(bound, (int, np.integer)):
            fail("err_api_not_emulated", "nl.dynamic_range bounds must be ints in the emulator "
                                         "(VirtualRegister bounds are not emulated)")
    args = (start,) if stop is None and step == 1 else (0 if stop is None else start,
                                                       start if stop is None else stop, step)
    return runtime.loop_range("sequential", args, user_frame_object())


def no_reorder():
    """``with nl.no_reorder():`` keeps program order (the emulator's order anyway)."""
    return contextlib.nullcontext()


def usable_sbuf_bytes():
    """Usable SBUF bytes per partition of the active run's target (``nl.tile_size.
    total_available_sbuf_size``): trn1 192 KiB - 16 KiB compiler reserve [D S3
    compiler/sbuf.py]; trn2 224 KiB [D S4 trn2 guide] - the same reserve [I]."""
    run = runtime.current()
    return (224 - 16) * 1024 if run is not None and run.target == "trn2" else (192 - 16) * 1024


def check_allocation(buffer, address, shape, itemsize):
    """The SDK 2.28 rule "never mix automatic and direct allocation" for an SBUF/PSUM
    tensor created with (``address`` = (partition_offset, free_offset)) or without an
    address; also checks that a direct address fits (128 partitions, the usable bytes
    per partition of nl.tile_size). Raises NKICompileError."""
    if buffer not in ("sbuf", "psum"):
        if address is not None:
            fail("err_direct_allocation_hbm", "'address' (direct allocation) applies to SBUF/PSUM tensors only")
        return
    run = runtime.current()
    mode = "direct" if address is not None else "automatic"
    if run is not None:
        if run.allocation is not None and run.allocation != mode:
            fail("err_mixed_allocation", f"this {mode} allocation follows {run.allocation} allocation in the same "
                                         f"kernel; never mix automatic and direct allocation (SDK 2.28)")
        run.allocation = mode
    if address is None:
        return
    try:
        part, offset = (int(a) for a in address)
    except (TypeError, ValueError):
        fail("err_direct_allocation_address", f"'address' must be (partition_offset, free_offset), got {address!r}")
    parts = shape[0] if shape else 1
    limit = usable_sbuf_bytes() if buffer == "sbuf" else 16 * 1024
    nbytes = free_size(shape) * itemsize
    if part < 0 or part + parts > 128 or offset < 0 or offset + nbytes > limit:
        fail("err_direct_allocation_address", f"{buffer} tensor of shape {list(shape)} at address "
                                              f"({part}, {offset}) exceeds 128 partitions x {limit} bytes")


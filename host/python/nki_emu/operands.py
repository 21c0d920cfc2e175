"""Operand checks and result helpers shared by ``nl.*`` (language), ``nisa.*`` (isa)
and assignment (assign).

The checks raise the neuronxcc refusal an instruction's operand would get
(docs/nki-facts.md §4): wrong address space, too many partitions, a tile used
outside its loop, an unaligned start partition, a PSUM tile larger than a bank.
The helpers turn tiles and scalars into NumPy values and wrap results into
fresh SBUF/PSUM tiles.
"""
import math
import os
import sys

import numpy as np

from .program import state as program_state
from . import batch, dtypes
from .errors import fail
from .index_expr import mask_array
from .tensor import HBM_BUFFERS, MAX_PARTITIONS, NkiTensor, start_partition
from .tensor import values as tensor_values

PSUM_BANK_BYTES = 2048  # per partition: 8 banks x 2 KiB (docs/nki-facts.md §3.1)
_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


# --- helpers ----------------------------------------------------------------------------
def values(x):
    """NumPy values of a tile, batched: (S,) + tile shape (rank-1 tiles as (P, 1)), or
    ``x`` itself for a scalar (static: the same for every member)."""
    if isinstance(x, NkiTensor):
        return tensor_values(x)
    return x


def free_size(shape):
    """Elements per partition of ``shape`` (product of all but the first axis; 1 for rank <= 1)."""
    return math.prod(shape[1:]) if len(shape) > 1 else 1


def dtype_of(x):
    """Dtype of a tile, or the weak dtype of a Python/NumPy scalar (dtypes.scalar_dtype)."""
    return x.dtype if isinstance(x, NkiTensor) else dtypes.scalar_dtype(x)


def is_tile(x):
    """True for an emulator tensor (tile, HBM tensor or view)."""
    return isinstance(x, NkiTensor)


def space(t):
    """Address space name of ``t`` in neuronxcc messages: "hbm", "sbuf" or "psum"."""
    return "hbm" if t.buffer in HBM_BUFFERS else t.buffer


def result(vals, dtype, buffer="sbuf", mask=None, batched=True):
    """A fresh ``buffer`` tile holding ``vals`` rounded to ``dtype``; ``mask`` (an ``nl``
    mask or None) sets the tile's valid elements. ``vals``: batched, (S,) + tile shape,
    or static (``batched=False``, or a 0-d value, which becomes a (1, 1) tile)."""
    vals = np.asarray(vals)
    if not batched or vals.ndim == 0:
        vals = batch.static(vals.reshape(1, 1) if vals.ndim == 0 else vals)
    tile = vals.shape[1:] if vals.ndim > 2 else (vals.shape[1], 1)
    return NkiTensor.fresh(vals, dtype, buffer, valid=mask_array(mask, tile))


# --- checks -----------------------------------------------------------------------------
def check_scope(x):
    """err_local_variable_used_out_of_scope: ``x`` was created inside a loop that has exited
    (docs/nki-facts.md §2.4, §4; only nl.*_range loops are visible to the emulator)."""
    scope = getattr(x.root, "scope", None)
    if scope is not None and scope.done:
        fail("err_local_variable_used_out_of_scope",
             f"Local variable '{_var_name(x)}' is referenced outside of its parent scope (loop).")


def _var_name(x):
    """Name the kernel gave ``x`` (searched in the frames outside the emulator), else the root's name."""
    frame = sys._getframe(2)
    while frame is not None:
        if os.path.abspath(frame.f_code.co_filename).startswith(_PKG_DIR):
            frame = frame.f_back
            continue
        for name, value in frame.f_locals.items():
            if value is x or program_state.unwrap(value) is x:  # traced kernels hold handles
                return name
        frame = frame.f_back
    return x.root.name


def check_start_partition(x, api):
    """Start-partition rule of compute-engine access patterns (docs/nki-facts.md §4):
    P > 64 must start at 0, 32 < P <= 64 at 0 or 64, P <= 32 at 0/32/64/96."""
    start = start_partition(x)
    if start == 0:
        return
    p = x.shape[0]
    allowed = (0,) if p > 64 else (0, 64) if p > 32 else (0, 32, 64, 96)
    if start not in allowed:
        fail("err_unsupported_start_partition",
             f"Access of {p} partitions of tensor '{x.root.name}' in '{api}' starts at partition {start}; "
             f"the start partition must be one of {list(allowed)}.")


def check_psum_tile(x, api, param):
    """A PSUM tile must fit one 2 KiB bank per partition (docs/nki-facts.md §4)."""
    if x.buffer == "psum":
        nbytes = free_size(x.shape) * x.itemsize
        if nbytes > PSUM_BANK_BYTES:
            fail("err_psum_tile_exceed_bank_size",
                 f"PSUM tile '{param}[{', '.join(map(str, x.shape))}]' of '{api}' uses {nbytes} bytes per "
                 f"partition, exceeding the {PSUM_BANK_BYTES}-byte PSUM bank (psum_fmax = 512 fp32).")


def on_chip(x, param, api):
    """Checks that tile ``x`` is a usable SBUF/PSUM operand ``param`` of instruction ``api``
    and returns it: address space (err_unsupported_memory), partition count, scope, start
    partition and PSUM bank size (docs/nki-facts.md §4). Scalars pass unchecked."""
    if isinstance(x, NkiTensor) and x.buffer not in HBM_BUFFERS:
        check_scope(x)
        if api not in ("load", "store"):
            check_start_partition(x, api)
            check_psum_tile(x, api, param)
    if isinstance(x, NkiTensor) and x.buffer in HBM_BUFFERS:
        fail("err_unsupported_memory",
             f"Expected operand '{param}' of '{api}' to be in address space 'psum|sbuf', "
             f"but got a tile in '{space(x)}' instead.")
    if isinstance(x, NkiTensor) and x.shape and x.shape[0] > MAX_PARTITIONS:
        fail("err_num_partition_exceed_arch_limit",
             f"number of partitions {x.shape[0]} exceed architecture limitation of {MAX_PARTITIONS}.")
    return x

"""Assignment semantics: ``dst[idx] = tile``, ``dst[idx] += tile``, ``nl.loop_reduce``.

nki-facts §2.1/2.5: assignment writes through (NumPy broadcasting of the source to
the destination; a destination smaller than the source is
``err_store_dst_shape_smaller_than_other_shape``); ``+=`` into PSUM with a
matmul result accumulates in fp32; ``loop_reduce`` combines with the
destination except on the first iteration of all its loops.
"""
import math

import numpy as np

from . import batch, ops, runtime, tensor, trace
from .errors import fail
from .operands import check_psum_tile, check_scope, space
from .tensor import NkiTensor, update_in_place, values, write

_ACCUMULATED = -1  # NkiTensor.version marker of a view updated in place by +=


class LoopReduceResult:
    """Pending ``nl.loop_reduce(x, op, loop_indices)``; applied when assigned."""

    def __init__(self, tile, op, loop_indices, valid):
        self.tile, self.op, self.loop_indices, self.valid = tile, op, list(loop_indices or []), valid

    def apply(self, dest):
        first = all(getattr(i, "first", False) for i in self.loop_indices)
        x = values(self.tile)
        x = batch.expand(x, dest.shape) if self.tile.size != dest.size else x
        if first:
            write(dest, x, self.valid)
        else:
            write(dest, ops.binary(self.op)(*batch.align(x, values(dest))), self.valid)
        trace.compute("tensor_tensor", "vector", [self.tile] + ([] if first else [dest]), dest,
                      _free(dest), in_psum=self.tile.buffer == "psum")


def _free(t):
    shape = t.shape
    return math.prod(shape[1:]) if len(shape) > 1 else 1


def _shape_str(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _check_shapes(dest, src_shape):
    dshape = dest.shape
    if math.prod(src_shape) > math.prod(dshape) or len(src_shape) > len(dshape) and \
            math.prod(src_shape) != math.prod(dshape):
        fail("err_store_dst_shape_smaller_than_other_shape",
             f"Illegal assignment destination shape in 'a = b': shape {_shape_str(dshape)} of parameter 'a' "
             f"is smaller than other parameter shapes b{_shape_str(src_shape)}.")


def assign(dest, value):
    """Implements ``dest_view = value`` for a view produced by ``tensor[key]``."""
    if isinstance(value, NkiTensor) and value.version == _ACCUMULATED and value.root is dest.root \
            and value.layout is not None and dest.layout is not None \
            and value.layout.offset == dest.layout.offset and value.layout.shape == dest.layout.shape:
        return
    run = runtime.current()
    if isinstance(value, LoopReduceResult):
        value.apply(dest)
        return
    if isinstance(value, NkiTensor):
        _check_shapes(dest, value.shape)
        if value.buffer in ("sbuf", "psum"):
            check_scope(value)
        producer_op = getattr(getattr(value, "producer", None), "op", None)
        if producer_op not in ("nc_matmul", "matmul"):
            check_psum_tile(dest, "assignment", "a")
        if value.buffer not in ("sbuf", "psum") and dest.buffer in ("sbuf", "psum"):
            fail("err_unsupported_memory",
                 f"Expected operand 'value' of 'assignment' to be in address space 'psum|sbuf', "
                 f"but got a tile in '{space(value)}' instead.")
        write(dest, values(value), value.valid)
        trace.assigned(value, dest)
    else:
        write(dest, np.asarray(value), batched=False)
        trace.compute("memset", "vector", [], dest, _free(dest))
    if run is not None and dest.layout is not None:
        run.check_output_dependency(dest.root, dest.layout)


def accumulate(dest, value, op):
    """Implements ``dest op= value`` in place (PSUM matmul accumulation or element-wise)."""
    producer_op = getattr(getattr(value, "producer", None), "op", None)
    batched = isinstance(value, NkiTensor)
    if batched:
        _check_shapes(dest, value.shape)
        vals, valid = values(value), value.valid
    else:
        vals, valid = np.asarray(value, dtype=np.float32), None
    fn = ops.binary(op)
    if valid is not None or not isinstance(fn, np.ufunc) or not update_in_place(dest, fn, vals, batched):
        current = values(dest)
        write(dest, fn(current, batch.fit(vals, current.shape, batched)), valid)
    is_matmul = producer_op in ("nc_matmul", "matmul") and dest.buffer == "psum" and fn is np.add
    trace.accumulated(dest, value if isinstance(value, NkiTensor) else None, is_matmul)
    if not dest.is_root:
        dest.version = _ACCUMULATED


tensor.bind_operators(assign=assign, accumulate=accumulate)

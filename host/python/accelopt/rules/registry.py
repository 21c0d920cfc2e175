"""The rule vocabulary: rule name -> module (documented in docs/rules.md)."""
from . import (affine_loop, copy_engine, defer_row_scale, evict_engine, merge_chunks, fuse_nests, narrow_load, block_dim, fuse_reciprocal, fuse_sigmoid, fuse_silu, hoist, hoist_invariant, hoist_nest, hoist_transpose, split_block, store_chunks, reblock,
               interchange, dedupe_load, merge_loads, merge_stores, merge_tensor_scalar, reciprocal_to_scalar, reduce_to_activation, retile, scale_to_activation,
               square_to_activation, tile_free, tunable, widen)
from .base import uniquify
from .errors import NotApplicable

_MODULES = (tunable, hoist, widen, fuse_reciprocal, fuse_sigmoid, fuse_silu, reciprocal_to_scalar,
            square_to_activation, merge_tensor_scalar, hoist_transpose, evict_engine, hoist_invariant, interchange, dedupe_load,
            scale_to_activation, retile, tile_free, defer_row_scale, reduce_to_activation, affine_loop, merge_chunks, copy_engine,
            merge_loads, hoist_nest, split_block, reblock, merge_stores, fuse_nests, narrow_load, block_dim, store_chunks)

RULES = {m.NAME: m for m in _MODULES}


def candidates(module, src):
    """The rule's candidates on ``src`` with unique sites; internal errors become NotApplicable."""
    try:
        return uniquify(list(module.candidates(src)))
    except NotApplicable:
        raise
    except Exception as exc:  # noqa: BLE001 - a rule bug must not take the caller down
        raise NotApplicable(f"{module.NAME}: internal error: {type(exc).__name__}: {exc}") from exc

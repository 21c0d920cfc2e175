"""The documented effect each rule relies on, and its predicted gain from profile metrics.

``EFFECTS[rule]`` names the hardware effect (engine time, DMA count or bytes,
overlap) with its source in docs/nki-facts.md; it is shown in every plan
(``effect``). ``GAINS[rule]`` is the rule author's estimate of the fraction of
the relieved resource's busy time the move removes. With profile metrics,
``predicted_gain`` (a fraction of the latency, 0..1) is

    gain x max over relieved resources r of  w_r x busy_r x min(1, busy_r / busy_max)

where busy_r is the resource's active fraction (``*_active_time_percent``),
busy_max that of the busiest one (the bottleneck), and w_r the plan's weight
on r: a move pays in full only on the bottleneck, and on another engine only
as far as that engine is nearly as busy. "instructions" counts as half the
bottleneck's busy fraction (every instruction has a fixed cost on some
engine, nki-facts §3.2).
"""

EFFECTS = {
    "tunable": "tile size: larger tiles mean fewer, larger instructions and DMAs (fixed costs per instruction and "
               "DMA, nki-facts §3.2, §3.4); smaller ones more, shorter instructions and more iterations to overlap "
               "(nki-facts §3.6)",
    "retile": "tile size: larger tiles mean fewer, larger instructions and DMAs (fixed costs per instruction and "
              "DMA, nki-facts §3.2, §3.4); smaller ones more, shorter instructions and more iterations to overlap "
              "(nki-facts §3.6)",
    "hoist_load": "DMA count and HBM bytes: one load instead of one per iteration (nki-facts §3.4)",
    "dedupe_load": "DMA count and HBM bytes: the same data is loaded once (nki-facts §3.4)",
    "hoist_invariant": "engine instructions and DMAs: loop-invariant work runs once (nki-facts §3.2, §3.4)",
    "interchange": "DMA count and HBM bytes: loads of the new outer loop's data are reused across the inner loop "
                   "(nki-facts §2.4, §3.4)",
    "widen_loop": "instruction and DMA count: wider free-dimension tiles (nki-facts §3.2, §3.4)",
    "fuse_reciprocal": "VectorE time: the reciprocal instruction disappears (nki-facts §3.3)",
    "fuse_sigmoid": "VectorE/ScalarE time: one activation replaces a 3-4 instruction chain (nki-facts §3.2, §3.3)",
    "fuse_silu": "VectorE/ScalarE time: one activation replaces a 4-5 instruction chain (nki-facts §3.2, §3.3)",
    "reciprocal_to_scalar": "engine balance: reciprocal moves from VectorE (2N-8N cycles) to ScalarE (N) (nki-facts §3.3)",
    "square_to_activation": "engine balance: a VectorE tensor_tensor (2N) becomes a ScalarE activation (N) (nki-facts §3.3)",
    "merge_tensor_scalar": "instruction count: a two-op tensor_scalar costs one instruction (nki-facts §3.3)",
    "scale_to_activation": "engine balance: the multiply moves to ScalarE's scale= (free in an activation, "
                           "nki-facts §3.2)",
    "hoist_transpose": "TensorE time and PSUM copies: nl.matmul's operand transposes run once per tile instead of "
                       "once per output block (nki-facts §3.5)",
    "tile_free": "SBUF working set: chunked tiles fit, no spill stores and reloads (nki-facts §3.4, §5.2)",
    "defer_row_scale": "VectorE time and overlap: the per-row scale rides on the PSUM eviction that copies the tile "
                       "anyway, so the row tiles' VectorE pass and SBUF tensor go and the in-order TensorE stream's "
                       "transposes stop waiting for the row statistics (nki-facts §3.2, §3.3, §3.6)",
    "reduce_to_activation": "VectorE time and dependency chain: the row sum rides on the ScalarE activation "
                            "(activation_reduce, +MIN_II), the VectorE tensor_reduce pass goes (nki-facts §2.6, §3.3)",
    "affine_loop": "overlap: independent iterations may be pipelined, the next tile's DMA runs under this tile's "
                   "compute with several buffers per tile (nki-facts §2.4, §3.6)",
    "merge_chunks": "instruction count: one elementwise instruction over the whole free width instead of one per "
                    "chunk, the fixed cost per instruction is paid once (nki-facts §3.2, §3.3)",
    "copy_engine": "engine balance: an SBUF copy (max(MIN_II, N) on either engine) leaves the busier engine's "
                   "in-order stream (nki-facts §3.2, §3.3)",
    "evict_engine": "overlap: PSUM evictions leave the in-order stream of the engine that runs the next tile's "
                    "elementwise chain (nki-facts §3.2)",
    "merge_loads": "DMA count: one trigger, completion semaphore and start latency instead of one per small "
                   "(latency-bound) block load (nki-facts §3.1, §3.4)",
    "merge_stores": "DMA count and spread: one store over both partition ranges, one trigger and semaphore, "
                    "ceil(P/8) DMA engines for the whole tile (nki-facts §3.1, §3.4)",
    "hoist_nest": "DMA count, TensorE and PSUM-copy time: work that does not depend on the outer loop runs once "
                  "instead of once per iteration (nki-facts §3.3, §3.4)",
    "fuse_nests": "SBUF working set: the reduced intermediate lives one row block at a time, its spill saves and "
                  "reloads to HBM go (nki-facts §2.4, §3.4, §5.2)",
    "narrow_load": "SBUF working set: only the column slice the current iterations read is live, so it stays "
                   "resident instead of being evicted and re-read per use (nki-facts §3.4)",
    "block_dim": "SBUF working set: block dimensions are tiles allocated only while live, so a slice used alone "
                 "stops keeping its neighbours resident (nki-facts §2.1, §3.4)",
    "split_block": "SBUF working set: the panel reused across the other dimension fits (no re-issued loads) or fits "
                   "twice (the next panel loads under this one's matmuls) (nki-facts §3.1, §3.4, §3.6, §5.2)",
    "reblock": "HBM bytes: the operand the inner loop loads for every outer block is read f times "
               "less often, the wider block still fitting SBUF beside its panel (nki-facts §3.1, §3.4, §5.2)",
    "store_chunks": "overlap: each chunk of a staged block is stored as soon as it is written, so the stores run "
                    "under the later chunks' compute and the tail after the last chunk is one chunk's store "
                    "(nki-facts §3.2, §3.4)",
}

# The effect of one tile-size move, by its direction (tunable, retile).
TILE_LARGER = "tile size: fewer, larger instructions and DMAs (fixed costs per instruction and DMA, nki-facts §3.2, §3.4)"
TILE_SMALLER = ("tile size: more, smaller instructions and DMAs, each paying its fixed cost (nki-facts §3.2, §3.4); "
                "shorter tiles let the next tile's DMA overlap this tile's compute sooner and need less SBUF "
                "(nki-facts §3.6, §5.2)")

GAINS = {
    "tunable": 0.15, "retile": 0.15, "hoist_load": 0.3, "dedupe_load": 0.2, "hoist_invariant": 0.2,
    "interchange": 0.5, "widen_loop": 0.15, "fuse_reciprocal": 0.3, "fuse_sigmoid": 0.5, "fuse_silu": 0.8,
    "reciprocal_to_scalar": 0.25, "square_to_activation": 0.2, "merge_tensor_scalar": 0.15,
    "scale_to_activation": 0.15, "hoist_transpose": 0.3, "evict_engine": 0.2, "tile_free": 0.4, "defer_row_scale": 0.2, "reduce_to_activation": 0.2, "affine_loop": 0.3, "merge_chunks": 0.1, "copy_engine": 0.1,
    "merge_loads": 0.08, "merge_stores": 0.05, "hoist_nest": 0.2, "split_block": 0.3, "reblock": 0.3, "fuse_nests": 0.5, "narrow_load": 0.3, "block_dim": 0.2,
    "store_chunks": 0.03,
}


def predicted_gain(rule, relieves, busy):
    """Predicted latency fraction saved (0..1, rounded to 3 digits), or None without metrics.

    ``relieves``: {resource: weight}; ``busy``: {resource: active fraction 0..1} (api._busy).
    """
    if not busy:
        return None
    top = max(busy.values())
    if top <= 0:
        return 0.0
    best = 0.0
    for res, w in relieves.items():
        b = 0.5 * top if res == "instructions" else busy.get(res, 0.0)
        best = max(best, w * b * min(1.0, b / top))
    return round(min(0.9, GAINS.get(rule, 0.1) * best), 3)

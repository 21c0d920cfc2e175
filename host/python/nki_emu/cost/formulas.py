"""Per-instruction estimated cost in engine cycles.

Formulas are the "Estimated instruction cost" lines of the SDK 2.21-2.26
``nki.isa`` docstrings (spec table 3.3); ``N`` is elements per partition of
the (main) input, ``MIN_II`` = 64 cycles. Deviations from the documented text
are calibration knobs of ``targets.Target`` (reciprocal, tensor_tensor, tensor_tensor
with a PSUM operand, VectorE tensor_reduce).
"""
import math

# info keys the formulas read (the tracer keeps only these in its records)
# trn2 VectorE performance mode (S4 trn2 guide, nki-facts §3.3): tensor_copy/tensor_scalar 4x with
# all tiles 16-bit in SBUF, 2x with one in PSUM; tensor_tensor 2x with all 16-bit in SBUF
PERF_MODE_OPS = ("tensor_copy", "tensor_scalar", "tensor_tensor")

INFO_KEYS = ("n_stationary", "fp32", "onezero", "transpose", "partitions", "in_psum", "value", "elem_per_idx",
             "itemsize", "double_row")


def cycles(op, n, info, engine, target):
    """Estimated cycles of one instruction on ``engine`` (nki-facts §3.3).

    ``op``: ISA name; ``n``: elements per partition; ``info``: dict with
    ``n_stationary`` and ``fp32``/``onezero``/``transpose`` (matmul),
    ``partitions`` (transpose), ``in_psum`` (tensor_tensor), ``value``
    (memset); ``target``: targets.Target (MIN_II and calibration factors).
    Returns a float number of cycles of ``engine``.
    """
    mii = target.min_ii
    n = max(int(n), 1)
    mode = info.get("dt16") if target.vector_perf_mode and engine == "vector" else None
    if mode:  # trn2 VectorE performance mode [D S4 trn2 guide]; contiguity not checked [I]
        if op in ("tensor_copy", "tensor_scalar"):
            return max(mii, n / (4 if mode == "sbuf" else 2))
        if op == "tensor_tensor" and mode == "sbuf":
            return max(mii, n)  # 2x of the 2N two-input rate
    if op == "nc_matmul":
        base = max(min(64, info.get("n_stationary", 128)), n)
        if info.get("fp32", True):
            base *= target.onezero_factor if info.get("onezero") else target.fp32_matmul_factor
        if info.get("transpose"):
            base /= target.transpose_speedup
        if info.get("double_row"):
            base /= 2  # FP8 double-row mode: 2x matmul throughput [D S9 nc_matmul]
        return base
    if op == "nc_transpose":
        p = info.get("partitions", 128)
        if engine == "vector":
            return max(mii, n)
        base = max(p, min(64, n)) * (target.onezero_factor if info.get("fp32", True) else 1)
        return base / target.transpose_speedup
    if op == "activation_reduce":
        return max(mii, n) + mii
    if op in ("tensor_tensor",):
        if info.get("in_psum"):
            return max(mii, math.ceil(target.tensor_tensor_psum_factor * n))
        return max(mii, math.ceil(target.tensor_tensor_factor * n))
    if op == "tensor_tensor_scan":
        return max(mii, 2 * n)
    if op == "tensor_reduce" and engine == "vector":
        return max(mii, math.ceil(target.tensor_reduce_factor * n))
    if op == "reciprocal":
        return max(mii, math.ceil(target.reciprocal_factor * n))
    if op in ("iota", "affine_select"):
        return 150 + n
    if op == "tensor_copy_dynamic":
        return max(600, n)
    # SDK 2.28 additions (nki-facts §3.3; nki_emu.isa_special)
    if op == "tensor_scalar_reduce":
        return max(mii, n) + mii  # [D S3 tensor_scalar_reduce]
    if op == "scalar_tensor_tensor":
        return 2 * n  # [D S3: N only for bf16 subtract/multiply, else 2N]
    if op == "bn_aggr":
        return max(mii, 13 * n / 3)  # [D S3 bn_aggr]
    if op in ("max8", "nc_find_index8"):
        return n  # [D S3]
    if op == "tensor_copy_predicated":
        return max(mii, n) if info.get("in_psum") else max(mii, 2 * n)  # [D S3]
    if op in ("tensor_partition_reduce", "nc_n_gather", "sequence_bounds", "nonzero_with_count"):
        return 150 + n  # GpSimd start (as iota) + one element per cycle [I]
    if op == "local_gather":
        # 150 + (num_valid_indices * k) / C, C = ((28 + t*k) / (t*k)) / min(4 / dtype_size, k), t = 4 [D S3]
        k, t = info.get("elem_per_idx", 1), 4
        c = ((28 + t * k) / (t * k)) / min(4 / info.get("itemsize", 4), k)
        return 150 + n / c
    # activation, tensor_scalar, tensor_reduce, tensor_copy, memset, bn_stats, dropout, range_select,
    # select_reduce, nc_stream_shuffle, nc_match_replace8 [D S3]; tensor_scalar_cumulative [I]: max(MIN_II, N)
    return max(mii, n)

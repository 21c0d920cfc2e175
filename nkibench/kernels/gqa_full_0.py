"""NKIBench baseline: non-causal grouped-query attention.

q: (B, N, QH, D); k, v: (B, N, KH, D); float32; query head h uses key/value
head h // (QH // KH). Returns softmax(q k^T / sqrt(D)) v as (B, QH, N, D).

For each (batch, kv head): transpose all its keys into k_t (D, N) on the
Tensor Engine. Then for each query head of the group and each block of 128
queries: the full (128, N) score row block (TILE_N keys per matmul), the row
max, exp(scale * (s - max)) on the Scalar Engine with the row sum, then
P @ V accumulated over 128-key blocks (each probability block transposed on
the Tensor Engine), and the division by the row sum at the end.
v is re-read (and every probability block transposed) for every query block.
Requires D <= 128, N % 128 == 0, N % TILE_N == 0, QH % KH == 0.
"""
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128
# accelopt: tunable TILE_N = 512 choices=[128,256,512]
TILE_N = 512


@nki.jit
def kernel(q, k, v):
    """q: (B, N, QH, D), k/v: (B, N, KH, D), float32 in HBM. Returns (B, QH, N, D) float32 in HBM."""
    B, N, QH, D = q.shape
    KH = k.shape[2]
    assert k.shape == (B, N, KH, D) and v.shape == (B, N, KH, D)
    assert D <= P and N % P == 0 and N % TILE_N == 0 and QH % KH == 0
    group = QH // KH
    scale = 1.0 / float(np.sqrt(D))
    out = nl.ndarray((B, QH, N, D), dtype=q.dtype, buffer=nl.shared_hbm)

    for b in nl.affine_range(B):
        for kv in nl.affine_range(KH):
            # k_t[:, n] = k[b, n, kv, :]: keys transposed, D on the partitions
            k_t = nl.ndarray((D, N), dtype=nl.float32, buffer=nl.sbuf)
            for t in nl.affine_range(N // P):
                k_rows = nl.load(k[b, t * P:(t + 1) * P, kv, 0:D])
                k_t[:, t * P:(t + 1) * P] = nl.copy(nisa.nc_transpose(k_rows), dtype=nl.float32)

            for r in nl.affine_range(group):
                h = kv * group + r
                for i in nl.affine_range(N // P):
                    q_rows = nl.load(q[b, i * P:(i + 1) * P, h, 0:D])
                    q_t = nl.copy(nisa.nc_transpose(q_rows), dtype=nl.float32)

                    scores = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.sbuf)
                    for j in nl.affine_range(N // TILE_N):
                        s_psum = nisa.nc_matmul(q_t, k_t[:, j * TILE_N:(j + 1) * TILE_N])
                        scores[:, j * TILE_N:(j + 1) * TILE_N] = nl.copy(s_psum, dtype=nl.float32)

                    row_max = nisa.tensor_reduce(nl.max, scores, axis=[1], keepdims=True)
                    neg_max = nl.multiply(row_max, -scale)
                    probs = nisa.activation(op=nl.exp, data=scores, scale=scale, bias=neg_max)
                    row_sum = nl.sum(probs, axis=[1], keepdims=True)

                    acc = nl.zeros((P, D), dtype=nl.float32, buffer=nl.psum)
                    for t in nl.affine_range(N // P):
                        p_t = nl.copy(nisa.nc_transpose(probs[:, t * P:(t + 1) * P]), dtype=nl.float32)
                        v_rows = nl.load(v[b, t * P:(t + 1) * P, kv, 0:D])
                        acc += nisa.nc_matmul(p_t, v_rows)

                    inv_sum = nisa.reciprocal(row_sum)
                    res = nisa.tensor_scalar(data=acc, op0=nl.multiply, operand0=inv_sum)
                    nl.store(out[b, h, i * P:(i + 1) * P, 0:D], value=res)
    return out

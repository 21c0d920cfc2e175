"""NKIBench baseline: out[b] = lhs[b] @ rhs[b], lhs (B, M, K), rhs (B, K, N), float32.

For each batch and block of 128 rows of lhs[b]: transpose the (128, K)
rows on the Tensor Engine (K <= 128 per piece), then one accumulation group
of K / 128 matmuls per TILE_N-wide output block. rhs[b] is re-read for every
row block.
Requires M % 128 == 0, N % TILE_N == 0 and K <= 128 or K % 128 == 0.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128
# accelopt: tunable TILE_N = 512 choices=[128,256,512]
TILE_N = 512


@nki.jit
def kernel(lhs, rhs):
    """lhs: (B, M, K), rhs: (B, K, N), float32 in HBM. Returns lhs @ rhs: (B, M, N) float32 in HBM."""
    B, M, K = lhs.shape
    B2, K2, N = rhs.shape
    assert B == B2 and K == K2 and M % P == 0 and N % TILE_N == 0
    TK = K if K <= P else P
    assert K % TK == 0
    out = nl.ndarray((B, M, N), dtype=lhs.dtype, buffer=nl.shared_hbm)

    for b in nl.affine_range(B):
        for i in nl.affine_range(M // P):
            lhs_rows = nl.load(lhs[b, i * P:(i + 1) * P, 0:K])
            # lhs_t[:, k*P:(k+1)*P] = (lhs rows, columns k*TK..)^T: (TK, 128)
            lhs_t = nl.ndarray((TK, (K // TK) * P), dtype=lhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // TK):
                t_psum = nisa.nc_transpose(lhs_rows[:, k * TK:(k + 1) * TK])
                lhs_t[:, k * P:(k + 1) * P] = nl.copy(t_psum, dtype=lhs.dtype)

            for j in nl.affine_range(N // TILE_N):
                acc = nl.zeros((P, TILE_N), dtype=nl.float32, buffer=nl.psum)
                for k in nl.affine_range(K // TK):
                    rhs_tile = nl.load(rhs[b, k * TK:(k + 1) * TK, j * TILE_N:(j + 1) * TILE_N])
                    acc += nisa.nc_matmul(lhs_t[:, k * P:(k + 1) * P], rhs_tile)
                res = nl.copy(acc, dtype=out.dtype)
                nl.store(out[b, i * P:(i + 1) * P, j * TILE_N:(j + 1) * TILE_N], value=res)
    return out

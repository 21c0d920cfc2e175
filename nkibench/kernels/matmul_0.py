"""NKIBench baseline: out = lhs @ rhs, lhs (M, K), rhs (K, N), float32.

For each block of 128 rows of lhs: load it, transpose its 128 x 128 pieces on
the Tensor Engine (the stationary operand needs K on the partitions), then
for each TILE_N-wide column block of the output accumulate K / 128 matmuls
in PSUM, streaming rhs tiles from HBM. rhs is re-read for every row block.
Requires M % 128 == 0, K % 128 == 0 and N % TILE_N == 0.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128
# accelopt: tunable TILE_N = 512 choices=[128,256,512]
TILE_N = 512


@nki.jit
def kernel(lhs, rhs):
    """lhs: (M, K), rhs: (K, N), float32 in HBM. Returns lhs @ rhs: (M, N) float32 in HBM."""
    M, K = lhs.shape
    K2, N = rhs.shape
    assert K == K2 and M % P == 0 and K % P == 0 and N % TILE_N == 0
    out = nl.ndarray((M, N), dtype=lhs.dtype, buffer=nl.shared_hbm)

    for i in nl.affine_range(M // P):
        lhs_rows = nl.load(lhs[i * P:(i + 1) * P, 0:K])
        # lhs_t[:, k*128:(k+1)*128] = (lhs block k)^T: K on the partition axis
        lhs_t = nl.ndarray((P, K), dtype=lhs.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // P):
            t_psum = nisa.nc_transpose(lhs_rows[:, k * P:(k + 1) * P])
            lhs_t[:, k * P:(k + 1) * P] = nl.copy(t_psum, dtype=lhs.dtype)

        for j in nl.affine_range(N // TILE_N):
            acc = nl.zeros((P, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // P):
                rhs_tile = nl.load(rhs[k * P:(k + 1) * P, j * TILE_N:(j + 1) * TILE_N])
                acc += nisa.nc_matmul(lhs_t[:, k * P:(k + 1) * P], rhs_tile)
            res = nl.copy(acc, dtype=out.dtype)
            nl.store(out[i * P:(i + 1) * P, j * TILE_N:(j + 1) * TILE_N], value=res)
    return out

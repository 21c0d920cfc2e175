"""NKIBench baseline: out = lhs_t^T @ rhs, lhs_t (K, M), rhs (K, N), float32.

lhs_t already has K on the partition axis, so its (128, 128) tiles are the
stationary operand as loaded. For each block of 128 output rows: load the
K / 128 lhs_t tiles once, then for each TILE_N-wide column block accumulate
K / 128 matmuls in PSUM. The last column block may be narrower (N need not
be a multiple of TILE_N). rhs is re-read for every row block.
Requires M % 128 == 0 and K % 128 == 0.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128
# accelopt: tunable TILE_N = 512 choices=[128,256,512]
TILE_N = 512


def _column_block(lhs_blk, rhs, out, i, n0, width, K):
    """Computes out[i*128:(i+1)*128, n0:n0+width] from the loaded lhs block."""
    acc = nl.zeros((P, width), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // P):
        rhs_tile = nl.load(rhs[k * P:(k + 1) * P, n0:n0 + width])
        acc += nisa.nc_matmul(lhs_blk[:, k * P:(k + 1) * P], rhs_tile)
    res = nl.copy(acc, dtype=out.dtype)
    nl.store(out[i * P:(i + 1) * P, n0:n0 + width], value=res)


@nki.jit
def kernel(lhs_t, rhs):
    """lhs_t: (K, M), rhs: (K, N), float32 in HBM. Returns lhs_t.T @ rhs: (M, N) float32 in HBM."""
    K, M = lhs_t.shape
    K2, N = rhs.shape
    assert K == K2 and M % P == 0 and K % P == 0
    out = nl.ndarray((M, N), dtype=lhs_t.dtype, buffer=nl.shared_hbm)
    full_blocks = N // TILE_N
    tail = N - full_blocks * TILE_N

    for i in nl.affine_range(M // P):
        lhs_blk = nl.ndarray((P, K), dtype=lhs_t.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // P):
            lhs_blk[:, k * P:(k + 1) * P] = nl.load(lhs_t[k * P:(k + 1) * P, i * P:(i + 1) * P])
        for j in nl.affine_range(full_blocks):
            _column_block(lhs_blk, rhs, out, i, j * TILE_N, TILE_N, K)
        if tail > 0:
            _column_block(lhs_blk, rhs, out, i, full_blocks * TILE_N, tail, K)
    return out

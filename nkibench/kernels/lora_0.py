"""NKIBench baseline: out = x @ w + (x @ a) @ b.

x: (M, K); w: (K, N); a: (K, R); b: (R, N); float32; R <= 128.
For each block of 128 rows: transpose the x rows on the Tensor Engine,
compute (x a)^T (R, 128) directly as a^T-stationary matmuls over K, then for
each TILE_N-wide output block accumulate the K / 128 base matmuls and the
rank-R update into one PSUM tile. w and b are re-read for every row block.
Requires M % 128 == 0, K % 128 == 0, N % TILE_N == 0.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128
# accelopt: tunable TILE_N = 512 choices=[128,256,512]
TILE_N = 512


@nki.jit
def kernel(x, w, a, b):
    """x: (M, K), w: (K, N), a: (K, R), b: (R, N); float32 in HBM. Returns (M, N) float32 in HBM."""
    M, K = x.shape
    K2, N = w.shape
    R = a.shape[1]
    assert K == K2 and a.shape == (K, R) and b.shape == (R, N)
    assert R <= P and M % P == 0 and K % P == 0 and N % TILE_N == 0
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)

    for i in nl.affine_range(M // P):
        x_rows = nl.load(x[i * P:(i + 1) * P, 0:K])
        x_t = nl.ndarray((P, K), dtype=x.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // P):
            t_psum = nisa.nc_transpose(x_rows[:, k * P:(k + 1) * P])
            x_t[:, k * P:(k + 1) * P] = nl.copy(t_psum, dtype=x.dtype)

        # xa_t = (x rows @ a)^T: (R, 128)
        xa_psum = nl.zeros((R, P), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // P):
            a_tile = nl.load(a[k * P:(k + 1) * P, 0:R])
            xa_psum += nisa.nc_matmul(a_tile, x_t[:, k * P:(k + 1) * P])
        xa_t = nl.copy(xa_psum, dtype=x.dtype)

        for j in nl.affine_range(N // TILE_N):
            acc = nl.zeros((P, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // P):
                w_tile = nl.load(w[k * P:(k + 1) * P, j * TILE_N:(j + 1) * TILE_N])
                acc += nisa.nc_matmul(x_t[:, k * P:(k + 1) * P], w_tile)
            b_tile = nl.load(b[0:R, j * TILE_N:(j + 1) * TILE_N])
            acc += nisa.nc_matmul(xa_t, b_tile)
            res = nl.copy(acc, dtype=out.dtype)
            nl.store(out[i * P:(i + 1) * P, j * TILE_N:(j + 1) * TILE_N], value=res)
    return out

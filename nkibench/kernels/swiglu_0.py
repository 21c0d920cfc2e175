"""NKIBench baseline: out = (silu(x @ w_gate) * (x @ w_up)) @ w_down.

x: (M, K); w_up, w_gate: (K, N); w_down: (N, K); float32.
For each block of 128 rows: transpose the x rows on the Tensor Engine; for
each TILE_N-wide block of the hidden layer accumulate the gate and up
projections in two PSUM tiles, apply silu(g) = g / (1 + exp(-g)) and the
product; transpose the finished (128, N) hidden block, then accumulate the
down projection per TILE_K-wide output block. All weights are re-read for
every row block.
Requires M % 128 == 0, K % 128 == 0, N % TILE_N == 0, K % TILE_K == 0.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128
# accelopt: tunable TILE_N = 512 choices=[128,256,512]
TILE_N = 512
# accelopt: tunable TILE_K = 512 choices=[128,256,512]
TILE_K = 512


@nki.jit
def kernel(x, w_up, w_down, w_gate):
    """x: (M, K), w_up/w_gate: (K, N), w_down: (N, K); float32 in HBM. Returns (M, K) float32 in HBM."""
    M, K = x.shape
    N = w_up.shape[1]
    assert w_up.shape == (K, N) and w_gate.shape == (K, N) and w_down.shape == (N, K)
    assert M % P == 0 and K % P == 0 and N % P == 0 and N % TILE_N == 0 and K % TILE_K == 0
    out = nl.ndarray((M, K), dtype=x.dtype, buffer=nl.shared_hbm)

    for i in nl.affine_range(M // P):
        x_rows = nl.load(x[i * P:(i + 1) * P, 0:K])
        x_t = nl.ndarray((P, K), dtype=x.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // P):
            x_t[:, k * P:(k + 1) * P] = nl.copy(nisa.nc_transpose(x_rows[:, k * P:(k + 1) * P]),
                                                dtype=x.dtype)

        hidden = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(N // TILE_N):
            gate = nl.zeros((P, TILE_N), dtype=nl.float32, buffer=nl.psum)
            up = nl.zeros((P, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // P):
                wg_tile = nl.load(w_gate[k * P:(k + 1) * P, j * TILE_N:(j + 1) * TILE_N])
                wu_tile = nl.load(w_up[k * P:(k + 1) * P, j * TILE_N:(j + 1) * TILE_N])
                gate += nisa.nc_matmul(x_t[:, k * P:(k + 1) * P], wg_tile)
                up += nisa.nc_matmul(x_t[:, k * P:(k + 1) * P], wu_tile)
            g_sb = nl.copy(gate, dtype=nl.float32)
            neg_exp = nisa.activation(op=nl.exp, data=g_sb, scale=-1.0)
            denom = nisa.tensor_scalar(data=neg_exp, op0=nl.add, operand0=1.0)
            silu = nl.multiply(g_sb, nisa.reciprocal(denom))
            hidden[:, j * TILE_N:(j + 1) * TILE_N] = nl.multiply(silu, up)

        hidden_t = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.sbuf)
        for n in nl.affine_range(N // P):
            hidden_t[:, n * P:(n + 1) * P] = nl.copy(nisa.nc_transpose(hidden[:, n * P:(n + 1) * P]),
                                                     dtype=nl.float32)

        for kk in nl.affine_range(K // TILE_K):
            acc = nl.zeros((P, TILE_K), dtype=nl.float32, buffer=nl.psum)
            for n in nl.affine_range(N // P):
                wd_tile = nl.load(w_down[n * P:(n + 1) * P, kk * TILE_K:(kk + 1) * TILE_K])
                acc += nisa.nc_matmul(hidden_t[:, n * P:(n + 1) * P], wd_tile)
            res = nl.copy(acc, dtype=out.dtype)
            nl.store(out[i * P:(i + 1) * P, kk * TILE_K:(kk + 1) * TILE_K], value=res)
    return out

"""NKIBench baseline: silu(x) = x / (1 + exp(-x)) over an (M, N) float32 matrix.

Tiles of 128 rows x TILE_N columns: exp(-x) on the Scalar Engine, then
1 + e, a reciprocal and a multiply on the Vector Engine.
Requires M % 128 == 0 and N % TILE_N == 0.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128
# accelopt: tunable TILE_N = 512 choices=[128,256,512,1024,2048]
TILE_N = 512


@nki.jit
def kernel(x):
    """x: (M, N) float32 in HBM. Returns silu(x): (M, N) float32 in HBM."""
    M, N = x.shape
    assert M % P == 0 and N % TILE_N == 0
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)

    for i in nl.affine_range(M // P):
        for j in nl.affine_range(N // TILE_N):
            x_tile = nl.load(x[i * P:(i + 1) * P, j * TILE_N:(j + 1) * TILE_N])
            # e = exp(-x)
            e_tile = nisa.activation(op=nl.exp, data=x_tile, scale=-1.0)
            # d = 1 + e, then 1 / d
            d_tile = nisa.tensor_scalar(data=e_tile, op0=nl.add, operand0=1.0)
            r_tile = nisa.reciprocal(d_tile)
            y_tile = nl.multiply(x_tile, r_tile)
            nl.store(out[i * P:(i + 1) * P, j * TILE_N:(j + 1) * TILE_N], value=y_tile)
    return out

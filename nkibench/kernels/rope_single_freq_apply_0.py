"""NKIBench baseline: rotary embedding with one frequency per (pair, token).

x: (D, T) with T = B*H*N tokens; freqs_cos, freqs_sin: (D/2, T); float32.
Returns (D, T): rows [0, D/2) = x_lo*cos - x_hi*sin, rows [D/2, D) =
x_lo*sin + x_hi*cos. Tiles of D/2 partitions x TILE_T tokens; four multiplies
and two adds/subtracts on the Vector Engine per tile.
Requires D even, D/2 <= 128 and T % TILE_T == 0.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

# accelopt: tunable TILE_T = 512 choices=[256,512,1024,2048]
TILE_T = 512


@nki.jit
def kernel(x, freqs_cos, freqs_sin):
    """x: (D, T), freqs_cos/freqs_sin: (D/2, T); float32 in HBM. Returns (D, T) float32 in HBM."""
    D, T = x.shape
    H2 = D // 2
    assert D % 2 == 0 and H2 <= 128 and T % TILE_T == 0
    assert freqs_cos.shape == (H2, T) and freqs_sin.shape == (H2, T)
    out = nl.ndarray((D, T), dtype=x.dtype, buffer=nl.shared_hbm)

    for j in nl.affine_range(T // TILE_T):
        x_lo = nl.load(x[0:H2, j * TILE_T:(j + 1) * TILE_T])
        x_hi = nl.load(x[H2:D, j * TILE_T:(j + 1) * TILE_T])
        cos_t = nl.load(freqs_cos[0:H2, j * TILE_T:(j + 1) * TILE_T])
        sin_t = nl.load(freqs_sin[0:H2, j * TILE_T:(j + 1) * TILE_T])
        out_lo = nl.subtract(nl.multiply(x_lo, cos_t), nl.multiply(x_hi, sin_t))
        out_hi = nl.add(nl.multiply(x_lo, sin_t), nl.multiply(x_hi, cos_t))
        nl.store(out[0:H2, j * TILE_T:(j + 1) * TILE_T], value=out_lo)
        nl.store(out[H2:D, j * TILE_T:(j + 1) * TILE_T], value=out_hi)
    return out

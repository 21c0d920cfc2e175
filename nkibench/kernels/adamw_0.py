"""NKIBench baseline: one AdamW step at t = 1 with folded constants.

theta, g, m, v: (M, N) float32. Returns
  (theta - 1e-5 * theta) - 0.01 * m' / (sqrt(1000 * v') + 1e-8)
with m' = 0.9 m + 0.1 g and v' = 0.999 v + 0.001 g^2.
Tiles of 128 rows x TILE_N columns; the last row block may be shorter
(M need not be a multiple of 128). sqrt on the Scalar Engine, the rest on
the Vector Engine (reciprocal, then multiply).
Requires N % TILE_N == 0.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128
# accelopt: tunable TILE_N = 512 choices=[256,512,1024,2048]
TILE_N = 512


def _update_tile(theta, g, m, v, out, r0, rows, c0):
    """Writes the updated theta for rows [r0, r0+rows) and columns [c0, c0+TILE_N)."""
    theta_t = nl.load(theta[r0:r0 + rows, c0:c0 + TILE_N])
    g_t = nl.load(g[r0:r0 + rows, c0:c0 + TILE_N])
    m_t = nl.load(m[r0:r0 + rows, c0:c0 + TILE_N])
    v_t = nl.load(v[r0:r0 + rows, c0:c0 + TILE_N])

    m_new = nl.add(nisa.tensor_scalar(data=m_t, op0=nl.multiply, operand0=0.9),
                   nisa.tensor_scalar(data=g_t, op0=nl.multiply, operand0=0.1))
    g_sq = nl.multiply(g_t, g_t)
    v_new = nl.add(nisa.tensor_scalar(data=v_t, op0=nl.multiply, operand0=0.999),
                   nisa.tensor_scalar(data=g_sq, op0=nl.multiply, operand0=0.001))
    root = nisa.activation(op=nl.sqrt, data=v_new, scale=1000.0)
    denom = nisa.tensor_scalar(data=root, op0=nl.add, operand0=1e-8)
    step = nl.multiply(m_new, nisa.reciprocal(denom))
    decayed = nisa.tensor_scalar(data=theta_t, op0=nl.multiply, operand0=1.0 - 1e-5)
    new_theta = nl.subtract(decayed, nisa.tensor_scalar(data=step, op0=nl.multiply, operand0=0.01))
    nl.store(out[r0:r0 + rows, c0:c0 + TILE_N], value=new_theta)


@nki.jit
def kernel(theta, g, m, v):
    """theta/g/m/v: (M, N) float32 in HBM. Returns the updated theta: (M, N) float32 in HBM."""
    M, N = theta.shape
    assert g.shape == (M, N) and m.shape == (M, N) and v.shape == (M, N) and N % TILE_N == 0
    out = nl.ndarray((M, N), dtype=theta.dtype, buffer=nl.shared_hbm)
    full_blocks = M // P
    tail = M - full_blocks * P

    for i in nl.affine_range(full_blocks):
        for j in nl.affine_range(N // TILE_N):
            _update_tile(theta, g, m, v, out, i * P, P, j * TILE_N)
    if tail > 0:
        for j in nl.affine_range(N // TILE_N):
            _update_tile(theta, g, m, v, out, full_blocks * P, tail, j * TILE_N)
    return out

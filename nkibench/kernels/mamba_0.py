"""NKIBench baseline: selective scan (Mamba), summed over the state axis.

delta, u: (C, M); a: (C, S); b, c: (S, M); float32. Returns out (C, M) with
h_s[:, t] = exp(delta[:, t] * a[:, s]) * h_s[:, t-1] + delta[:, t] * b[s, t] * u[:, t]
and out = sum_s c[s, :] * h_s.

Channels go on the partitions (128 per block). For each state s the sequence
is processed in TILE_M-long chunks: exp(delta * a_s) on the Scalar Engine
(per-partition scale), the drive term, a Vector Engine tensor_tensor_scan
seeded with the previous chunk's last state, and the c-weighted accumulation.
b and c rows are loaded per (s, chunk) and broadcast to 128 partitions.
Requires C % 128 == 0 and M % TILE_M == 0.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128
# accelopt: tunable TILE_M = 512 choices=[256,512,1024,2048]
TILE_M = 512


@nki.jit
def kernel(delta, u, a, b, c):
    """delta/u: (C, M), a: (C, S), b/c: (S, M); float32 in HBM. Returns (C, M) float32 in HBM."""
    C, M = delta.shape
    S = a.shape[1]
    assert u.shape == (C, M) and a.shape == (C, S) and b.shape == (S, M) and c.shape == (S, M)
    assert C % P == 0 and M % TILE_M == 0
    out = nl.ndarray((C, M), dtype=delta.dtype, buffer=nl.shared_hbm)

    for ci in nl.affine_range(C // P):
        delta_t = nl.load(delta[ci * P:(ci + 1) * P, 0:M])
        u_t = nl.load(u[ci * P:(ci + 1) * P, 0:M])
        a_t = nl.load(a[ci * P:(ci + 1) * P, 0:S])
        delta_u = nl.multiply(delta_t, u_t)
        acc = nl.zeros((P, M), dtype=nl.float32, buffer=nl.sbuf)

        for s in nl.sequential_range(S):
            carry = nl.zeros((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            for t in nl.sequential_range(M // TILE_M):
                cols = slice(t * TILE_M, (t + 1) * TILE_M)
                decay = nisa.activation(op=nl.exp, data=delta_t[:, cols], scale=a_t[:, s:s + 1])
                b_row = nl.load(b[s:s + 1, cols])
                drive = nl.multiply(delta_u[:, cols], b_row.broadcast_to((P, TILE_M)))
                state = nisa.tensor_tensor_scan(decay, drive, initial=carry,
                                                op0=nl.multiply, op1=nl.add)
                carry[...] = nl.copy(state[:, TILE_M - 1:TILE_M])
                c_row = nl.load(c[s:s + 1, cols])
                weighted = nl.multiply(state, c_row.broadcast_to((P, TILE_M)))
                acc[:, cols] = nl.add(acc[:, cols], weighted)

        nl.store(out[ci * P:(ci + 1) * P, 0:M], value=acc)
    return out

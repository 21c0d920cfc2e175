"""Rule ``evict_engine``: pin a PSUM -> SBUF copy (eviction) to ScalarE or VectorE.

``nl.copy(p)`` / ``nisa.tensor_copy(p)`` of a PSUM tile ``p`` leave the engine
to the compiler (engine=unknown, nki-facts §3.5). Each engine runs its own
in-order instruction stream (nki-facts §3.2), so an eviction queued on the
engine that also runs the next tile's elementwise chain makes that chain wait
for the TensorE result. Pinning the evictions to the other engine lets the
two streams overlap: ``nisa.tensor_copy(p, engine=nisa.scalar_engine)`` (or
``vector_engine``). Both engines read PSUM; the copy costs max(MIN_II, N)
cycles on either (nki-facts §3.3; ScalarE runs at 1.4 GHz, VectorE at 1.12).
GpSimd cannot read PSUM (nki-facts §4.5) and is never proposed.

Preconditions: the source operand is provably in PSUM: a name (or a subscript
of a name) bound only to ``nl.zeros/ndarray(..., buffer=nl.psum)`` or to
``nl.matmul``/``nisa.nc_matmul``/``nl.transpose``/``nisa.nc_transpose``
results; the copy has no arguments besides the source, ``dtype`` and
``mask`` (both kept unless trivial: float32, None); an existing ``engine=`` other than
unknown is respected (then only the other engine is proposed).
"""
from .. import analysis as A
from .. import patterns as P
from ..base import Candidate
from ..engine_pin import copy_args, free_engines, pin_edits, psum_names
from ..walk import walk

NAME = "evict_engine"
SUMMARY = "Pin a PSUM-to-SBUF copy to ScalarE or VectorE so it stops blocking the other engine's stream."
EFFECT = ("overlap: PSUM evictions leave the in-order stream of the engine that runs the next tile's "
          "elementwise chain (nki-facts §3.2)")
GAIN = 0.2  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"vector": 0.6, "scalar": 0.6, "tensor": 0.3}  # resource -> weight (docs/rules.md)
ORDER = 10  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    """One candidate per (PSUM copy, engine it is not already pinned to)."""
    out = []
    for func in A.functions(src.tree):
        psum = psum_names(src, func)
        if not psum:
            continue
        for node in walk(func):
            args = copy_args(src, node)
            if args is None or A.root_name(args["src"]) not in psum:
                continue
            site_base = P.label(src, A.statement_of(src, node))
            for eng, attr in free_engines(src, args):
                out.append(_cand(src, node, args, eng, attr, site_base))
    return out


def _cand(src, node, args, eng, attr, site_base):
    def edits():
        return pin_edits(src, node, args, attr)

    other = "vector" if eng == "scalar" else "scalar"
    return Candidate(src, f"{site_base}@{eng}", f"evict the PSUM tile in '{site_base}' on the {eng} engine "
                     f"(off the {other} engine's in-order stream)", edits,
                     {"target": site_base, "engine": eng},
                     {other: 0.6, "tensor": 0.3}, 52.0 if eng == "scalar" else 46.0)

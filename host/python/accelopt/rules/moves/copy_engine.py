"""Rule ``copy_engine``: pin an SBUF -> SBUF copy to ScalarE or VectorE (engine balance).

``nl.copy(t)`` of an on-chip SBUF tile (a partition shift such as rope's
``nl.copy(x_sb[i_lower, i_S])``, or a plain duplicate) leaves the engine to
the compiler (engine=unknown, nki-facts §3.5). Both ScalarE and VectorE copy
at max(MIN_II, N) cycles (nki-facts §3.3), so a copy pinned to the engine that
is less busy takes work off the busier one's in-order stream (§3.2):
``nisa.tensor_copy(t, engine=nisa.scalar_engine)`` (or ``vector_engine``).
PSUM sources are ``evict_engine``'s; GpSimd is never proposed (it shares
VectorE's SBUF port on trn1, §3.1).

Preconditions: the source is a name or a subscript of a name, a provable on-chip tile (patterns.tile_names)
that is not PSUM (engine_pin.psum_names); the copy has no arguments
besides the source, ``dtype`` and ``mask`` (kept unless trivial); an
existing ``engine=`` other than unknown is respected (only the other engine
is proposed).
"""
import ast

from .. import analysis as A
from .. import patterns as P
from ..base import Candidate
from ..engine_pin import copy_args, free_engines, pin_edits, psum_names
from ..walk import walk

NAME = "copy_engine"
SUMMARY = "Pin an SBUF-to-SBUF copy to ScalarE or VectorE to balance the engines' busy time."
EFFECT = ("engine balance: an SBUF copy (max(MIN_II, N) on either engine) leaves the busier engine's "
          "in-order stream (nki-facts §3.2, §3.3)")
GAIN = 0.1  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"vector": 0.6, "scalar": 0.6}  # resource -> weight (docs/rules.md)
ORDER = 21  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    """One candidate per (SBUF copy, engine it is not already pinned to)."""
    out = []
    for func in A.functions(src.tree):
        psum = psum_names(src, func)
        tiles = P.tile_names(src, func)
        for node in walk(func):
            args = copy_args(src, node)
            if args is None:
                continue
            source = args["src"]
            if not (isinstance(source, ast.Name) or (isinstance(source, ast.Subscript)
                                                     and isinstance(source.value, ast.Name))):
                continue  # a call (a matmul's PSUM result, say) or an attribute: not provably SBUF
            root = A.root_name(source)
            if root is None or root in psum or not P.is_tile(src, source.value if isinstance(source, ast.Subscript)
                                                             else source, tiles):
                continue
            site_base = P.label(src, A.statement_of(src, node))
            for eng, attr in free_engines(src, args):
                out.append(_cand(src, node, args, eng, attr, site_base))
    return out


def _cand(src, node, args, eng, attr, site_base):
    def edits():
        return pin_edits(src, node, args, attr)

    other = "vector" if eng == "scalar" else "scalar"
    return Candidate(src, f"{site_base}@{eng}", f"run the SBUF copy in '{site_base}' on the {eng} engine "
                     f"(off the {other} engine's in-order stream)", edits,
                     {"target": site_base, "engine": eng}, {other: 0.6}, 48.0 if eng == "scalar" else 42.0)

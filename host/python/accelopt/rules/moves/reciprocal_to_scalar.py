"""Rule ``reciprocal_to_scalar``: ``nisa.reciprocal(x)`` (VectorE) -> ``nisa.activation(op=nl.reciprocal, data=x)`` (ScalarE).

nki-facts §3.3: the VectorE reciprocal costs max(MIN_II, 8N) cycles documented
(2N in the emulator's calibration) at 1.12 GHz; the same op on ScalarE
costs max(MIN_II, N) at 1.4 GHz. Preconditions: the call is
``nisa.reciprocal`` with ``data`` and optionally ``dtype``/``mask`` (both
kept, activation accepts them). Caveat (documented, nki-facts §3.3 "lower
precision"): on hardware the ScalarE table is less precise; the emulator
computes both in fp32 and the profile stage checks the tolerance.
"""
from .. import analysis as A
from .. import patterns as P
from ..base import Candidate
from ..walk import walk

NAME = "reciprocal_to_scalar"
SUMMARY = "Move nisa.reciprocal from the Vector Engine to a ScalarE activation."
EFFECT = "engine balance: reciprocal moves from VectorE (2N-8N cycles) to ScalarE (N) (nki-facts §3.3)"
GAIN = 0.25  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"vector": 1.0}  # resource -> weight (docs/rules.md)
ORDER = 6  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    """Every ``nisa.reciprocal(...)`` call with only data/dtype/mask arguments."""
    out = []
    for node in walk(src.tree):
        if src.call_name(node) != "nisa.reciprocal":
            continue
        args = A.call_args(node, "nisa.reciprocal")
        if not P.only_keys(args, {"data", "dtype", "mask"}) or "data" not in args:
            continue
        stmt = A.statement_of(src, node)
        nl = src.prefix("nl")
        extra = "".join(f", {k}={src.segment(v)}" for k, v in args.items() if k != "data")
        text = f"{src.segment(node.func)[:-len('reciprocal')]}activation(op={nl}.reciprocal, " \
               f"data={src.segment(args['data'])}{extra})"
        if not src.segment(node.func).endswith("reciprocal"):
            continue
        site = f"{P.label(src, stmt)}"
        out.append(Candidate(src, site, f"compute the reciprocal in '{site}' on ScalarE (activation) "
                             f"instead of VectorE", (lambda n=node, t=text: [src.replace_node(n, t)]),
                             {"target": site}, ("vector",), 48.0))
    return out

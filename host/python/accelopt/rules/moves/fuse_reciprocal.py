"""Rule ``fuse_reciprocal``: ``a * reciprocal(d)`` -> ``divide(a, d)`` (one instruction fewer).

Forms (``r`` inline or a temp ``r = <reciprocal>`` read only there):

* ``nl.multiply(a, r)`` / ``nl.multiply(r, a)`` / ``a * r`` -> ``nl.divide(a, d)``
* ``nisa.tensor_scalar(data=a, op0=nl.multiply, operand0=r, ...)`` ->
  ``nisa.tensor_scalar(data=a, op0=nl.divide, operand0=d, ...)`` (op1 kept, reverse0 dropped)

where the reciprocal is ``nisa.reciprocal(d)``, ``nl.reciprocal(d)`` or
``nisa.activation(op=nl.reciprocal, data=d)`` without dtype/mask/scale/bias.
Preconditions: no dtype/mask on the multiply; when ``r`` is a temp, nothing
between its definition and the multiply rebinds or writes a name ``d``
reads. Numerics: a / d instead of a * (1 / d), within an ulp in fp32.
Cost (nki-facts §3.3): drops the VectorE reciprocal (2N cycles in the emulator's
calibration, 8N documented) and leaves one VectorE tensor_tensor.
"""
import ast

from .. import analysis as A
from .. import patterns as P
from ..base import Candidate
from ..walk import walk

NAME = "fuse_reciprocal"
SUMMARY = "Fuse reciprocal(d) followed by a multiply into one divide by d."
EFFECT = "VectorE time: the reciprocal instruction disappears (nki-facts §3.3)"
GAIN = 0.3  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"vector": 1.0, "instructions": 1.0}  # resource -> weight (docs/rules.md)
ORDER = 3  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    """Every multiply whose operand is (a temp holding) a reciprocal."""
    out = []
    for func in A.functions(src.tree):
        for node in walk(func):
            if A.enclosing(src, node, (ast.FunctionDef, ast.AsyncFunctionDef)) is not func:
                continue
            cand = _at(src, func, node)
            if cand is not None:
                out.append(cand)
    return out


def _at(src, func, node):
    stmt = A.statement_of(src, node)
    if stmt is None:
        return None
    ops = P.multiply_operands(src, node)
    if ops is not None:
        for a, r in (ops, ops[::-1]):
            inl = P.Inlining(src, func, stmt)
            d = P.reciprocal_arg(src, inl.look(r))
            if d is None or not inl.safe():
                continue
            nl = src.prefix("nl")
            if isinstance(node, ast.BinOp):
                text = f"{_paren(src, a)} / {_paren(src, d)}"
            else:
                text = f"{nl}.divide({src.segment(a)}, {src.segment(d)})"
            return _cand(src, node, stmt, r, inl, text, ("vector", "instructions"), 62.0)
        return None
    if src.call_name(node) == "nisa.tensor_scalar":
        args = A.call_args(node, "nisa.tensor_scalar")
        if args is None or "mask" in args or "dtype" in args or "operand0" not in args:
            return None
        if not P.is_op(src, args.get("op0"), "multiply"):
            return None
        r = args["operand0"]
        inl = P.Inlining(src, func, stmt)
        d = P.reciprocal_arg(src, inl.look(r))
        if d is None or not inl.safe():
            return None
        nl = src.prefix("nl")
        parts = []
        for key, value in args.items():
            if key == "reverse0":
                continue
            if key == "op0":
                parts.append(f"op0={nl}.divide")
            elif key == "operand0":
                parts.append(f"operand0={src.segment(d)}")
            else:
                parts.append(f"{key}={src.segment(value)}")
        text = f"{src.segment(node.func)}({', '.join(parts)})"
        return _cand(src, node, stmt, r, inl, text, ("instructions",), 42.0)
    return None


def _paren(src, node):
    text = src.segment(node)
    return text if isinstance(node, (ast.Name, ast.Subscript, ast.Call, ast.Attribute, ast.Constant)) \
        else f"({text})"


def _cand(src, node, stmt, r, inl, text, relieves, base):
    recip = r.id if isinstance(r, ast.Name) else "inline"
    site = f"{recip}->{P.label(src, stmt)}"

    def edits():
        return [src.replace_node(node, text)] + inl.deletions()

    return Candidate(src, site, f"fuse reciprocal ({recip}) and multiply into one divide in "
                     f"'{P.label(src, stmt)}'", edits, {"reciprocal": recip, "target": P.label(src, stmt)},
                     relieves, base)

"""Rule ``hoist_transpose``: transpose an ``nl.matmul`` operand once, outside the loop that reuses it.

``nl.matmul(x, y)`` (without ``transpose_x``) is a TensorE transpose of x, a
PSUM -> SBUF copy of it and the ``nc_matmul`` (nki-facts §3.5 [D]). When the
same x slices are multiplied in every iteration of an outer loop (the output
column blocks of a GEMM), the transposes and copies are repeated per
iteration. Before (``n`` loop over output blocks, ``k`` over the contraction)::

    for n in nl.affine_range(NB):
        acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(KB):
            w_t = nl.load(w[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
            acc += nl.matmul(x_t[:, k * TK:(k + 1) * TK], w_t)

After (the transposed slices are kept in SBUF, ``transpose_x=True`` uses them
as the stationary operand directly)::

    x_t_T = nl.ndarray((TK, KB, x_t.shape[0]), dtype=x_t.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(KB):
        x_t_T_psum = nl.transpose(x_t[:, k * TK:(k + 1) * TK])
        x_t_T[:, k, :] = nl.copy(x_t_T_psum, dtype=x_t.dtype)
    for n in nl.affine_range(NB):
        ...
            acc += nl.matmul(x_t_T[:, k, :], w_t, transpose_x=True)

Preconditions: the call is ``nl.matmul(X[:, k * W:(k + 1) * W], Y)`` with two
positional arguments and nothing else; ``k`` is the variable of the innermost
enclosing ``nl.affine_range(KB)`` loop, whose body holds the call and which
sits directly in the body of an outer ``for`` loop L; X, W and KB are not
bound or written inside L (so the slices are the same in every iteration of
L); X is a provable on-chip tile; the new name is free. The transposes move
in front of L (one level per application). Cost: (trips of L - 1) x KB
TensorE transposes and PSUM copies fewer per execution of L.
"""
import ast

from .. import analysis as A
from .. import patterns as P
from ..base import Candidate
from ..source import Edit
from ..free_dim import mul_j, mul_j1
from ..walk import walk

NAME = "hoist_transpose"
SUMMARY = "Transpose an nl.matmul operand once outside the loop that reuses it (transpose_x=True)."
EFFECT = ("TensorE time and PSUM copies: nl.matmul's operand transposes run once per tile instead of once "
          "per output block (nki-facts §3.5)")
GAIN = 0.3  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"tensor": 1.0, "scalar": 0.4, "vector": 0.4, "instructions": 0.6}  # resource -> weight (docs/rules.md)
ORDER = 9  # position among the built-in rules when proposals tie (docs/rules.md)


def _slice_k(node, k):
    """W for ``k * W:(k + 1) * W`` (same forms as widen_loop), else None."""
    if not isinstance(node, ast.Slice) or node.step is not None or node.lower is None or node.upper is None:
        return None
    w0, w1 = mul_j(node.lower, k), mul_j1(node.upper, k)
    if w0 is None or w1 is None or ast.dump(w0) != ast.dump(w1):
        return None
    return w0


def candidates(src):
    """Every hoistable ``nl.matmul`` operand (see the module docstring)."""
    out = []
    for func in A.functions(src.tree):
        tiles = P.tile_names(src, func)
        used = {n.id for n in walk(func) if isinstance(n, ast.Name)}
        for node in walk(func):
            c = _at(src, func, tiles, used, node)
            if c is not None:
                out.append(c)
    return out


def _at(src, func, tiles, used, node):
    if src.call_name(node) != "nl.matmul" or len(node.args) != 2 or node.keywords:
        return None
    x = node.args[0]
    if not (isinstance(x, ast.Subscript) and isinstance(x.value, ast.Name) and isinstance(x.slice, ast.Tuple)
            and len(x.slice.elts) == 2):
        return None
    full, ks = x.slice.elts
    if not (isinstance(full, ast.Slice) and full.lower is None and full.upper is None and full.step is None):
        return None
    kloop = A.enclosing(src, node, (ast.For,))
    if kloop is None or not A.is_range_loop(src, kloop, ("nl.affine_range",)) \
            or not isinstance(kloop.target, ast.Name) or len(kloop.iter.args) != 1 or kloop.iter.keywords:
        return None
    k = kloop.target.id
    w = _slice_k(ks, k)
    if w is None:
        return None
    outer = src.parents.get(kloop)
    if not isinstance(outer, ast.For) or kloop not in outer.body or not src.owns_lines(outer):
        return None
    xname = x.value.id
    if xname not in tiles:
        return None
    bound = {n.id for n in A.name_stores(outer)}
    reads = {xname} | A.read_names(w) | A.read_names(kloop.iter)
    if reads & bound or xname in A.written_roots(src, outer):
        return None
    new = f"{xname}_T"
    if new in used or f"{new}_psum" in used:
        return None
    stmt = A.statement_of(src, node)
    nl = src.prefix("nl")
    wt = src.segment(w) if isinstance(w, (ast.Name, ast.Constant)) else f"({src.segment(w)})"
    kb = src.segment(kloop.iter.args[0])
    site = f"{xname}@{src.segment(outer.target).replace(' ', '')}"

    def edits():
        ind = src.indent_of(outer)
        step = src.indent_of(kloop)[len(src.indent_of(outer)):] or "    "
        block = (f"{ind}{new} = {nl}.ndarray(({wt}, {kb}, {xname}.shape[0]), dtype={xname}.dtype, "
                 f"buffer={nl}.sbuf)\n"
                 f"{ind}for {k} in {nl}.affine_range({kb}):\n"
                 f"{ind}{step}{new}_psum = {nl}.transpose({xname}[:, {k} * {wt}:({k} + 1) * {wt}])\n"
                 f"{ind}{step}{new}[:, {k}, :] = {nl}.copy({new}_psum, dtype={xname}.dtype)\n")
        at, _ = src.line_span(src.comment_start(outer), outer.lineno)
        call = f"{src.segment(node.func)}({new}[:, {k}, :], {src.segment(node.args[1])}, transpose_x=True)"
        return [Edit(at, at, block), src.replace_node(node, call)]

    return Candidate(src, site, f"transpose the slices of '{xname}' once before the loop over "
                     f"'{src.segment(outer.target)}' instead of in every nl.matmul in '{P.label(src, stmt)}'",
                     edits, {"tensor": xname, "loop": src.segment(outer.target)},
                     {"tensor": 1.0, "scalar": 0.4, "vector": 0.4, "instructions": 0.6}, 70.0)

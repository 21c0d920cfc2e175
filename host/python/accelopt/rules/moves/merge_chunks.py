"""Rule ``merge_chunks``: an affine loop over free-dimension chunks of elementwise instructions becomes one
wider instruction per statement (compiler style, the published silu's and swiglu's inner loops).

::

    for i2 in nl.affine_range(2):
        v5[i0, i1, ip, 512 * i2 + nl.arange(512)[None, :]] = nisa.activation(op=nl.silu,
            data=v4[i0, i1, ip, 512 * i2 + nl.arange(512)[None, :]])
 ->
    v5[i0, i1, ip, nl.arange(1024)[None, :]] = nisa.activation(op=nl.silu, data=v4[i0, i1, ip, nl.arange(1024)[None, :]])

Block temps the loop writes per chunk (``v6[i0, i1, i2, ip, nl.arange(512)[None, :]]``, allocated
``(32, 7, 2, nl.par_dim(128), 512)``) lose the chunk dimension and get the wide free size
(``(32, 7, nl.par_dim(128), 1024)``). Effect: one instruction instead of n per statement, so the
fixed cost per instruction (MIN_II and dispatch, nki-facts §3.2, §3.3) is paid once; the
elementwise engines have no 512 free-size limit (that is PSUM's and the matmul's, nki-facts §2.5).

Preconditions: ``for v in nl.affine_range(n)`` with a literal ``n``; a straight-line body of
subscript assignments ``T[...] = <call>`` to SBUF tensors (plus the compiler's ``' end loop '``
strings), every call an elementwise NKI API (``nisa.activation`` without reduction,
``tensor_scalar``, ``tensor_tensor``, ``reciprocal``, ``tensor_copy``, ``nl`` arithmetic and
``nl.copy``) reading no PSUM tensor; every mention of ``v`` is either a free index
``C * v + nl.arange(C)[None, :]`` (one chunk width ``C`` for the loop) or a bare block index of a
block temp whose free index is ``nl.arange(C)[None, :]``, allocated once with that block dimension
of size ``n`` and mentioned nowhere outside the loop; no other subscript in the body has the free
index ``nl.arange(C)[None, :]``.
"""
import ast
import copy

from .. import analysis as A
from .. import blocks
from ..base import Candidate
from ..source import Edit
from ..walk import walk

NAME = "merge_chunks"
SUMMARY = "Merge an affine loop over free-dimension chunks of elementwise instructions into wider instructions."
EFFECT = ("instruction count: one elementwise instruction over the whole free width instead of one per "
          "chunk, the fixed cost per instruction is paid once (nki-facts §3.2, §3.3)")
GAIN = 0.1  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"instructions": 1.0, "vector": 0.3, "scalar": 0.3}  # resource -> weight (docs/rules.md)
ORDER = 20  # position among the built-in rules when proposals tie (docs/rules.md)

_ELEMENTWISE = {"nisa.activation", "nisa.tensor_scalar", "nisa.tensor_tensor", "nisa.reciprocal",
                "nisa.tensor_copy", "nl.copy", "nl.add", "nl.subtract", "nl.multiply", "nl.divide", "nl.maximum",
                "nl.minimum", "nl.exp", "nl.negative", "nl.square", "nl.sigmoid", "nl.tanh"}


def candidates(src):
    """One candidate per qualifying chunk loop."""
    out = []
    for func in A.functions(src.tree):
        allocs = {}
        for n in walk(func):
            if blocks.on_chip_alloc(src, n):
                allocs.setdefault(n.targets[0].id, []).append(n)
        for loop in walk(func):
            if isinstance(loop, ast.For):
                c = _site(src, func, allocs, loop)
                if c is not None:
                    out.append(c)
    return out


def _arange_free(src, node):
    """C if ``node`` is ``nl.arange(C)[None, :]``, else None."""
    if isinstance(node, ast.Subscript) and src.call_name(node.value) == "nl.arange" and len(node.value.args) == 1 \
            and isinstance(node.value.args[0], ast.Constant) and isinstance(node.value.args[0].value, int) \
            and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2 \
            and isinstance(node.slice.elts[0], ast.Constant) and node.slice.elts[0].value is None \
            and isinstance(node.slice.elts[1], ast.Slice):
        return node.value.args[0].value
    return None


def _chunk_free(src, node, var):
    """C if ``node`` is ``C * var + nl.arange(C)[None, :]`` (either order of the sum), else None."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return None
    for a, b in ((node.left, node.right), (node.right, node.left)):
        c = _arange_free(src, b)
        if c is not None and isinstance(a, ast.BinOp) and isinstance(a.op, ast.Mult):
            for k, v in ((a.left, a.right), (a.right, a.left)):
                if isinstance(k, ast.Constant) and k.value == c and isinstance(v, ast.Name) and v.id == var:
                    return c
    return None


def _alloc_psum(src, allocs, name):
    for a in allocs.get(name, []):
        if any(k.arg == "buffer" and src.qualname(k.value) == "nl.psum" for k in a.value.keywords):
            return True
    return False


def _site(src, func, allocs, loop):
    if loop.orelse or not isinstance(loop.target, ast.Name) or src.call_name(loop.iter) != "nl.affine_range" \
            or len(loop.iter.args) != 1 or loop.iter.keywords or not isinstance(loop.iter.args[0], ast.Constant) \
            or not isinstance(loop.iter.args[0].value, int) or loop.iter.args[0].value < 2:
        return None
    var, n = loop.target.id, loop.iter.args[0].value
    stmts = []
    for s in loop.body:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            continue
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Subscript)
                and isinstance(s.targets[0].value, ast.Name) and src.call_name(s.value) in _ELEMENTWISE):
            return None
        call = s.value
        if any(k.arg in ("reduce_op", "reduce_res", "reduce_cmd") for k in call.keywords):
            return None
        stmts.append(s)
    if not stmts:
        return None
    width, temps = None, {}  # temps: name -> block position of var
    for s in stmts:
        for sub in (n for n in walk(s) if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
                    and isinstance(n.slice, ast.Tuple)):
            name = sub.value.id
            if _alloc_psum(src, allocs, name):
                return None
            elts = sub.slice.elts
            free = elts[-1]
            c = _chunk_free(src, free, var)
            positions = [k for k, e in enumerate(elts[:-1]) if any(isinstance(x, ast.Name) and x.id == var
                                                                   for x in walk(e))]
            if c is not None and not positions:
                pass
            elif c is None and _arange_free(src, free) is not None and len(positions) == 1 \
                    and isinstance(elts[positions[0]], ast.Name):
                c = _arange_free(src, free)
                if temps.setdefault(name, positions[0]) != positions[0]:
                    return None
            elif any(isinstance(x, ast.Name) and x.id == var for x in walk(sub.slice)) \
                    or _arange_free(src, free) is not None:
                return None
            else:
                continue
            if width is None:
                width = c
            elif width != c:
                return None
    if width is None:
        return None
    # no other mention of var (e.g. in a scalar operand)
    for s in stmts:
        for x in walk(s):
            if isinstance(x, ast.Name) and x.id == var:
                p = src.parents.get(x)
                ok = False
                while p is not None and p is not s:
                    if isinstance(p, ast.Subscript) and isinstance(p.slice, ast.Tuple):
                        ok = True
                        break
                    p = src.parents.get(p)
                if not ok:
                    return None
    alloc_edits = []
    for name, pos in temps.items():
        if len(allocs.get(name, [])) != 1:
            return None
        alloc = allocs[name][0]
        mentions = [x for x in walk(func) if isinstance(x, ast.Name) and x.id == name]
        if any(A.statement_of(src, x) is not alloc and not _inside(src, x, loop) for x in mentions):
            return None
        shape = alloc.value.args[0] if alloc.value.args else None
        if not (isinstance(shape, ast.Tuple) and len(shape.elts) > pos + 1
                and isinstance(shape.elts[pos], ast.Constant) and shape.elts[pos].value == n
                and isinstance(shape.elts[-1], ast.Constant) and shape.elts[-1].value == width):
            return None
        alloc_edits.append((shape, pos))

    def edits():
        out = []
        for shape, pos in alloc_edits:
            elts = [src.segment(e) for k, e in enumerate(shape.elts) if k != pos]
            elts[-1] = str(width * n)
            out.append(src.replace_node(shape, "(" + ", ".join(elts) + ("," if len(elts) == 1 else "") + ")"))
        indent = src.indent_of(loop)
        lines = []
        for s in stmts:
            lines.append(indent + ast.unparse(_Widen(src, var, width, n, temps).visit(copy.deepcopy(s))) + "\n")
        lo, hi = src.line_span(loop.lineno, loop.end_lineno)
        out.append(Edit(lo, hi, "".join(lines)))
        return out

    return Candidate(src, f"{var}*{n}", f"merge the {n} chunks of {width} of the loop over '{var}' into "
                     f"instructions over {width * n} elements", edits, {"loop": var, "chunks": n, "width": width},
                     {"instructions": 1.0, "vector": 0.3, "scalar": 0.3}, 50.0)


def _inside(src, node, loop):
    p = node
    while p is not None and p is not loop:
        p = src.parents.get(p)
    return p is loop


class _Widen(ast.NodeTransformer):
    """Rewrites one statement's subscripts from chunk ``var`` to the whole width."""

    def __init__(self, src, var, width, n, temps):
        self.src, self.var, self.width, self.n, self.temps = src, var, width, n, temps

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if not (isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Tuple)):
            return node
        elts = list(node.slice.elts)
        if _chunk_free(self.src, elts[-1], self.var) is not None:
            arange = elts[-1].right if _arange_free(self.src, elts[-1].right) else elts[-1].left
            arange.value.args[0] = ast.Constant(self.width * self.n)
            elts[-1] = arange
        elif node.value.id in self.temps:
            pos = self.temps[node.value.id]
            elts[-1].value.args[0] = ast.Constant(self.width * self.n)
            del elts[pos]
        node.slice = ast.Tuple(elts, ast.Load())
        return node

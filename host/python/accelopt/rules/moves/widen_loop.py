"""Rule ``widen_loop``: merge ``factor`` iterations of an elementwise ``affine_range`` loop into one
tile ``factor`` times wider along the free dimension.

Before (W = 512, T iterations)::

    for j in nl.affine_range(T):
        t = nl.load(x[r0:r1, j * W:(j + 1) * W])
        nl.store(out[r0:r1, j * W:(j + 1) * W], value=nl.exp(t))

After, factor 2 (the remainder loop keeps odd T exact; it is dropped when T
is a literal multiple of the factor)::

    for j in nl.affine_range(T // 2):
        t = nl.load(x[r0:r1, j * (2 * W):(j + 1) * (2 * W)])
        ...
    for j in nl.affine_range(T % 2):
        t = nl.load(x[r0:r1, (T // 2 * 2 + j) * W:(T // 2 * 2 + j + 1) * W])
        ...

Preconditions: the loop is ``nl.affine_range`` with one argument; its body
is straight-line assignments/calls (no nested loops or branches); every
call is an elementwise NKI API (load/store/copy, nl arithmetic and math,
nisa activation without reduction, tensor_scalar, tensor_tensor,
reciprocal, tensor_copy) and no ``mask=``; the loop variable appears only
as ``j * W : (j + 1) * W`` slices (same W, a literal or a module constant)
that are the last index of a subscript with an earlier slice (a free
dimension); W itself appears nowhere else in the body; names from outside
the loop are only sliced that way, used inside index expressions, passed
as per-partition operands (operand0/1, scale, bias), ops or dtypes, or are
provable scalars; names bound in the loop are not used after it; and the
widened tile has at most MAX_WIDTH elements per partition. No matmul,
transpose, reduction or scan can be in the body, so the nc_matmul moving
(512) and PSUM bank (512 fp32) limits are never involved.
"""
import ast

from .. import analysis as A
from ..base import Candidate
from ..free_dim import NISA_OK, NL_OK, is_loop_var, mul_j, mul_j1
from ..invariant import rebound_first
from ..source import Edit
from ..walk import walk

NAME = "widen_loop"
SUMMARY = "Merge iterations of an elementwise affine_range loop into wider free-dimension tiles."
EFFECT = "instruction and DMA count: wider free-dimension tiles (nki-facts §3.2, §3.4)"
GAIN = 0.15  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"instructions": 1.0, "dma": 0.6, "vector": 0.3, "scalar": 0.3}  # resource -> weight (docs/rules.md)
ORDER = 2  # position among the built-in rules when proposals tie (docs/rules.md)

MAX_WIDTH = 4096  # elements per partition of a widened tile (16 KiB fp32 of ~176 KiB SBUF)

_OPERAND_KWARGS = {"operand0", "operand1", "scale", "bias", "op", "op0", "op1", "dtype", "reverse0",
                   "reverse1", "engine"}


class _Body:
    """Facts about the loop body gathered by ``_analyse``."""

    def __init__(self):
        self.slices = []  # ast.Slice nodes j*W:(j+1)*W
        self.width = None  # the W expression


def _analyse(src, func, loop):
    """_Body if the loop satisfies the preconditions, else None."""
    j = loop.target.id
    info = _Body()
    body_nodes = [n for s in loop.body for n in walk(s)]
    for s in loop.body:
        if not isinstance(s, (ast.Assign, ast.Expr)):
            return None
        if isinstance(s, ast.Assign) and (len(s.targets) != 1 or
                                          not isinstance(s.targets[0], (ast.Name, ast.Subscript))):
            return None
    # calls
    for n in body_nodes:
        if isinstance(n, ast.Call):
            q = src.call_name(n)
            if q is None:
                return None
            kind, name = q.split(".", 1)
            if (kind == "nl" and name not in NL_OK) or (kind == "nisa" and name not in NISA_OK):
                return None
            if any(k.arg in ("mask", "reduce_res", "reduce_op", "reduce_cmd") or k.arg is None
                   for k in n.keywords):
                return None
        elif isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Starred)):
            return None
    # j only in j-slices that index a free dimension
    inside_slices = set()
    for n in body_nodes:
        if not isinstance(n, ast.Subscript):
            continue
        idx = n.slice
        if not isinstance(idx, ast.Tuple) or len(idx.elts) < 2:
            continue
        last = idx.elts[-1]
        if not isinstance(last, ast.Slice) or last.step is not None or last.lower is None or last.upper is None:
            continue
        w0, w1 = mul_j(last.lower, j), mul_j1(last.upper, j)
        if w0 is None or w1 is None or ast.dump(w0) != ast.dump(w1):
            continue
        if not any(isinstance(e, ast.Slice) for e in idx.elts[:-1]):
            continue
        if info.width is not None and ast.dump(info.width) != ast.dump(w0):
            return None
        info.width = w0
        info.slices.append(last)
        inside_slices.update(id(x) for x in walk(last))
    if not info.slices:
        return None
    if any(is_loop_var(n, j) and id(n) not in inside_slices for n in body_nodes):
        return None
    if any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id == j for n in body_nodes):
        return None
    if isinstance(info.width, ast.Name):
        if any(isinstance(n, ast.Name) and n.id == info.width.id and id(n) not in inside_slices
               for n in body_nodes):
            return None
    # names from outside the loop
    local = {n.id for n in A.name_stores(loop)}
    scalars = A.Scalars(src, func)
    allowed = set()
    for n in body_nodes:
        if isinstance(n, ast.Subscript):
            allowed.update(id(x) for x in walk(n.slice))
            if isinstance(n.slice, ast.Tuple) and n.slice.elts and n.slice.elts[-1] in info.slices:
                base = n.value
                if isinstance(base, ast.Name):
                    allowed.add(id(base))
        if isinstance(n, ast.Call):
            allowed.update(id(x) for x in walk(n.func))
            for k in n.keywords:
                if k.arg in _OPERAND_KWARGS:
                    allowed.update(id(x) for x in walk(k.value))
    for n in body_nodes:
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in local:
            if id(n) not in allowed and n.id not in scalars.names:
                return None
    # tiles made in the loop must not be used after it (their width changes), except by
    # another loop that binds the name afresh first (e.g. the remainder loop of a widening)
    inside = {id(n) for n in walk(loop)}
    made = {n.id for s in loop.body for n in A.name_stores(s)}
    for n in walk(func):
        if isinstance(n, ast.Name) and n.id in made and id(n) not in inside \
                and isinstance(n.ctx, ast.Load) and not rebound_first(src, n, loop):
            return None
    return info


def candidates(src):
    """Widening by 2 (and fully, for a literal trip count) of every qualifying loop."""
    out = []
    for loop in walk(src.tree):
        if not A.is_range_loop(src, loop, ("nl.affine_range",)) or not isinstance(loop.target, ast.Name):
            continue
        call = loop.iter
        if len(call.args) != 1 or call.keywords:
            continue
        func = A.enclosing(src, loop, (ast.FunctionDef, ast.AsyncFunctionDef))
        if func is None or not src.owns_lines(loop):
            continue
        info = _analyse(src, func, loop)
        if info is None:
            continue
        w = A.const_value(src, info.width)
        if not isinstance(w, int) or w <= 0:
            continue
        trip = call.args[0]
        n = trip.value if isinstance(trip, ast.Constant) and isinstance(trip.value, int) else None
        factors = [2] if n is None else sorted({f for f in (2, n) if f > 1 and n % f == 0})
        for f in factors:
            if f * w > MAX_WIDTH:
                continue
            out.append(_candidate(src, loop, info, f, w, n))
    return out


def _candidate(src, loop, info, f, w, n):
    j = loop.target.id
    site = f"{j}*{f}"
    width_txt = src.segment(info.width)
    if not isinstance(info.width, (ast.Name, ast.Constant)):
        width_txt = f"({width_txt})"

    def loop_text(trip_text, lower, upper):
        lo, hi = src.line_span(loop.lineno, loop.end_lineno)
        edits = [(src.span(loop.iter.args[0]), trip_text)]
        for s in info.slices:
            edits.append((src.span(s.lower), lower))
            edits.append((src.span(s.upper), upper))
        text = src.text[lo:hi]
        for (start, end), rep in sorted(edits, reverse=True):
            text = text[:start - lo] + rep + text[end - lo:]
        return text if text.endswith("\n") else text + "\n"

    def edits():
        trip_txt = src.segment(loop.iter.args[0])
        wide = str(f * w) if isinstance(info.width, ast.Constant) else f"({f} * {width_txt})"
        if n is not None:
            main = loop_text(str(n // f), f"{j} * {wide}", f"({j} + 1) * {wide}")
            rest = ""
        else:
            t = trip_txt if isinstance(loop.iter.args[0], (ast.Name, ast.Constant)) else f"({trip_txt})"
            main = loop_text(f"{t} // {f}", f"{j} * {wide}", f"({j} + 1) * {wide}")
            base = f"{t} // {f} * {f}"
            rest = loop_text(f"{t} % {f}", f"({base} + {j}) * {width_txt}", f"({base} + {j} + 1) * {width_txt}")
        lo, hi = src.line_span(loop.lineno, loop.end_lineno)
        return [Edit(lo, hi, main + rest)]

    how = "fully" if n is not None and f == n else f"by {f}"
    return Candidate(src, site, f"widen the loop over '{j}' {how}: tiles of {f * w} instead of {w} "
                     f"along the free dimension", edits, {"loop": j, "factor": f, "width": f * w},
                     {"instructions": 1.0, "dma": 0.6, "vector": 0.3, "scalar": 0.3}, 54.0)

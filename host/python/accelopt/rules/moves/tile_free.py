"""Rule ``tile_free``: strip-mine a loop body's free dimension into chunks, carrying a scan's state.

Before (mamba after ``interchange``: every tile of the state loop spans the
whole sequence, 28 KiB per partition each, so SBUF spills)::

    for i_state in nl.affine_range(state_size):
        A_i = nl.load(a[c0:c0 + 128, i_state])
        deltaA = nisa.activation(op=nl.exp, data=delta_i, scale=A_i)
        B_i = nl.load(b[i_state:i_state + 1, 0:seq_len])
        deltaBu = nisa.tensor_tensor(deltaU, B_i.broadcast_to((128, seq_len)), op=nl.multiply)
        scan_res = nisa.tensor_tensor_scan(deltaA, deltaBu, initial=0, op0=np.multiply, op1=np.add)
        acc[i, 0:128, 0:seq_len] += scan_res

After (T = 1024; the NKI fused-Mamba tutorial's mamba_v3 step, nki-facts §5.3)::

    for i_state in nl.affine_range(state_size):
        A_i = nl.load(a[c0:c0 + 128, i_state])
        assert seq_len % 1024 == 0
        scan_res_carry = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        for seq_len_t in nl.static_range(seq_len // 1024):
            seq_len_0 = seq_len_t * 1024
            deltaA = nisa.activation(op=nl.exp, data=delta_i[:, seq_len_0:seq_len_0 + 1024], scale=A_i)
            ...
            scan_res = nisa.tensor_tensor_scan(deltaA, deltaBu, initial=scan_res_carry, ...)
            scan_res_carry[...] = nl.copy(scan_res[:, 1024 - 1:1024])
            acc[i, 0:128, seq_len_0:seq_len_0 + 1024] += scan_res

Preconditions: one extent name E appears in the body as ``0:E`` slices (the
last index of a subscript) and in ``broadcast_to((P, E))`` shapes; every
statement either does not mention E nor read a chunked name (it stays in
front) or is chunked: ``name = <elementwise NKI call>`` (load/store/copy, nl
arithmetic and math, activation without reduction, tensor_scalar,
tensor_tensor, tensor_tensor_scan with ``initial=0``, ``broadcast_to``),
``X[..., 0:E] += name`` or ``nl.store(X[..., 0:E], ...)``; tiles from outside
the loop used as data operands (or widened by ``broadcast_to``) are bound once to a load with a ``0:E`` last
slice or elementwise compute of such tiles (they are sliced), other operands
(scale, bias, operand0) are untouched; chunked names are not used after the
statement list; at most one scan. With a scan the chunk loop is a
``static_range`` (the carry is a true dependency between chunks); else an
``affine_range``. Cost: each tile shrinks from E to T elements per
partition, so the working set fits SBUF (no spill stores and reloads,
nki-facts §3.4 and the residency model of §5.2); T is a searched parameter
(512, 1024, 2048; with the arguments' shapes known, propose's input_shapes,
only chunks that divide E and are smaller than it, else the kernel's own
assert rejects one that does not divide E at run time).
"""
import ast

from .. import analysis as A
from ..base import Candidate
from ..errors import NotApplicable
from ..source import Edit
from ..free_dim import NISA_OK, NL_OK
from ..walk import walk

NAME = "tile_free"
SUMMARY = "Strip-mine the free dimension of a loop body into chunks (carrying a scan's state)."
EFFECT = "SBUF working set: chunked tiles fit, no spill stores and reloads (nki-facts §3.4, §5.2)"
GAIN = 0.4  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"dma": 1.0, "vector": 0.3}  # resource -> weight (docs/rules.md)
ORDER = 16  # position among the built-in rules when proposals tie (docs/rules.md)

CHUNKS = (512, 1024, 2048)


def _zero_to(node):
    """E's name for a ``0:E`` slice, else None."""
    if isinstance(node, ast.Slice) and node.step is None and isinstance(node.lower, ast.Constant) \
            and node.lower.value == 0 and isinstance(node.upper, ast.Name):
        return node.upper.id
    return None


def _last_slices(stmt):
    """[(subscript, last Slice node)] of subscripts in ``stmt`` whose last index is a ``0:E`` slice."""
    out = []
    for n in walk(stmt):
        if isinstance(n, ast.Subscript):
            elts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            if elts and _zero_to(elts[-1]):
                out.append((n, elts[-1]))
    return out


def _bcast_shapes(stmt):
    """[shape Tuple node] of ``x.broadcast_to((P, E))`` calls in ``stmt``."""
    return [c.args[0] for c in walk(stmt) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
            and c.func.attr == "broadcast_to" and len(c.args) == 1 and isinstance(c.args[0], ast.Tuple)
            and len(c.args[0].elts) == 2]


def _call_ok(src, stmt):
    for n in walk(stmt):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and n.func.attr == "broadcast_to":
                continue
            q = src.call_name(n)
            if q is None:
                return False
            kind, name = q.split(".", 1)
            if q == "nisa.tensor_tensor_scan":
                continue
            if (kind == "nl" and name not in NL_OK) or (kind == "nisa" and name not in NISA_OK):
                return False
            if any(k.arg in ("reduce_res", "reduce_op", "reduce_cmd", "mask") or k.arg is None for k in n.keywords):
                return False
    return True


def candidates(src):
    """One candidate per (qualifying loop, chunk size)."""
    out = []
    for func in A.functions(src.tree):
        for loop in walk(func):
            if not isinstance(loop, ast.For) or not A.is_range_loop(src, loop) or not src.owns_lines(loop):
                continue
            plan = _analyse(src, func, loop)
            if plan is None:
                continue
            extent = A.shape_value(src, func, plan.extent)  # known from the arguments' shapes, or None
            for t in CHUNKS:
                if extent is None or (t < extent and extent % t == 0):
                    out.append(_cand(src, loop, plan, t))
    return out


class _Plan:
    """Facts of a qualifying loop body."""

    def __init__(self):
        self.extent = None
        self.front, self.chunked = [], []
        self.outer_full = set()
        self.scan = None  # (statement, the initial= keyword)
        self.partitions = None  # text of P from a broadcast shape


def _analyse(src, func, loop):
    plan = _Plan()
    names = set()
    for stmt in loop.body:
        for _sub, sl in _last_slices(stmt):
            names.add(_zero_to(sl))
        for shape in _bcast_shapes(stmt):
            if isinstance(shape.elts[1], ast.Name):
                names.add(shape.elts[1].id)
    if len(names) != 1:
        return None
    plan.extent = e = names.pop()
    chunked_names = set()
    for stmt in loop.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a string marker (' end loop i2 ')
        mentions_e = any(isinstance(n, ast.Name) and n.id == e for n in walk(stmt))
        reads = A.read_names(stmt)
        full_input = any(isinstance(a, ast.Name) and a.id not in chunked_names
                         and _full_width(src, func, a.id, e, set()) for a in _data_operands(src, stmt))
        if not mentions_e and not reads & chunked_names and not full_input:
            plan.front.append(stmt)
            continue
        if not _call_ok(src, stmt) or not src.owns_lines(stmt):
            return None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            chunked_names.add(stmt.targets[0].id)
            if src.call_name(stmt.value) == "nisa.tensor_tensor_scan":
                init = [k for k in stmt.value.keywords if k.arg == "initial"]
                if plan.scan is not None or len(init) != 1 or not (isinstance(init[0].value, ast.Constant)
                                                                  and init[0].value.value == 0):
                    return None
                plan.scan = (stmt, init[0])
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Subscript) and _last_slices(stmt.target):
            pass
        elif isinstance(stmt, ast.Expr) and src.call_name(stmt.value) == "nl.store":
            pass
        else:
            return None
        # every use of E must be a 0:E last slice or a broadcast shape's last entry
        allowed = {id(sl.upper) for _s, sl in _last_slices(stmt)} | \
            {id(shape.elts[1]) for shape in _bcast_shapes(stmt)}
        if any(isinstance(n, ast.Name) and n.id == e and id(n) not in allowed for n in walk(stmt)):
            return None
        for shape in _bcast_shapes(stmt):
            plan.partitions = plan.partitions or src.segment(shape.elts[0])
        plan.chunked.append(stmt)
    if not any(src.call_name(n) not in (None, "nl.load", "nl.store") for st in plan.chunked for n in walk(st)
               if isinstance(n, ast.Call)):
        return None  # only DMAs: chunking them makes more, smaller transfers
    if plan.scan is not None and plan.partitions is None:
        return None
    # tiles from outside used as data operands must be full width (sliced); chunked names must not escape
    bound_in = {n.id for n in A.name_stores(loop)}
    inside = {id(n) for n in walk(loop)}
    for n in walk(func):
        if isinstance(n, ast.Name) and n.id in chunked_names and id(n) not in inside:
            return None
    for stmt in plan.chunked:
        for arg in _data_operands(src, stmt):
            if isinstance(arg, ast.Name) and arg.id not in bound_in:
                if not _full_width(src, func, arg.id, e, set()):
                    return None
                plan.outer_full.add(arg.id)
            elif not isinstance(arg, ast.Name) and not _last_slices(arg) and not _is_bcast(arg):
                return None
    return plan


def _is_bcast(node):
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "broadcast_to"


_DATA_KW = {"data", "data1", "data2", "x", "y", "value", "src"}


def _data_operands(src, stmt):
    """Tile operands that follow the free dimension: positional tile args, data-like keywords and the
    tiles ``x.broadcast_to(...)`` widens (a full-width tile from outside is sliced there too)."""
    out = []
    for c in walk(stmt):
        if _is_bcast(c) and not isinstance(c.func.value, ast.Constant):
            out.append(c.func.value)
            continue
        if not isinstance(c, ast.Call) or src.call_name(c) in (None, "nl.load", "nl.store"):
            continue
        q = src.call_name(c)
        n_pos = 2 if q in ("nisa.tensor_tensor", "nisa.tensor_tensor_scan") or q.split(".")[1] in (
            "add", "subtract", "multiply", "divide", "maximum", "minimum") else 1
        out += [a for a in c.args[:n_pos] if not isinstance(a, ast.Constant)]
        out += [k.value for k in c.keywords if k.arg in _DATA_KW]
    return out


def _full_width(src, func, name, e, seen):
    if name in seen:
        return False
    seen = seen | {name}
    stores = A.name_stores(func, name)
    if len(stores) != 1:
        return False
    stmt = A.statement_of(src, stores[0])
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return False
    v = stmt.value
    if src.call_name(v) == "nl.load":
        return bool(_last_slices(v)) and _zero_to(_last_slices(v)[0][1]) == e
    if not _call_ok(src, stmt) or src.call_name(v) is None:
        return False
    ops = [a for a in _data_operands(src, stmt) if isinstance(a, ast.Name)]
    return bool(ops) and all(_full_width(src, func, a.id, e, seen) for a in ops)


def _cand(src, loop, plan, t):
    e = plan.extent
    site = f"{e}/{t}@{src.segment(loop.target)}"
    body_ind = src.indent_of(plan.chunked[0])
    step = body_ind[len(src.indent_of(loop)):] or "    "

    def edits():
        nl = src.prefix("nl")
        var, start = f"{e}_t", f"{e}_0"
        used = {n.id for n in walk(src.tree) if isinstance(n, ast.Name)}
        carry = f"{plan.scan[0].targets[0].id}_carry" if plan.scan else None
        if {var, start, carry} & used:
            raise NotApplicable(f"tile_free: a generated name is taken ({var}, {start}, {carry})")
        out = []
        chunk_text = []
        for stmt in plan.chunked:
            text = _rewrite_stmt(src, stmt, plan, e, start, t)
            lines = text.splitlines(keepends=True)
            chunk_text.append("".join(body_ind + step + ln[len(body_ind):] if ln.startswith(body_ind) else ln
                                      for ln in lines))
            if plan.scan and stmt is plan.scan[0]:
                chunk_text.append(f"{body_ind}{step}{carry}[...] = {nl}.copy({stmt.targets[0].id}[:, {t} - 1:{t}])\n")
        head = f"{body_ind}assert {e} % {t} == 0\n"
        if carry:
            head += f"{body_ind}{carry} = {nl}.zeros(({plan.partitions}, 1), dtype={nl}.float32, buffer={nl}.sbuf)\n"
        kind = "static_range" if carry else "affine_range"
        head += f"{body_ind}for {var} in {nl}.{kind}({e} // {t}):\n{body_ind}{step}{start} = {var} * {t}\n"
        # the chunked statements go; the chunk loop takes the place of the first of them, or
        # follows the last statement that stays in front when one comes later (it may define a
        # scale the chunks read; front statements never read chunked ones)
        later_front = [f for f in plan.front if f.lineno > plan.chunked[0].lineno]
        drop = list(plan.chunked)
        if later_front:
            _, at = src.line_span(later_front[-1].lineno, later_front[-1].end_lineno)
            out.append(Edit(at, at, head + "".join(chunk_text)))
        else:
            first = drop.pop(0)
            lo, _ = src.line_span(src.comment_start(first), first.lineno)
            _, hi = src.line_span(first.lineno, first.end_lineno)
            out.append(Edit(lo, hi, head + "".join(chunk_text)))
        for stmt in drop:
            lo, _ = src.line_span(src.comment_start(stmt), stmt.lineno)
            _, hi = src.line_span(stmt.lineno, stmt.end_lineno)
            out.append(Edit(lo, hi, ""))
        return out

    return Candidate(src, site, f"process the loop body over '{e}' in chunks of {t}"
                     + (" (scan state carried between chunks)" if plan.scan else ""), edits,
                     {"extent": e, "chunk": t}, {"dma": 1.0, "vector": 0.3}, 58.0)


def _rewrite_stmt(src, stmt, plan, e, start, t):
    """Source of ``stmt`` (with its comment block) with 0:E -> start:start+T, (P, E) -> (P, T),
    full outer tiles sliced, and the scan's initial= replaced by the carry."""
    lo, hi = src.line_span(src.comment_start(stmt), stmt.end_lineno)
    reps = []
    for _sub, sl in _last_slices(stmt):
        reps.append((src.span(sl), f"{start}:{start} + {t}"))
    for shape in _bcast_shapes(stmt):
        reps.append((src.span(shape.elts[1]), str(t)))
    for arg in _data_operands(src, stmt):
        if isinstance(arg, ast.Name) and arg.id in plan.outer_full:
            reps.append((src.span(arg), f"{arg.id}[:, {start}:{start} + {t}]"))
    if plan.scan and stmt is plan.scan[0]:
        reps.append((src.span(plan.scan[1].value), f"{plan.scan[0].targets[0].id}_carry"))
    text = src.text[lo:hi]
    for (a, b), rep in sorted(reps, reverse=True):
        text = text[:a - lo] + rep + text[b - lo:]
    return text if text.endswith("\n") else text + "\n"

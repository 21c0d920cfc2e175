"""The name form of ``defer_row_scale`` (hand-written kernels with ``nl.matmul``).

In one loop body (a row block)::

    y = nl.multiply(a, r)                  # r: a (P, 1) row statistic, a: a tile dead after this line
    y[...] = nl.multiply(y, g)             # optional: further multiplies commute with a row scale
    yT_psum = nl.transpose(y[:, k0:k1])    # optional (hoist_transpose's form) ...
    yT[:, k, :] = nl.copy(yT_psum)         # ... into yT, read only as matmul(..., transpose_x=True)
    for n in ...:
        acc = nl.zeros((P, N), nl.float32, buffer=nl.psum)
        for k in ...:
            acc += nl.matmul(y[:, k0:k1], w_t)            # or nl.matmul(yT[:, k, :], w_t, transpose_x=True)
        res = nl.copy(acc, dtype=out.dtype)

becomes ``y = a`` and ``res = nisa.tensor_scalar(data=acc, op0=nl.multiply,
operand0=r, dtype=out.dtype)``: the output rows are ``y``'s rows, and
``(diag(r) a) w = diag(r) (a w)``. The TensorE transposes then wait only for
``a`` (and the commuting multiplies), not for the statistic's reduction chain.

Preconditions: ``r`` is a column name (scale_to_activation.column_names)
bound once, in this body, before the multiply; ``y`` and ``a`` are names
bound once in the function (``a`` in this body, read nowhere after the
multiply, so ``y`` may alias it); every other read of ``y`` is a
``y[...] = nl.multiply(y, x)`` / ``nl.multiply(x, y)`` update in this body,
``y.shape`` / ``y.dtype``, a full-row slice ``y[:, ...]`` as the first operand of ``nl.matmul`` without
``transpose_x``, or a full-row slice under ``nl.transpose`` whose PSUM result
(a name bound once) is copied once into ``yT[...]``, with ``yT`` an
allocation written only by such copies and read only as the first operand of
``nl.matmul(..., transpose_x=True)``; every matmul accumulates (``+=``) into
a PSUM ``nl.zeros`` name bound once, updated only by such matmuls and read
once, by ``res = nl.copy(acc)`` (``dtype`` kept) in this body.
"""
import ast

from . import analysis as A
from . import patterns as P
from .imports import isa_prefix
from .columns import column_names
from .walk import walk


def sites(src):
    """[(site label, description params, edits callable)] for every qualifying multiply."""
    out = []
    for func in A.functions(src.tree):
        defs = A.bindings(func)
        cols = column_names(src, func, A.Scalars(src, func))
        for node in walk(func):
            s = _site(src, func, defs, cols, node)
            if s is not None:
                out.append(s)
    return out


def _multiply_args(src, call):
    if src.call_name(call) != "nl.multiply":
        return None
    args = P.clean(src, A.call_args(call, "nl.multiply"))
    if args is None or set(args) != {"x", "y"}:
        return None
    return args["x"], args["y"]


def _site(src, func, defs, cols, s1):
    if not (isinstance(s1, ast.Assign) and len(s1.targets) == 1 and isinstance(s1.targets[0], ast.Name)):
        return None
    ops = _multiply_args(src, s1.value)
    if ops is None:
        return None
    y = s1.targets[0].id
    pairs = [(a, r) for a, r in (ops, ops[::-1]) if isinstance(a, ast.Name) and isinstance(r, ast.Name)
             and r.id in cols and a.id not in cols]
    if len(pairs) != 1 or len(defs.get(y, [])) != 1:
        return None
    a, r = pairs[0][0].id, pairs[0][1].id
    body, i = A.body_of(src, s1)
    if body is None or len(defs.get(a, [])) != 1 or len(defs.get(r, [])) != 1 or a == y:
        return None
    loop = src.parents.get(s1)
    if not isinstance(loop, ast.For):
        return None
    r_def = [n for n in walk(loop) if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == r for t in n.targets)]
    a_def = [n for n in walk(loop) if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == a for t in n.targets)]
    if len(r_def) != 1 or r_def[0] not in body[:i] or len(a_def) != 1 or a_def[0] not in body[:i]:
        return None
    if any(n.id == a for stmt in body[i + 1:] for n in A.name_loads(stmt)) or r in A.written_roots(src, loop):
        return None
    evictions = []
    for use in A.name_loads(func, y):
        if A.statement_of(src, use) is s1:
            continue
        ev = _use(src, func, defs, loop, body, i, y, use)
        if ev is None:
            return None
        if ev is not True:
            evictions.append(ev)
    evictions = list({id(e[0]): e for e in evictions}.values())
    if not evictions:
        return None

    def edits():
        isa, extra = isa_prefix(src)
        nl = src.prefix("nl")
        out = [src.replace_node(s1.value, a)]
        for call, acc, keep in evictions:
            kw = "".join(f", {k.arg}={src.segment(k.value)}" for k in keep)
            out.append(src.replace_node(call, f"{isa}.tensor_scalar(data={acc}, op0={nl}.multiply, operand0={r}{kw})"))
        return out + extra

    return y, {"scaled": y, "scale": r, "source": a}, edits


def _full_rows(sub):
    first = sub.slice.elts[0] if isinstance(sub.slice, ast.Tuple) else sub.slice
    return isinstance(first, ast.Slice) and first.lower is None and first.upper is None and first.step is None


def _in(src, node, loop):
    p = node
    while p is not None and p is not loop:
        p = src.parents.get(p)
    return p is loop


def _use(src, func, defs, loop, body, i, y, use):
    """True for a commuting update, (eviction call, acc name, kept keywords) for a matmul path, else None."""
    stmt = A.statement_of(src, use)
    top = stmt
    while top is not None and top not in body:
        top = src.parents.get(top)
    if top is None or body.index(top) <= i:
        return None
    parent = src.parents.get(use)
    if isinstance(parent, ast.Attribute) and parent.attr in ("shape", "dtype"):
        return True  # metadata: the same with or without the scale
    # y[...] = nl.multiply(y, x) / nl.multiply(x, y): commutes with the row scale
    if isinstance(stmt, ast.Assign) and stmt in body and len(stmt.targets) == 1 \
            and isinstance(stmt.targets[0], ast.Subscript) and isinstance(stmt.targets[0].value, ast.Name) \
            and stmt.targets[0].value.id == y and _multiply_args(src, stmt.value) is not None \
            and (parent is stmt.value or parent is stmt.targets[0]):
        return True
    if not (isinstance(parent, ast.Subscript) and parent.value is use and _full_rows(parent)):
        return None
    call = src.parents.get(parent)
    qual = src.call_name(call)
    if qual == "nl.matmul" and call.args and call.args[0] is parent \
            and not any(k.arg == "transpose_x" for k in call.keywords):
        return _accumulated(src, func, defs, loop, call)
    if qual == "nl.transpose" and call.args == [parent] and not call.keywords and _transpose_of(src, defs, stmt, y):
        loads = A.name_loads(func, stmt.targets[0].id)
        cp = A.statement_of(src, loads[0]) if len(loads) == 1 else None
        if not (isinstance(cp, ast.Assign) and len(cp.targets) == 1 and isinstance(cp.targets[0], ast.Subscript)
                and isinstance(cp.targets[0].value, ast.Name)):
            return None
        return _transposed(src, func, defs, loop, y, cp.targets[0].value.id)
    return None


def _transpose_of(src, defs, stmt, y):
    """True if ``stmt`` is ``t = nl.transpose(y[:, ...])`` with ``t`` bound only there."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and src.call_name(stmt.value) == "nl.transpose" and len(stmt.value.args) == 1
            and not stmt.value.keywords and len(defs.get(stmt.targets[0].id, [])) == 1):
        return False
    arg = stmt.value.args[0]
    return isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Name) and arg.value.id == y \
        and _full_rows(arg)


def _transposed(src, func, defs, loop, y, yt):
    """The eviction reached through ``yT`` (an allocation written only by copies of transposes of
    ``y``'s full rows, read only as the transposed first operand of matmuls), or None."""
    values = defs.get(yt, [])
    if len(values) != 1 or values[0] is None or src.call_name(values[0]) != "nl.ndarray":
        return None
    found = []
    for n in A.name_loads(func, yt):
        parent = src.parents.get(n)
        stmt = A.statement_of(src, n)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.targets[0] is parent:
            cp = stmt.value
            src_arg = cp.args[0] if src.call_name(cp) in ("nl.copy", "nisa.tensor_copy") and cp.args else None
            t_defs = defs.get(src_arg.id, []) if isinstance(src_arg, ast.Name) else []
            if len(t_defs) != 1 or t_defs[0] is None or \
                    not _transpose_of(src, defs, A.statement_of(src, t_defs[0]), y):
                return None
            continue
        if not isinstance(parent, ast.Subscript) or parent.value is not n:
            return None
        call = src.parents.get(parent)
        if not (src.call_name(call) == "nl.matmul" and call.args and call.args[0] is parent and any(
                k.arg == "transpose_x" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in call.keywords)):
            return None
        found.append(_accumulated(src, func, defs, loop, call))
    if not found or None in found or len({id(f[0]) for f in found}) != 1:
        return None
    return found[0]


def _accumulated(src, func, defs, loop, mm):
    """(eviction call, acc name, kept keywords) for ``acc += mm`` evicted once by a copy in ``loop``."""
    stmt = A.statement_of(src, mm)
    if not (isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) and stmt.value is mm
            and isinstance(stmt.target, ast.Name)):
        return None
    acc = stmt.target.id
    values = defs.get(acc, [])
    if len(values) != 1 or values[0] is None or src.call_name(values[0]) != "nl.zeros" or not any(
            k.arg == "buffer" and src.qualname(k.value) == "nl.psum" for k in values[0].keywords):
        return None
    mentions = [n for n in walk(func) if isinstance(n, ast.Name) and n.id == acc]
    loads = A.name_loads(func, acc)
    if len(mentions) != 3 or len(loads) != 1:  # the nl.zeros binding, this +=, the eviction
        return None
    ev = A.statement_of(src, loads[0])
    call = ev.value if isinstance(ev, ast.Assign) else None
    if call is None or src.call_name(call) != "nl.copy" or call.args != [loads[0]] or not _in(src, ev, loop):
        return None
    keep = []
    for k in call.keywords:
        if k.arg == "dtype":
            keep.append(k)
        elif not (k.arg == "mask" and P.trivial(src, k.arg, k.value)):
            return None
    return call, acc, keep

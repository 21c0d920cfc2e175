"""Rule ``reduce_to_activation``: a row sum of an activation's result rides on the activation.

::

    in_square = nl.square(a_tile)                    square_sum = nl.ndarray((a_tile.shape[0], 1), dtype=a_tile.dtype,
    ...                                                                      buffer=nl.sbuf)
    square_sum = nl.sum(in_square, axis=[1])   ->    in_square = nisa.activation_reduce(op=nl.square, data=a_tile,
                                                                                    reduce_op=nl.add, reduce_res=square_sum)

ScalarE applies the function and adds the results along the free dimension in
the same instruction (``activation_reduce``: max(MIN_II, N) cycles plus a fixed
MIN_II for the reduction, nki-facts §2.6, §3.3); the separate VectorE
``tensor_reduce`` pass over the whole tile (N cycles, nki-facts §3.3) goes, and
the statistic is ready as soon as the activation is, so what waits for it
(RMSNorm's rsqrt and scale, softmax's divide) starts earlier. The reduction is
an add, which NC-v2 (trn1) supports (nki-facts §2.6).

Preconditions: ``t = nl.square(x)`` / ``nl.exp(x)`` or ``t = nisa.activation(op=F,
data=x[, bias=, scale=])`` (trivial keywords only) with ``x`` a name of a
provable rank-2 tile (bound only to ``nl.load`` of a two-index subscript, to an
``nl.ndarray/zeros`` of a two-entry shape tuple,
or to elementwise NKI math of such tiles, scalars and (P, 1) columns), so the
free dimension is axis 1; ``s = nl.sum(t, axis=[1])`` (or ``axis=1``) later in
the same statement list, with ``t`` and ``s`` names bound once in the
function, ``t`` not written and ``s`` not mentioned in between; the kernel has
no integer dtypes.
"""
import ast

from .. import analysis as A
from .. import patterns as P
from ..base import Candidate
from ..imports import isa_prefix
from ..columns import column_names
from ..source import Edit
from ..walk import walk

NAME = "reduce_to_activation"
SUMMARY = "Compute a row sum of an activation's result in the activation itself (activation_reduce)."
EFFECT = ("VectorE time and dependency chain: the row sum rides on the ScalarE activation "
          "(activation_reduce, +MIN_II), the VectorE tensor_reduce pass goes (nki-facts §2.6, §3.3)")
GAIN = 0.2  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"vector": 1.0, "instructions": 0.5}  # resource -> weight (docs/rules.md)
ORDER = 18  # position among the built-in rules when proposals tie (docs/rules.md)

_FUNCS = {"nl.square": "square", "nl.exp": "exp"}
_ELEMENTWISE = {"nl.add", "nl.subtract", "nl.multiply", "nl.divide", "nl.maximum", "nl.minimum", "nl.square",
                "nl.exp", "nl.copy", "nl.negative", "nl.abs", "nl.sqrt", "nl.rsqrt", "nl.tanh", "nl.sigmoid"}


def candidates(src):
    """Every qualifying (activation, row sum) pair."""
    if P.integer_dtypes(src):
        return []
    out = []
    for func in A.functions(src.tree):
        defs = A.bindings(func)
        scalars = A.Scalars(src, func)
        cols = column_names(src, func, scalars)
        rank2 = _rank2_names(src, defs, scalars, cols)
        for body in A.statement_lists(func):
            out += _in_body(src, defs, rank2, body)
    return out


def _rank2_names(src, defs, scalars, cols):
    names = {n for n, vs in defs.items() if vs and all(v is not None for v in vs)}
    changed = True
    while changed:
        changed = False
        for n in sorted(names):
            if not all(_rank2(src, v, names, scalars, cols) for v in defs[n]):
                names.discard(n)
                changed = True
    return names


def _rank2(src, v, names, scalars, cols):
    if isinstance(v, ast.Name):
        return v.id in names
    qual = src.call_name(v)
    if qual in ("nl.ndarray", "nl.zeros") and v.args:
        shape = v.args[0]
        return isinstance(shape, ast.Tuple) and len(shape.elts) == 2
    if qual == "nl.load":
        arg = v.args[0] if v.args else None
        return isinstance(arg, ast.Subscript) and isinstance(arg.slice, ast.Tuple) and len(arg.slice.elts) == 2
    if qual in _ELEMENTWISE and v.args and all(k.arg in ("dtype", "mask") and P.trivial(src, k.arg, k.value)
                                               for k in v.keywords):
        parts = list(v.args)
        wide = [a for a in parts if _rank2(src, a, names, scalars, cols)]
        rest = [a for a in parts if a not in wide]
        return bool(wide) and all(scalars.is_scalar(a) or (isinstance(a, ast.Name) and a.id in cols) for a in rest)
    return False


def _activation(src, call):
    """(function text, data node, extra keyword texts) of a qualifying activation call, or None."""
    qual = src.call_name(call)
    if qual in _FUNCS:
        args = P.clean(src, A.call_args(call, qual) if qual in A.SIGNATURES else
                       ({"x": call.args[0]} if len(call.args) == 1 and not call.keywords else None))
        if args is None or set(args) != {"x"}:
            return None
        return f"{src.prefix('nl')}.{_FUNCS[qual]}", args["x"], []
    if qual == "nisa.activation" and not call.args:
        kw = P.clean(src, {k.arg: k.value for k in call.keywords if k.arg is not None})
        if len(kw) != len([k for k in call.keywords if not P.trivial(src, k.arg, k.value)]) \
                or not {"op", "data"} <= set(kw) or set(kw) - {"op", "data", "bias", "scale"}:
            return None
        extra = [f"{k}={src.segment(kw[k])}" for k in ("bias", "scale") if k in kw]
        return src.segment(kw["op"]), kw["data"], extra
    return None


def _row_sum_of(src, call, t):
    if src.call_name(call) != "nl.sum" or len(call.args) != 1 or not isinstance(call.args[0], ast.Name) \
            or call.args[0].id != t:
        return False
    kw = P.clean(src, {k.arg: k.value for k in call.keywords if k.arg is not None})
    if set(kw) != {"axis"} or len(call.keywords) != len([k for k in call.keywords if k.arg is not None]):
        return False
    axis = ast.dump(kw["axis"])
    return axis in (ast.dump(ast.List([ast.Constant(1)], ast.Load())), ast.dump(ast.Constant(1)))


def _in_body(src, defs, rank2, body):
    out = []
    for i, s1 in enumerate(body):
        if not (isinstance(s1, ast.Assign) and len(s1.targets) == 1 and isinstance(s1.targets[0], ast.Name)):
            continue
        act = _activation(src, s1.value)
        if act is None:
            continue
        fn, data, extra = act
        t = s1.targets[0].id
        if not (isinstance(data, ast.Name) and data.id in rank2) or len(defs.get(t, [])) != 1:
            continue
        for j in range(i + 1, len(body)):
            s2 = body[j]
            if isinstance(s2, ast.Assign) and len(s2.targets) == 1 and isinstance(s2.targets[0], ast.Name) \
                    and _row_sum_of(src, s2.value, t):
                s = s2.targets[0].id
                between = body[i + 1:j]
                if len(defs.get(s, [])) == 1 and s != data.id and \
                        not any(t in A.written_roots(src, b) or any(n.id == s for n in walk(b)
                                                                    if isinstance(n, ast.Name)) for b in between):
                    out.append(_cand(src, body, s1, s2, t, s, fn, data.id, extra))
                break
            if t in A.written_roots(src, s2):
                break
    return out


def _cand(src, body, s1, s2, t, s, fn, x, extra):
    def edits():
        isa, more = isa_prefix(src)
        nl = src.prefix("nl")
        indent = src.indent_of(s1)
        kws = ", ".join([f"op={fn}", f"data={x}", f"reduce_op={nl}.add", f"reduce_res={s}"] + extra)
        alloc = f"{indent}{s} = {nl}.ndarray(({x}.shape[0], 1), dtype={x}.dtype, buffer={nl}.sbuf)\n"
        lo, _ = src.line_span(src.comment_start(s1), s1.lineno)
        return [Edit(lo, lo, alloc), src.replace_node(s1.value, f"{isa}.activation_reduce({kws})"),
                src.delete_stmt(s2, body)] + more

    return Candidate(src, s, f"compute the row sum '{s}' of '{t}' in its activation (activation_reduce)", edits,
                     {"target": s, "activation": t}, {"vector": 1.0, "instructions": 0.5}, 56.0)

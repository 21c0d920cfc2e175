"""Rule ``merge_stores``: two stores of adjacent partition ranges become one store over both.

Hand-written kernels that compute the two halves of a tile on 64 partitions
each (the repository's rope: ``out[0:H2]`` and ``out[H2:D]``) store them with
two DMAs::

        out_lo = nl.subtract(nl.multiply(x_lo, cos_t), nl.multiply(x_hi, sin_t))
        out_hi = nl.add(nl.multiply(x_lo, sin_t), nl.multiply(x_hi, cos_t))
        nl.store(out[0:H2, j * TILE_T:(j + 1) * TILE_T], value=out_lo)
        nl.store(out[H2:D, j * TILE_T:(j + 1) * TILE_T], value=out_hi)

After (the two results are written into the halves of one tile, stored once)::

        assert D <= 128
        out_lo_hi = nl.ndarray((D, TILE_T), dtype=out.dtype, buffer=nl.sbuf)
        out_lo_hi[0:H2, :] = nl.subtract(nl.multiply(x_lo, cos_t), nl.multiply(x_hi, sin_t))
        out_lo_hi[H2:D, :] = nl.add(nl.multiply(x_lo, sin_t), nl.multiply(x_hi, cos_t))
        nl.store(out[0:D, j * TILE_T:(j + 1) * TILE_T], value=out_lo_hi)

Preconditions (proven on the AST): two ``nl.store(H[lo:mid, F], value=A)`` and
``nl.store(H[mid:hi, F], value=B)`` statements of one statement list (no other
keywords; ``lo`` absent or 0; the second range starts where the first ends,
the same text; the same free index ``F``, a slice ``k * E:(k + 1) * E`` or ``s:e``);
``A`` and ``B`` are temps (bound once by ``A = <expr>`` in the same list before
their store, read only there); nothing between the two stores mentions ``H``;
the new tile's name is free. The allocation goes in front of the first
definition; when ``hi`` is not a literal <= 128 an ``assert hi <= 128`` goes
with it (a case with more rows then fails in the profile stage). An engine
may write its result at another start partition than its inputs' (the
published rope writes ``x_out_sb[i_lower, i_S]`` from tiles at partition 0),
so the computations are unchanged.

Effect: one DMA trigger and completion semaphore instead of two, and the one
transfer of hi - lo partitions spreads over ceil((hi - lo) / 8) DMA engines,
twice the engines each half used (nki-facts §3.1, §3.4: "a P-partition
transfer uses ceil(P/8) engines"; S4 nki-dma-overview).
"""
import ast

from .. import analysis as A
from ..base import Candidate
from ..errors import NotApplicable
from ..source import Edit
from ..walk import walk

NAME = "merge_stores"
SUMMARY = "Store two adjacent partition ranges of one output with one DMA over both."
EFFECT = ("DMA count and spread: one store over both partition ranges, one trigger and semaphore, ceil(P/8)"
          " DMA engines for the whole tile (nki-facts §3.1, §3.4)")
GAIN = 0.05  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"dma": 0.5, "instructions": 0.2}  # resource -> weight (docs/rules.md)
ORDER = 26  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    out = []
    for func in A.functions(src.tree):
        for body in A.statement_lists(func):
            stores = [(i, _store(src, s)) for i, s in enumerate(body)]
            stores = [(i, st) for i, st in stores if st is not None]
            for a in range(len(stores)):
                for b in range(a + 1, len(stores)):
                    try:
                        c = _candidate(src, func, body, stores[a], stores[b])
                    except NotApplicable:
                        c = None
                    if c is not None:
                        out.append(c)
    return out


def _store(src, stmt):
    """(H name, lo, mid/hi slice, F node, value name, call) of ``nl.store(H[lo:hi, F], value=V)``, else None."""
    if not (isinstance(stmt, ast.Expr) and src.call_name(stmt.value) == "nl.store") or not src.owns_lines(stmt):
        return None
    args = A.call_args(stmt.value, "nl.store")
    if args is None or set(args) != {"dst", "value"}:
        return None
    dst, value = args["dst"], args["value"]
    if not (isinstance(dst, ast.Subscript) and isinstance(dst.value, ast.Name) and isinstance(dst.slice, ast.Tuple)
            and len(dst.slice.elts) == 2 and isinstance(value, ast.Name)):
        return None
    rows, free = dst.slice.elts
    if not isinstance(rows, ast.Slice) or rows.step is not None or rows.upper is None:
        return None
    return {"stmt": stmt, "call": stmt.value, "dst": dst, "h": dst.value.id, "rows": rows, "free": free,
            "value": value.id}


def _same(a, b):
    return a is not None and b is not None and ast.dump(a) == ast.dump(b)


def _width(src, free):
    """Text of the free slice's width: E for ``k * E:(k + 1) * E``, ``(e) - (s)`` otherwise; None if not a slice."""
    if not isinstance(free, ast.Slice) or free.step is not None or free.upper is None:
        return None
    lo, hi = free.lower, free.upper
    if lo is None:
        return src.segment(hi)
    if isinstance(lo, ast.BinOp) and isinstance(lo.op, ast.Mult) and isinstance(hi, ast.BinOp) \
            and isinstance(hi.op, ast.Mult):
        k_hi = hi.left
        if isinstance(k_hi, ast.BinOp) and isinstance(k_hi.op, ast.Add) and _same(k_hi.left, lo.left) \
                and isinstance(k_hi.right, ast.Constant) and k_hi.right.value == 1 and _same(hi.right, lo.right):
            return src.segment(lo.right)
    return f"({src.segment(hi)}) - ({src.segment(lo)})"


def _candidate(src, func, body, first, second):
    (i, s1), (k, s2) = first, second
    if s1["h"] != s2["h"] or not _same(s1["free"], s2["free"]):
        return None
    r1, r2 = s1["rows"], s2["rows"]
    if r1.lower is not None and not (isinstance(r1.lower, ast.Constant) and r1.lower.value == 0):
        return None
    if not _same(r1.upper, r2.lower):
        return None
    width = _width(src, s1["free"])
    if width is None or s1["value"] == s2["value"]:
        return None
    h = s1["h"]
    for stmt in body[i + 1:k]:
        if any(isinstance(n, ast.Name) and n.id == h for n in walk(stmt)):
            return None
    defs = []
    for st in (s1, s2):
        v = st["value"]
        def_stmt = None
        for j, stmt in enumerate(body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and stmt.targets[0].id == v:
                def_stmt = stmt
        temp = A.single_use_temp(src, func, v, def_stmt) if def_stmt is not None else None
        if temp is None or temp[1] is not st["stmt"] or not src.owns_lines(def_stmt):
            return None
        defs.append(def_stmt)
    reads = A.read_names(s1["free"]) | A.read_names(r2.upper) | A.read_names(r1.upper)
    if reads & {s1["value"], s2["value"]}:
        return None
    name = f"{s1['value']}_{s2['value'].split('_')[-1]}" if "_" in s2["value"] else f"{s1['value']}_{s2['value']}"
    if any(isinstance(n, ast.Name) and n.id == name for n in walk(src.tree)):
        return None
    hi = r2.upper
    hi_val = A.const_value(src, hi)
    nl = src.prefix("nl")

    def edits():
        first_def = min(defs, key=lambda d: d.lineno)
        indent = src.indent_of(first_def)
        hi_text = src.segment(hi)
        text = ""
        if hi_val is None or hi_val > 128:
            text += f"{indent}assert {hi_text} <= 128\n"
        text += f"{indent}{name} = {nl}.ndarray(({hi_text}, {width}), dtype={h}.dtype, buffer={nl}.sbuf)\n"
        at, _ = src.line_span(src.comment_start(first_def), first_def.lineno)
        out = [Edit(at, at, text)]
        for d, rows in ((defs[0], f"0:{src.segment(r1.upper)}"), (defs[1], f"{src.segment(r2.lower)}:{hi_text}")):
            out.append(src.replace_node(d.targets[0], f"{name}[{rows}, :]"))
        # the merged store goes where the second one was (both halves are computed by then)
        out.append(src.delete_stmt(s1["stmt"], body))
        call = f"{src.segment(s1['call'].func)}({h}[0:{hi_text}, {src.segment(s1['free'])}], value={name})"
        out.append(src.replace_node(s2["stmt"], call))
        return out

    return Candidate(src, f"{s1['value']}+{s2['value']}", f"store '{s1['value']}' and '{s2['value']}' (rows "
                     f"0:{src.segment(r1.upper)} and {src.segment(r2.lower)}:{src.segment(hi)} of '{h}') with one DMA",
                     edits, {"tensor": h, "values": [s1["value"], s2["value"]], "tile": name},
                     {"dma": 0.5, "instructions": 0.2}, 47.0)

"""Rule ``narrow_load``: a load nest that fills a whole tensor, of which each consumer iteration reads one
column slice, moves into the consumer and loads only that slice.

Before (gqa_full: all eight heads' V, 128 KiB per partition, is loaded up front; each head reads its 128
columns of every block, so every block stays live and the working set exceeds SBUF)::

    for i12 in nl.affine_range(8):
        for i13 in nl.affine_range(4):
            v16[i12, i13, nl.arange(128)[:, None], nl.arange(1024)[None, :]] = nl.load(
                v3[0, 4 * i12 + i13, nl.arange(128)[:, None], nl.arange(1024)[None, :]])
    for i15 in nl.affine_range(2):
        for i16 in nl.affine_range(4):
            for i17 in nl.affine_range(32):
                ... v16[i23, i24, nl.arange(128)[:, None], 128 * i16 + 512 * i15 + nl.arange(128)[None, :]] ...

After (``v16`` is declared 128 columns wide, with a block per (i15, i16) iteration)::

    for i15 in nl.affine_range(2):
        for i16 in nl.affine_range(4):
            for i12 in nl.affine_range(8):
                for i13 in nl.affine_range(4):
                    v16[i15, i16, i12, i13, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(
                        v3[0, 4 * i12 + i13, nl.arange(128)[:, None], 128 * i16 + 512 * i15 + nl.arange(128)[None, :]])
            for i17 in nl.affine_range(32):
                ... v16[i15, i16, i23, i24, nl.arange(128)[:, None], nl.arange(128)[None, :]] ...

Preconditions (else no candidate): the load nest is a perfect nest of ``nl.affine_range(<int>)`` loops
around one ``T[..., nl.arange(F)[None, :]] = nl.load(S[..., c + nl.arange(F)[None, :]], ...)`` (no
mask) filling the full last dimension F of an SBUF block tensor ``T`` that nothing else writes; ``S`` is
a kernel argument that nothing writes; every read of ``T`` is in one later loop nest of the same
statement list, as ``T[..., o + nl.arange(W)[None, :]]`` with the same offset ``o`` and ``W < F``; ``o``
reads only loop variables of loops enclosing every read, and the nest moves to the start of the body of
the deepest of them; the load's loop variables are not used there; statements in between do not write
``S``; the HBM bytes loaded grow at most 4x (the enclosing iterations times W / F).

Effect: the tensor's live part is the slice the current iterations read (W / F of it), so it fits SBUF
beside the rest of the working set instead of being evicted and re-read per use (nki-facts §3.4); the
price is the extra loads, bounded above.
"""
import ast

from .. import analysis as A
from .. import cstyle as C
from ..base import Candidate
from ..errors import NotApplicable
from ..source import Edit
from ..walk import walk

NAME = "narrow_load"
SUMMARY = "Move a whole-tensor load nest into its consumer and load only the column slice each iteration reads."
EFFECT = ("SBUF working set: only the column slice the current iterations read is live, so it stays "
          "resident instead of being evicted and re-read per use (nki-facts §3.4)")
GAIN = 0.3  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"dma": 1.0}  # resource -> weight (docs/rules.md)
ORDER = 28  # position among the built-in rules when proposals tie (docs/rules.md)
MAX_GROWTH = 4.0


def candidates(src):
    """One candidate per qualifying load nest."""
    out = []
    for func in A.functions(src.tree):
        allocs = C.allocations(src, func)
        if not allocs:
            continue
        params = {a.arg for a in func.args.args}
        for body in A.statement_lists(func):
            for ni, nest in enumerate(body):
                try:
                    cand = _candidate(src, func, allocs, params, body, ni, nest)
                except NotApplicable:
                    cand = None
                if cand is not None:
                    out.append(cand)
    return out


def _perfect(src, loop):
    loops = [loop]
    while True:
        inner = [s for s in loops[-1].body if not C.is_note(s)]
        if len(inner) == 1 and isinstance(inner[0], ast.For):
            if C.trip(src, inner[0]) is None:
                return None, None
            loops.append(inner[0])
        else:
            return loops, inner


def _split(src, entry, width=None):
    """(offset node or None, n) for ``o + nl.arange(n)[None, :]`` / ``nl.arange(n)[None, :] + o`` /
    ``nl.arange(n)[None, :]``; None otherwise."""
    a = C.arange(src, entry)
    if a is not None:
        return (None, a[0]) if a[1] == (False, True) else None
    if isinstance(entry, ast.BinOp) and isinstance(entry.op, ast.Add):
        for term, other in ((entry.right, entry.left), (entry.left, entry.right)):
            a = C.arange(src, term)
            if a is not None and a[1] == (False, True) and not C.aranges(src, other):
                return other, a[0]
    return None


def _candidate(src, func, allocs, params, body, ni, nest):
    if not isinstance(nest, ast.For) or C.trip(src, nest) is None or not src.owns_lines(nest):
        return None
    loops, inner = _perfect(src, nest)
    if loops is None or len(inner) != 1 or not isinstance(inner[0], ast.Assign):
        return None
    stmt = inner[0]
    target, call = stmt.targets[0], stmt.value
    if not (isinstance(target, ast.Subscript) and isinstance(call, ast.Call) and src.call_name(call) == "nl.load"):
        return None
    args = A.call_args(call, "nl.load") or {}
    mask = args.get("mask")
    if mask is not None and not (isinstance(mask, ast.Constant) and mask.value is None):
        return None
    load_src = args.get("src")
    alloc = allocs.get(A.root_name(target))
    if alloc is None or alloc.buffer != "sbuf" or not isinstance(load_src, ast.Subscript) \
            or not isinstance(load_src.value, ast.Name):
        return None
    s_root = load_src.value.id
    if s_root not in params or _written(src, func, s_root):
        return None
    acc = C.accesses(src, func, alloc)
    writes = [s for s, kind in acc if kind == "write"]
    reads = [s for s, kind in acc if kind == "read"]
    if writes != [target] or not reads:
        return None
    width = alloc.call.args[0].elts[-1] if isinstance(alloc.call.args[0], ast.Tuple) else None
    full = C._int(width) if width is not None else None
    w_split = _split(src, C.entries(target)[-1])
    s_split = _split(src, C.entries(load_src)[-1]) if C.entries(load_src) else None
    if full is None or w_split != (None, full) or s_split is None or s_split[1] != full:
        return None
    # the consumer: one later statement of the same list holds every read
    cons_i = None
    for j in range(ni + 1, len(body)):
        if any(_inside(src, r, body[j]) for r in reads):
            cons_i = j
            break
    if cons_i is None or not all(_inside(src, r, body[cons_i]) for r in reads):
        return None
    between = body[ni + 1:cons_i]
    if any(n.id == s_root for s in between for n in A.name_stores(s)) or \
            any(_writes_root(src, s, s_root) for s in between):
        return None
    splits = [_split(src, C.entries(r)[-1]) for r in reads]
    if any(sp is None or sp[0] is None for sp in splits):
        return None
    offs = {ast.dump(sp[0]) for sp in splits}
    ws = {sp[1] for sp in splits}
    if len(offs) != 1 or len(ws) != 1:
        return None
    off, w = splits[0]
    if w >= full:
        return None
    off_vars = A.read_names(off)
    # the loops enclosing every read, outermost first, down from the consumer
    chains = [_enclosing(src, r, body[cons_i]) for r in reads]
    common = []
    for level in zip(*chains):
        if all(x is level[0] for x in level):
            common.append(level[0])
        else:
            break
    bound = [lp.target.id for lp in common if isinstance(lp.target, ast.Name)]
    if not off_vars or not off_vars <= set(bound):
        return None
    depth = max(i for i, lp in enumerate(common) if lp.target.id in off_vars)
    host = common[depth]
    growth = 1.0
    for lp in common[:depth + 1]:
        t = C.trip(src, lp)
        if t is None:
            return None
        growth *= t
    growth *= w / full
    if growth > MAX_GROWTH:
        return None
    nest_vars = {lp.target.id for lp in loops}
    used_at_host = A.read_names(body[cons_i]) | {n.id for n in A.name_stores(body[cons_i])}
    if nest_vars & used_at_host:
        return None
    return _cand(src, alloc, nest, body, target, load_src, off, w, full, reads, common[:depth + 1], growth)


def _written(src, func, root):
    for n in walk(func):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and A.root_name(n) == root:
            return True
        if isinstance(n, ast.Call) and src.call_name(n) == "nl.store":
            dst = (A.call_args(n, "nl.store") or {}).get("dst")
            if dst is None or A.root_name(dst) == root:
                return True
    return False


def _writes_root(src, stmt, root):
    return any(isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and A.root_name(n) == root
               for n in walk(stmt)) or any(
        isinstance(n, ast.Call) and src.call_name(n) == "nl.store"
        and A.root_name((A.call_args(n, "nl.store") or {}).get("dst") or ast.Name("?")) in (root, "?")
        for n in walk(stmt))


def _inside(src, node, stmt):
    p = node
    while p is not None:
        if p is stmt:
            return True
        p = src.parents.get(p)
    return False


def _enclosing(src, node, top):
    """The ``for`` loops from ``top`` (included) down to ``node``, outermost first."""
    out = []
    p = src.parents.get(node)
    while p is not None:
        if isinstance(p, ast.For) and _inside(src, p, top):
            out.append(p)
        if p is top:
            break
        p = src.parents.get(p)
    return out[::-1]


def _cand(src, alloc, nest, body, target, load_src, off, w, full, reads, outer, growth):
    """``outer``: the consumer loops from its top down to the one whose body receives the nest; their
    variables become leading block dimensions of the tensor, so every iteration fills its own slice
    (no buffer is shared across independent iterations, nki-facts §2.4)."""
    name, host = alloc.name, outer[-1]
    off_text = src.segment(off)
    narrow = f"nl.arange({w})[None, :]"
    lead = "".join(f"{lp.target.id}, " for lp in outer)

    def edits():
        out = [src.delete_stmt(nest, body)]
        shape = alloc.call.args[0].elts
        out.append(Edit(src.span(shape[0])[0], src.span(shape[0])[0],
                        "".join(f"{C.trip(src, lp)}, " for lp in outer)))
        out.append(src.replace_node(shape[-1], str(w)))
        first_w = C.entries(target)[0]
        repl = {id(C.entries(target)[-1]): narrow, id(first_w): lead + src.segment(first_w)}
        s_off, _ = _split(src, C.entries(load_src)[-1])
        repl[id(C.entries(load_src)[-1])] = (f"{src.segment(s_off)} + " if s_off is not None else "") + \
            f"{off_text} + {narrow}"
        first = host.body[0]
        text = C.stmt_lines(src, nest, repl, src.indent_of(first))
        at, _ = src.line_span(src.comment_start(first), first.lineno)
        out.append(Edit(at, at, text))
        for r in reads:
            ent = C.entries(r)
            out.append(src.replace_node(ent[-1], narrow))
            out.append(Edit(src.span(ent[0])[0], src.span(ent[0])[0], lead))
        return out

    return Candidate(src, f"{name}@{host.target.id}",
                     f"load only the {w}-column slice of {name} that each '{host.target.id}' iteration reads, "
                     f"inside that loop ({growth:.2g}x the bytes, {w}/{full} of the tensor live)",
                     edits, {"tensor": name, "loop": host.target.id, "width": w, "growth": round(growth, 3)},
                     {"dma": 1.0}, 60.0)

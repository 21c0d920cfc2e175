"""Rule ``store_chunks``: store each chunk of a staged block as soon as its chunk loop writes it.

Compiler-style kernels (nki-facts §1.4) fill a W-wide SBUF staging tile in
c-wide chunks (PSUM evictions of 512-wide matmul tiles, or an elementwise
chain run per chunk) and store the whole tile after the chunk loop::

    for i5 in nl.affine_range(2):
        ...
        v7[i0, i4, nl.arange(128)[:, None], 512 * i5 + nl.arange(512)[None, :]] = nl.copy(v6[...])
    nl.store(v3[..., 1024 * i2 + nl.arange(1024)[None, :]], value=v7[i0, i4, nl.arange(128)[:, None],
             nl.arange(1024)[None, :]])

The block's store waits for its last chunk. Stored per chunk, inside the
loop, each store starts as soon as its chunk lands::

    for i5 in nl.affine_range(2):
        ...
        v7[i0, i4, nl.arange(128)[:, None], 512 * i5 + nl.arange(512)[None, :]] = nl.copy(v6[...])
        nl.store(v3[..., 1024 * i2 + 512 * i5 + nl.arange(512)[None, :]], value=v7[i0, i4,
                 nl.arange(128)[:, None], 512 * i5 + nl.arange(512)[None, :]])

Effect: overlap (DMAs run beside compute, nki-facts §3.2): the first chunks'
stores run under the later chunks' compute, the tail after the last chunk is
one chunk's store, and each chunk of the staging tile is free for reuse once
stored. Cost: W / c stores instead of one, each with the DMA fixed cost
(nki-facts §3.4): a DMA-bound kernel gets slower (the published matmul,
39.20 -> 39.40 ms), a TensorE-bound one faster (transpose_matmul 9.291 ->
9.248 ms); the profile ranks it by the bottleneck.

Preconditions: the statement is ``nl.store(D, value=V[...], mask=M)`` directly
after ``for j in nl.affine_range(T)`` in the same block, and does not read
``j``; the loop writes V only as whole statements whose index equals the
stored one except at one free position, where the store has
``nl.arange(W)[None, :]`` and the write ``c * j + nl.arange(c)[None, :]``
with W = T * c; every ``nl.arange(W)`` of the store is that free expansion;
a chunk spans at least 2 KiB per partition (c x itemsize: the DMA's fixed
cost stays amortised, nki-facts §3.4).
"""
import ast

from .. import analysis as A
from .. import cstyle as C
from ..base import Candidate
from ..errors import NotApplicable
from ..source import Edit
from ..walk import walk

NAME = "store_chunks"
SUMMARY = "Store each chunk of a staged block inside the chunk loop that writes it, so stores overlap compute."
EFFECT = ("overlap: each chunk of a staged block is stored as soon as it is written, so the stores run "
          "under the later chunks' compute and the tail after the last chunk is one chunk's store "
          "(nki-facts §3.2, §3.4)")
GAIN = 0.03  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"tensor": 0.3, "vector": 0.2, "scalar": 0.2}  # resource -> weight (docs/rules.md)
ORDER = 30  # position among the built-in rules when proposals tie (docs/rules.md)

MIN_CHUNK_BYTES = 2048  # per partition


def candidates(src):
    out = []
    for func in A.functions(src.tree):
        allocs = C.allocations(src, func)
        for node in walk(func):
            if isinstance(node, ast.Expr) and src.call_name(node.value) == "nl.store":
                c = _at(src, allocs, node)
                if c is not None:
                    out.append(c)
    return out


def _store_value(call):
    if len(call.args) >= 2:
        return call.args[1]
    return next((k.value for k in call.keywords if k.arg == "value"), None)


def _at(src, allocs, stmt):
    body, i = A.body_of(src, stmt)
    if body is None or i == 0 or not src.owns_lines(stmt):
        return None
    loop = body[i - 1]
    if not isinstance(loop, ast.For) or C.trip(src, loop) is None or not src.owns_lines(loop):
        return None
    j, trips = loop.target.id, C.trip(src, loop)
    val = _store_value(stmt.value)
    if not (isinstance(val, ast.Subscript) and isinstance(val.value, ast.Name) and val.value.id in allocs):
        return None
    if any(isinstance(n, ast.Name) and n.id == j for n in walk(stmt)):
        return None
    entries = C.entries(val)
    if entries is None:
        return None
    writes = [w for w in walk(loop) if isinstance(w, ast.Assign) and any(
        A.root_name(t) == val.value.id for t in w.targets)]
    chunk = _chunk(src, writes, entries, j)
    if chunk is None:
        return None
    pos, c = chunk
    width = trips * c
    if C.arange(src, entries[pos]) != (width, (False, True)):
        return None
    try:
        found = C.aranges(src, stmt)
    except NotApplicable:  # an arange that is not an expansion: not this rule's form
        return None
    wide = [n for n, ext, _p in found if ext == width]
    if any(pat != (False, True) for _n, ext, pat in found if ext == width):
        return None
    if c * allocs[val.value.id].itemsize < MIN_CHUNK_BYTES:
        return None
    site = f"{val.value.id}@{j}"

    def edits():
        nl = src.prefix("nl")
        repl = {}
        for n in wide:
            text = f"{c} * {j} + {nl}.arange({c})[None, :]"
            parent = src.parents.get(n)
            bare = isinstance(parent, (ast.Tuple, ast.Subscript)) or (
                isinstance(parent, ast.BinOp) and (isinstance(parent.op, ast.Add) or (
                    isinstance(parent.op, ast.Sub) and parent.left is n)))
            repl[id(n)] = text if bare else f"({text})"
        last = loop.body[-1]
        anchor = last if C.is_note(last) and len(loop.body) > 1 else None
        indent = src.indent_of(loop.body[0])
        new = C.stmt_lines(src, stmt, repl, indent)
        if anchor is not None:
            at = src.line_span(anchor.lineno, anchor.lineno)[0]
        else:
            at = src.line_span(last.end_lineno + 1, last.end_lineno + 1)[0]
        return [Edit(at, at, new), src.delete_stmt(stmt, body)]

    return Candidate(src, site, f"store '{val.value.id}' in {c}-wide chunks inside the loop over '{j}' "
                     f"({trips} stores of {c} instead of one of {width}), each as soon as its chunk is written",
                     edits, {"tile": val.value.id, "loop": j, "chunk": c, "width": width},
                     {"tensor": 0.3, "vector": 0.2, "scalar": 0.2}, 30.0)


def _chunk(src, writes, entries, j):
    """(free position, c) when every write has the stored index but ``c * j + nl.arange(c)[None, :]`` at
    one free position; else None."""
    if not writes:
        return None
    found = None
    for w in writes:
        if len(w.targets) != 1 or not isinstance(w.targets[0], ast.Subscript):
            return None
        got = C.entries(w.targets[0])
        if got is None or len(got) != len(entries):
            return None
        diff = [k for k, (a, b) in enumerate(zip(got, entries)) if ast.dump(a) != ast.dump(b)]
        if len(diff) != 1:
            return None
        c = _chunk_term(src, got[diff[0]], j)
        if c is None or (found is not None and found != (diff[0], c)):
            return None
        found = (diff[0], c)
    return found


def _chunk_term(src, node, j):
    """c for ``c * j + nl.arange(c)[None, :]`` (either order of the sum and of the product)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return None
    for a, b in ((node.left, node.right), (node.right, node.left)):
        ar = C.arange(src, b)
        if ar is None or ar[1] != (False, True):
            continue
        if isinstance(a, ast.BinOp) and isinstance(a.op, ast.Mult):
            sides = (a.left, a.right)
            names = [s for s in sides if isinstance(s, ast.Name) and s.id == j]
            consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == ar[0]]
            if names and consts:
                return ar[0]
    return None

"""Rule ``dedupe_load``: drop a second load of the same HBM data and read the first tile instead.

Two forms, both in one statement list (loop body or function body)::

    a = nl.load(x[i * 128:(i + 1) * 128, 0:K])          v7[i0, i1, ip, if_] = nl.load(v1[8 * i0 + i1, ip, if_])
    ...                                                 ...
    b = nl.load(x[i * 128:(i + 1) * 128, 0:K])          v10[i0, i1, ip, if_] = nl.load(v1[8 * i0 + i1, ip, if_])

The second statement goes and every read of ``b`` (``v10[...]``) becomes a read
of ``a`` (``v7[...]``). Preconditions: identical source expressions and
load keywords; nothing between the two writes the HBM tensor, rebinds a
name the source reads, or writes ``a``; for names, ``b`` is bound only there
and ``a`` is not rebound anywhere after the first load (so every read of ``b``
sees the same data in ``a``); for block tensors (compiler style), both are
on-chip allocations written only by these two statements with identical
indices, so ``a`` and ``b`` hold the same data everywhere. Cost: one DMA and
its HBM bytes fewer per execution (nki-facts §3.4); an SBUF buffer less.
"""
import ast

from .. import analysis as A
from .. import blocks
from .. import patterns as P
from ..base import Candidate
from ..walk import walk

NAME = "dedupe_load"
SUMMARY = "Reuse an already loaded tile instead of loading the same HBM data again."
EFFECT = "DMA count and HBM bytes: the same data is loaded once (nki-facts §3.4)"
GAIN = 0.2  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"dma": 1.0}  # resource -> weight (docs/rules.md)
ORDER = 13  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    """Every second load of the same data in a statement list."""
    out = []
    for func in A.functions(src.tree):
        for body in A.statement_lists(func):
            out += _in_body(src, func, body)
    return out


def _load(src, stmt):
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and src.call_name(stmt.value) == "nl.load":
        return stmt.targets[0], stmt.value
    return None, None


def _in_body(src, func, body):
    out = []
    for j, second in enumerate(body):
        tb, call_b = _load(src, second)
        if tb is None:
            continue
        for i in range(j):
            ta, call_a = _load(src, body[i])
            if ta is None or ast.dump(call_a) != ast.dump(call_b):
                continue
            c = _pair(src, func, body, i, j, ta, tb, call_a)
            if c is not None:
                out.append(c)
                break
    return out


def _pair(src, func, body, i, j, ta, tb, call):
    root = A.root_name(call.args[0] if call.args else call.keywords[0].value)
    reads = A.read_names(call)
    for stmt in body[i + 1:j]:
        if A.written_roots(src, stmt) & ({root} | {A.root_name(ta)}) or {n.id for n in A.name_stores(stmt)} & reads:
            return None
    if isinstance(ta, ast.Name) and isinstance(tb, ast.Name):
        a, b = ta.id, tb.id
        if a == b or len(A.name_stores(func, b)) != 1 or len(A.name_stores(func, a)) != 1 \
                or b in A.written_roots(src, func) or a in A.written_roots(src, func):
            return None
        uses = A.name_loads(func, b)

        def edits():
            return [src.delete_stmt(body[j], body)] + [src.replace_node(u, a) for u in uses]
    elif isinstance(ta, ast.Subscript) and isinstance(tb, ast.Subscript) and isinstance(ta.value, ast.Name) \
            and isinstance(tb.value, ast.Name) and ast.dump(ta.slice) == ast.dump(tb.slice):
        a, b = ta.value.id, tb.value.id
        if a == b or not (_only_store(src, func, a, body[i]) and _only_store(src, func, b, body[j])):
            return None
        uses = [n for n in walk(func) if isinstance(n, ast.Name) and n.id == b and isinstance(n.ctx, ast.Load)
                and A.statement_of(src, n) is not body[j]]

        def edits():
            return [src.delete_stmt(body[j], body)] + [src.replace_node(u, a) for u in uses]
    else:
        return None
    site = f"{b}={a}"
    return Candidate(src, site, f"reuse '{a}' instead of loading the same data into '{b}' again", edits,
                     {"first": a, "second": b}, {"dma": 1.0}, 64.0)


def _only_store(src, func, name, store):
    """True if ``name`` is an on-chip block allocation whose only write is ``store`` (a subscript assign)."""
    allocs, writes = 0, 0
    for n in walk(func):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    if not blocks.on_chip_alloc(src, n):
                        return False
                    allocs += 1
                elif isinstance(t, ast.Subscript) and A.root_name(t) == name:
                    if n is not store:
                        return False
                    writes += 1
        elif isinstance(n, ast.AugAssign) and A.root_name(n.target) == name:
            return False
    return allocs == 1 and writes == 1 and name not in _written_by_calls(src, func)


def _written_by_calls(src, func):
    out = set()
    for n in walk(func):
        if isinstance(n, ast.keyword) and n.arg in A.WRITE_KWARGS and A.root_name(n.value):
            out.add(A.root_name(n.value))
        if isinstance(n, ast.Call) and src.call_name(n) is None and not P.pure(n, src):
            root = A.root_name(n.func) if isinstance(n.func, ast.Attribute) else None
            if root not in A.PURE_MODULES and not (isinstance(n.func, ast.Attribute)
                                                    and n.func.attr in ("broadcast_to", "reshape")):
                out |= A.read_names(n)
    return out

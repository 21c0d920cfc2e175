"""Rule ``hoist_nest``: work inside a loop that does not depend on it runs once, in front of it.

Compiler-style kernels (nki-facts §1.4) redo work that only depends on some
of the loops around it. bmm loads and transposes the same ``lhs`` tiles for
every 1024-column block ``i1`` of the output::

    for i1 in nl.affine_range(4):
        v6[i0, i1, ...] = nl.load(v2[i0, ..., 1024 * i1 + ...])
        for i2 in nl.affine_range(4):
            for i3 in nl.affine_range(8):
                v7[i1, i0, i2, i3, ...] = nl.load(v1[i0, 1024 * i2 + 128 * i3 + ..., ...])
                v8[i0, i1, i2, i3, ...] = nisa.nc_matmul(v7[i1, i0, i2, i3, ...], v5[...], ..., is_transpose=True)
                v9[i1, i0, i2, ..., 128 * i3 + ...] = nl.copy(v8[i0, i1, i2, i3, ...], ...)
            for i4 in nl.affine_range(8):
                ... nisa.nc_matmul(v9[i1, i0, i2, ...], v6[i0, i1, ...]) ...

After (the i3 nest, with the loops between it and i1, runs once per i0 in
front of the i1 loop; the tensors it writes lose their i1 block dimension)::

    for i2 in nl.affine_range(4):
        for i3 in nl.affine_range(8):
            v7[i0, i2, i3, ...] = nl.load(...)
            v8[i0, i2, i3, ...] = nisa.nc_matmul(v7[i0, i2, i3, ...], ...)
            v9[i0, i2, ..., 128 * i3 + ...] = nl.copy(v8[i0, i2, i3, ...], ...)
    for i1 in nl.affine_range(4):
        v6[i0, i1, ...] = nl.load(...)
        for i2 in nl.affine_range(4):
            for i4 in nl.affine_range(8):
                ... nisa.nc_matmul(v9[i0, i2, ...], v6[i0, i1, ...]) ...

Preconditions (proven on the AST): the outer loop L is ``nl.affine_range(T)``
(T >= 2 literal) over x; the hoisted statement S sits in L's body or in
nested ``nl.affine_range`` loops with literal trip counts (the *chain*,
re-created around S in front of L); S is a subscript assignment or a loop
nest of them (plus the compiler's string markers), writes only
compiler-style on-chip tensors W, and is the largest such statement (its
parent loop inside L is not itself hoistable); x occurs in S only as the
bare block index of a W tensor, at one block position q per tensor (dims[q]
== T), and every access of a W tensor anywhere has x at q; W tensors are
written only in S; every other tensor S reads is not written inside L; S
reads no name bound inside L except the chain's and its own loop variables;
every access of a W tensor outside S is inside L after S; the blocks of W
tensors read outside S that the hoisted nest keeps alive at once fit in
64 KiB per partition (so the reused tiles stay in SBUF).

Effect: S's DMAs, TensorE instructions and PSUM evictions run T times
fewer (nki-facts §3.3, §3.4); the NKI matrix-multiplication tutorial's first
optimisation, "removing redundant loads" by hoisting them out of the loop
that does not use them (S3). The measured trn1 HBM reads of the published
bmm (67.4 MB, nki-facts §5.2) are its lhs read four times.
"""
import ast

from .. import analysis as A
from .. import cstyle as C
from ..base import Candidate
from ..errors import NotApplicable
from ..source import Edit
from ..walk import walk

NAME = "hoist_nest"
SUMMARY = "Hoist a loop nest that does not depend on an outer loop in front of it (block tensors lose that dim)."
EFFECT = ("DMA count, TensorE and PSUM-copy time: work that does not depend on the outer loop runs once "
          "instead of once per iteration (nki-facts §3.3, §3.4)")
GAIN = 0.2  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"tensor": 0.5, "dma": 0.2, "vector": 0.3, "scalar": 0.3, "instructions": 0.6}  # resource -> weight (docs/rules.md)
ORDER = 23  # position among the built-in rules when proposals tie (docs/rules.md)

MAX_LIVE_BYTES = 64 * 1024  # per partition, one third of SBUF (nki-facts §3.1)


def candidates(src):
    """One candidate per (outer loop, largest hoistable statement inside it)."""
    out = []
    for func, allocs, loop, t in C.counted_loops(src, 2):
        ctx = _Context(src, func, allocs, loop, t)
        for stmt, chain in _walk(src, loop.body, []):
            try:
                info = ctx.hoistable(stmt, chain)
            except NotApplicable:
                info = None
            if info is None:
                continue
            # the largest: the parent loop inside L must not be hoistable as a whole
            if chain:
                try:
                    parent_ok = ctx.hoistable(chain[-1], chain[:-1]) is not None
                except NotApplicable:
                    parent_ok = False
                if parent_ok:
                    continue
            out.append(_cand(src, ctx, stmt, chain, info))
    return out


def _walk(src, body, chain):
    """(stmt, chain) for every statement inside nested literal affine loops of ``body``."""
    for stmt in body:
        if C.is_note(stmt):
            continue
        yield stmt, chain
        if isinstance(stmt, ast.For) and C.trip(src, stmt) is not None:
            yield from _walk(src, stmt.body, chain + [stmt])


class _Context:
    def __init__(self, src, func, allocs, loop, trip):
        self.src, self.func, self.allocs, self.loop, self.trip = src, func, allocs, loop, trip
        self.x = loop.target.id
        self.written_in_loop = A.written_roots(src, loop)
        self.bound_in_loop = {n.id for n in A.name_stores(loop)}
        self.outer_vars = set(C.loop_vars(src, loop))
        self.mods = C.module_names(src)
        self._acc = {}

    def accesses(self, name):
        if name not in self._acc:
            self._acc[name] = C.accesses(self.src, self.func, self.allocs[name])
        return self._acc[name]

    def hoistable(self, stmt, chain):
        """{tensor: block position of x} when ``stmt`` may move in front of the loop, else None."""
        src, x = self.src, self.x
        inner = _inner_vars(src, stmt)
        if inner is None:
            return None
        chain_vars = {c.target.id for c in chain}
        for c in chain:
            if A.read_names(c.iter) & self.bound_in_loop:
                return None
        # what it writes: compiler-style on-chip tensors only
        writes = set()
        for n in walk(stmt):
            if isinstance(n, (ast.Assign, ast.AugAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for tg in targets:
                    if not (isinstance(tg, ast.Subscript) and isinstance(tg.value, ast.Name)
                            and tg.value.id in self.allocs):
                        return None
                    writes.add(tg.value.id)
            elif isinstance(n, ast.Call) and src.call_name(n) == "nl.store":
                return None
        if not writes:
            return None
        # x: only a bare block index of a written tensor
        pos = {}
        for n in walk(stmt):
            if not (isinstance(n, ast.Name) and n.id == x):
                continue
            sub = src.parents.get(n)
            if isinstance(sub, ast.Tuple):
                sub = src.parents.get(sub)
            if not (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id in writes):
                return None
            ent = C.entries(sub)
            if ent is None:
                return None
            idx = [i for i, e in enumerate(ent) if e is n]
            a = self.allocs[sub.value.id]
            if len(idx) != 1 or idx[0] >= a.par or pos.setdefault(a.name, idx[0]) != idx[0]:
                return None
        # every written tensor: x at its position everywhere, written only in S, read after S inside L
        inside = {id(n) for n in walk(stmt)}
        in_loop = {id(n) for n in walk(self.loop)}
        for name in writes:
            a = self.allocs[name]
            q = pos.get(name)
            if q is None or a.dims[q] != self.trip:
                return None
            for sub, kind in self.accesses(name):
                e = C.entries(sub)
                if not (isinstance(e[q], ast.Name) and e[q].id == x):
                    return None
                if id(sub) in inside:
                    continue
                if kind == "write" or id(sub) not in in_loop:
                    return None
                if (sub.lineno, sub.col_offset) < (stmt.end_lineno, stmt.end_col_offset):
                    return None
        # what it reads: fixed while L runs
        for n in walk(stmt):
            if not isinstance(n, ast.Name) or not isinstance(n.ctx, ast.Load):
                continue
            if n.id == x or n.id in writes or n.id in chain_vars or n.id in inner or n.id in self.mods:
                continue
            if n.id in self.written_in_loop or n.id in self.bound_in_loop:
                return None
        # the reused blocks must stay in SBUF
        live = 0
        for name in writes:
            reads_outside = [s for s, _k in self.accesses(name) if id(s) not in inside]
            if not reads_outside:
                continue
            a = self.allocs[name]
            fb = a.free_bytes()
            if fb is None:
                return None
            blocks = 1
            for sub, kind in self.accesses(name):
                if id(sub) not in inside or kind != "write":
                    continue
                e = C.entries(sub)
                vary = set()
                for i in range(a.par):
                    if i != pos[name] and A.read_names(e[i]) & (chain_vars | inner):
                        if a.dims[i] is None:
                            return None
                        vary.add(i)
                b = 1
                for i in vary:
                    b *= a.dims[i]
                blocks = max(blocks, b)
            live += blocks * fb
        if live > MAX_LIVE_BYTES:
            return None
        return pos


def _inner_vars(src, stmt):
    """Loop variables bound inside ``stmt`` when it is a subscript assignment or a nest of literal affine
    loops over them (string markers allowed); None for anything else."""
    if isinstance(stmt, (ast.Assign, ast.AugAssign)):
        return set()
    if not isinstance(stmt, ast.For) or C.trip(src, stmt) is None:
        return None
    out = {stmt.target.id}
    for s in stmt.body:
        if C.is_note(s):
            continue
        sub = _inner_vars(src, s)
        if sub is None:
            return None
        out |= sub
    return out


def _cand(src, ctx, stmt, chain, pos):
    x = ctx.x
    names = sorted(pos)

    def edits():
        out = []
        inside = {id(n) for n in walk(stmt)}
        repl = {}
        for name in names:
            a = ctx.allocs[name]
            q = pos[name]
            keep = [e for i, e in enumerate(a.entries) if i != q]
            out.append(src.replace_node(a.shape, "(" + C.tuple_text(src, keep) + ("," if len(keep) == 1 else "") + ")"))
            for sub, _kind in ctx.accesses(name):
                e = C.entries(sub)
                text = C.tuple_text(src, [v for i, v in enumerate(e) if i != q])
                if id(sub) in inside:
                    repl[id(sub.slice)] = text
                else:
                    out.append(src.replace_node(sub.slice, text))
        indent = src.indent_of(ctx.loop)
        step = _step(src, ctx.loop)
        text = ""
        for k, c in enumerate(chain):
            text += f"{indent}{step * k}for {src.segment(c.target)} in {src.segment(c.iter)}:\n"
        text += C.stmt_lines(src, stmt, repl, indent + step * len(chain))
        at, _ = src.line_span(src.comment_start(ctx.loop), ctx.loop.lineno)
        out.append(Edit(at, at, text))
        body, _i = A.body_of(src, stmt)
        out.append(src.delete_stmt(stmt, body))
        return out

    what = f"the loop over '{stmt.target.id}'" if isinstance(stmt, ast.For) else "the statement"
    return Candidate(src, f"{'+'.join(names)}@{x}", f"hoist {what} that writes {', '.join(names)} out of the loop "
                     f"over '{x}' (it does not depend on it: runs once instead of {ctx.trip} times)", edits,
                     {"loop": x, "tensors": names, "chain": [c.target.id for c in chain]},
                     {"tensor": 0.5, "dma": 0.2, "vector": 0.3, "scalar": 0.3, "instructions": 0.6}, 60.0)


def _step(src, loop):
    """One indentation step of the kernel (from the loop's first body statement)."""
    inner = src.indent_of(loop.body[0])
    outer = src.indent_of(loop)
    return inner[len(outer):] if inner.startswith(outer) and len(inner) > len(outer) else "    "

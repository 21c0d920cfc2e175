"""Rescaling the free-dimension block an outer loop walks, shared by ``split_block`` (narrower, by
``Fraction(1, f)``) and ``reblock`` (wider, by an integer f): the edits to the widths, the
trip count and the block dimensions, and the preconditions they need (``split_block``'s
docstring lists them). ``BlockRescale.plan`` raises NotApplicable or returns None.
"""
import ast
from fractions import Fraction

from . import analysis as A
from . import cstyle as C
from .errors import NotApplicable
from .walk import walk

MIN_PANEL_BYTES = 64 * 1024  # per partition: a double buffer of it plus the other operand exceeds SBUF
RESIDENT_BYTES = 88 * 1024  # per partition, half of usable SBUF (nki-facts §3.1): a larger panel is re-issued


def _lit(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _lit(node.operand)
        return -v if v is not None else None
    return None


def _terms(src, expr, sign=1):
    """Flattens an additive expression into [(kind, payload, coefficient, node)].

    kinds: "const"; "var" (payload: the name; node: the ``c * x`` product or the Name);
    "arange" (payload: (n, pattern, subscript node)); "other".
    """
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return _terms(src, expr.left, sign) + _terms(src, expr.right, -sign if isinstance(expr.op, ast.Sub) else sign)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return [(k, p, -c, n) for k, p, c, n in _terms(src, expr.operand, sign)]
    const = _lit(expr)
    if const is not None:
        return [("const", const, sign, expr)]
    if isinstance(expr, ast.Name):
        return [("var", expr.id, sign, expr)]
    a = C.arange(src, expr)
    if a is not None:
        return [("arange", (a[0], a[1], expr), sign, expr)]
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        for k, other in ((_lit(expr.left), expr.right), (_lit(expr.right), expr.left)):
            if k is None:
                continue
            if isinstance(other, ast.Name):
                return [("var", other.id, sign * k, expr)]
            a = C.arange(src, other)
            if a is not None:
                return [("arange", (a[0], a[1], other), sign * k, expr)]
    return [("other", None, sign, expr)]


def _coef_node(term_node):
    """The int literal node of ``c * x`` / ``x * c`` (None for a bare name)."""
    if isinstance(term_node, ast.BinOp) and isinstance(term_node.op, ast.Mult):
        return term_node.left if _lit(term_node.left) is not None else term_node.right
    return None


def _root(src, node):
    """The additive expression ``node`` is part of (climbing through + - * and unary minus)."""
    child, parent = node, src.parents.get(node)
    while isinstance(parent, (ast.BinOp, ast.UnaryOp)):
        child, parent = parent, src.parents.get(parent)
    return child


def _holder(src, expr):
    """(Subscript, entry index) when ``expr`` is an index entry of a subscript, else (None, None)."""
    parent = src.parents.get(expr)
    if isinstance(parent, ast.Tuple):
        sub = src.parents.get(parent)
        if isinstance(sub, ast.Subscript) and sub.slice is parent:
            return sub, [i for i, e in enumerate(parent.elts) if e is expr][0]
    elif isinstance(parent, ast.Subscript) and parent.slice is expr:
        return parent, 0
    return None, None


class BlockRescale:
    """The edits that rescale the block ``loop`` walks: widths times ``ratio`` (``Fraction(1, f)`` narrows,
    as this rule does; an integer f > 1 widens, as ``reblock`` does), the trip count and the block
    dimensions it indexes divided by it. :meth:`plan` raises NotApplicable or returns None."""

    def __init__(self, src, func, allocs, loop, trip, ratio):
        self.src, self.func, self.allocs, self.loop, self.trip = src, func, allocs, loop, trip
        self.r = Fraction(ratio)
        self.x = loop.target.id
        self.inside = {id(n) for n in walk(loop)}
        self.loops = {n.target.id: n for n in walk(loop) if isinstance(n, ast.For) and n is not loop
                      and isinstance(n.target, ast.Name)}
        self.edits = {}  # id(node) -> (node, text)
        self.narrowed = set()  # ids of arange subscripts whose extent is divided
        self.chunks = {}  # chunk loop name -> trip count
        self.xlocal = {}  # (tensor, axis) -> width

    def _scaled(self, n, why="a width the factor does not divide"):
        """``n * ratio``; NotApplicable(why) unless it is a whole number."""
        v = n * self.r
        if v.denominator != 1:
            raise NotApplicable(why)
        return int(v)

    def new_trip(self):
        """The loop's trip count after the edit (``trip / ratio``); NotApplicable unless whole."""
        v = self.trip / self.r
        if v.denominator != 1:
            raise NotApplicable("the factor does not divide the loop's trip count")
        return int(v)

    def _edit(self, node, text):
        self.edits[id(node)] = (node, text)

    def _narrow(self, sub):
        arg = sub.value.args[0]
        n = _lit(arg)
        self._edit(arg, str(self._scaled(n, "an arange the factor does not divide")))
        self.narrowed.add(id(sub))

    def _local(self, terms, width, sign):
        """The block-local rest of an axis expression: ("arange", node), ("chunk", j, c, node|None);
        None if it is none of the forms (with ``sign``) or a chunk loop's count does not fit."""
        ar = [t for t in terms if t[0] == "arange"]
        chunk = [t for t in terms if t[0] == "var" and t[1] in self.loops]
        if len(ar) > 1 or len(chunk) > 1 or (ar and ar[0][2] != sign):
            return None
        if ar and not chunk:
            n, _pattern, node = ar[0][1]
            return ("arange", node) if n == width else None
        if not chunk:
            return None
        j, cj = chunk[0][1], chunk[0][2] * sign
        c = ar[0][1][0] if ar else cj
        if cj != c or c <= 0:
            return None
        tc = C.trip(self.src, self.loops[j])
        if tc is None or tc * c != width:
            return None
        return ("chunk", j, c, ar[0][1][2] if ar else None)

    def _add_chunk(self, j):
        tc = C.trip(self.src, self.loops[j])
        self._scaled(tc, f"chunk loop {j}: the factor does not divide its count")
        self.chunks[j] = tc

    def plan(self, benefit=True):
        """{"panel", "tensors", "chunks", "widths"} once every edit is known; None when the loop walks no
        block, or (``benefit``) when narrowing it buys nothing (module docstring)."""
        src, x = self.src, self.x
        self.new_trip()
        bare = {}
        roots = {}
        for n in walk(self.loop):
            if not (isinstance(n, ast.Name) and n.id == x) or n is self.loop.target:
                continue
            sub, idx = _holder(src, n)
            if sub is not None and isinstance(sub.value, ast.Name) and sub.value.id in self.allocs:
                a = self.allocs[sub.value.id]
                if idx >= a.par or bare.setdefault(a.name, idx) != idx:
                    raise NotApplicable("the loop variable at a partition/free position or two block positions")
                continue
            r = _root(src, n)
            roots[id(r)] = r
        if not roots:
            return None
        # x terms: W * x + (arange(W) | c*j + arange(c) | c*j)
        for r in roots.values():
            terms = _terms(src, r)
            xs = [t for t in terms if t[0] == "var" and t[1] == x]
            if len(xs) != 1 or any(t[0] == "other" for t in terms):
                raise NotApplicable("an index expression that is not affine in the loop variable")
            s = xs[0][2]
            width = abs(s)
            cnode = _coef_node(xs[0][3])
            if cnode is None:
                raise NotApplicable("a bare loop variable")
            self._scaled(width, "a width the factor does not divide")
            local = self._local([t for t in terms if t is not xs[0]], width, 1 if s > 0 else -1)
            if local is None:
                raise NotApplicable("an x term without a block-local rest")
            self._edit(cnode, str(self._scaled(_lit(cnode))))
            if local[0] == "arange":
                self._narrow(local[1])
            else:
                self._add_chunk(local[1])
            self._pair(r, local, width)
        if not self.xlocal:
            return None
        self._close()
        self._check_tensors(bare)
        self._check_chunk_uses()
        self._check_statements()
        panel = self.panel_bytes()
        extra = self._invariant_loads()
        if benefit and (panel < MIN_PANEL_BYTES or (extra and panel <= RESIDENT_BYTES)):
            return None
        return {"panel": panel, "tensors": sorted({n for n, _a in self.xlocal}), "chunks": sorted(self.chunks),
                "widths": sorted(set(self.xlocal.values()))}

    def _pair(self, root, local, width):
        """An HBM load source / store destination entry with an x term: the on-chip side's entry with the
        same arange expansion holds the block."""
        src = self.src
        sub, _idx = _holder(src, root)
        if sub is None:
            return  # a mask
        if isinstance(sub.value, ast.Name) and sub.value.id in self.allocs:
            return  # an on-chip tensor holding every block: the term's rewrite is all it needs
        if local[0] == "chunk" and local[3] is None:
            return  # a block index of HBM (c * j, no arange): nothing on chip to align
        node = local[-1]
        call = src.parents.get(sub)
        if isinstance(call, ast.keyword):
            call = src.parents.get(call)
        qual = src.call_name(call) if isinstance(call, ast.Call) else None
        if qual == "nl.load":
            stmt = src.parents.get(call)
            other = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        elif qual == "nl.store":
            args = A.call_args(call, "nl.store") or {}
            other = args.get("value") if args.get("dst") is sub else None
        else:
            raise NotApplicable("an HBM access with an x term outside nl.load/nl.store")
        if not (isinstance(other, ast.Subscript) and isinstance(other.value, ast.Name)
                and other.value.id in self.allocs):
            raise NotApplicable("the on-chip side of a block DMA is not a compiler-style tensor")
        want = C.arange(src, node)[1]
        match = [i for i, e in enumerate(C.entries(other) or []) for _n, _k, pat in C.aranges(src, e) if pat == want]
        if len(match) != 1:
            raise NotApplicable("cannot align the block axis of a DMA")
        key = (other.value.id, match[0])
        if self.xlocal.setdefault(key, width) != width:
            raise NotApplicable("a block axis with two widths")

    def _close(self):
        """Fixpoint: chunk forms on block axes define chunk loops; chunk loops mark the axes they walk."""
        src = self.src
        self.inside_acc = {}
        for name, a in self.allocs.items():
            self.inside_acc[name] = [(sub, k) for sub, k in C.accesses(src, self.func, a) if id(sub) in self.inside]
        changed = True
        while changed:
            changed = False
            for name, subs in self.inside_acc.items():
                a = self.allocs[name]
                for sub, _k in subs:
                    for i, e in enumerate(C.entries(sub)):
                        if i <= a.par or a.dims[i] is None:
                            continue
                        loc = self._local(_terms(src, e), a.dims[i], 1)
                        if loc is None or loc[0] != "chunk":
                            continue
                        if (name, i) in self.xlocal and loc[1] not in self.chunks:
                            self._add_chunk(loc[1])
                            changed = True
                        if loc[1] in self.chunks and (name, i) not in self.xlocal:
                            self.xlocal[(name, i)] = a.dims[i]
                            changed = True

    def _check_tensors(self, bare):
        src = self.src
        for (name, axis), width in self.xlocal.items():
            a = self.allocs[name]
            if axis <= a.par or a.dims[axis] != width:
                raise NotApplicable("a block axis whose extent is not the block width")
            for sub, _kind in C.accesses(src, self.func, a):
                if id(sub) not in self.inside:
                    raise NotApplicable(f"{name} holds a block and is used outside the loop")
                e = C.entries(sub)[axis]
                terms = _terms(src, e)
                loc = self._local(terms, width, 1)
                if loc is None or len(terms) != (1 if loc[0] == "arange" else 1 + (loc[3] is not None)):
                    raise NotApplicable(f"{name} is accessed at its block axis other than by arange/chunks")
                if loc[0] == "arange":
                    self._narrow(loc[1])
                elif loc[1] not in self.chunks:
                    raise NotApplicable("a chunk loop that is not one of the block's")
            self._edit(a.entries[axis], str(self._scaled(width)))
        for name, q in bare.items():
            a = self.allocs[name]
            if a.dims[q] != self.trip:
                raise NotApplicable(f"{name}'s block dim for the loop is not its trip count")
            for sub, _kind in C.accesses(src, self.func, a):
                e = C.entries(sub)
                if id(sub) not in self.inside or not (isinstance(e[q], ast.Name) and e[q].id == self.x):
                    raise NotApplicable(f"{name} accessed without the loop variable")
            self._edit(a.entries[q], str(self.new_trip()))
        for j, tc in self.chunks.items():
            self._edit(self.loops[j].iter.args[0], str(self._scaled(tc)))

    def _check_chunk_uses(self):
        """Every occurrence of a chunk loop variable: a bare block index of an on-chip tensor, or part of
        an x-term expression / a block-axis entry (already classified)."""
        src = self.src
        for j, _tc in self.chunks.items():
            lp = self.loops[j]
            for n in walk(self.loop):
                if not (isinstance(n, ast.Name) and n.id == j) or n is lp.target:
                    continue
                sub, idx = _holder(src, n)
                if sub is not None and isinstance(sub.value, ast.Name) and sub.value.id in self.allocs:
                    if idx < self.allocs[sub.value.id].par:
                        self._grow_block_dim(self.allocs[sub.value.id], idx, j)
                        continue
                    if (sub.value.id, idx) in self.xlocal:
                        continue  # c * j alone at a block axis
                    raise NotApplicable(f"chunk loop variable {j} at an axis that is not the block's")
                r = _root(src, n)
                terms = _terms(src, r)
                if any(t[0] == "var" and t[1] == self.x for t in terms):
                    continue  # an x term, classified in plan()
                hsub, hidx = _holder(src, r)
                if hsub is None or not isinstance(hsub.value, ast.Name) or (hsub.value.id, hidx) not in self.xlocal:
                    raise NotApplicable(f"chunk loop variable {j} used in another way")

    def _grow_block_dim(self, a, idx, j):
        """A widened block's chunk loop ``j`` runs more often: the block dimension it indexes grows with it
        (a narrowed one keeps its extent: fewer of its blocks are used)."""
        if self.r <= 1:
            return
        need = self._scaled(self.chunks[j])
        if a.dims[idx] is None:
            raise NotApplicable(f"{a.name}: a block dimension of unknown extent indexed by chunk loop {j}")
        if need > a.dims[idx]:
            if a.dims[idx] != self.chunks[j]:
                raise NotApplicable(f"{a.name}: block dimension {idx} is not chunk loop {j}'s count")
            self._edit(a.entries[idx], str(need))

    def _check_statements(self):
        """A statement that narrows an nl.arange(W) narrows every nl.arange(W) of the same expansion in it."""
        src = self.src
        stmts = {}
        for n in walk(self.loop):
            if isinstance(n, ast.Subscript) and id(n) in self.narrowed:
                st = A.statement_of(src, n)
                stmts[id(st)] = st
        for st in stmts.values():
            narrowed = {(C.arange(src, n)[0], C.arange(src, n)[1]) for n in walk(st)
                        if isinstance(n, ast.Subscript) and id(n) in self.narrowed}
            for n in walk(st):
                if isinstance(n, ast.Subscript) and id(n) not in self.narrowed:
                    a = C.arange(src, n)
                    if a is not None and (a[0], a[1]) in narrowed:
                        raise NotApplicable("a statement mixes the block's arange with another of its width")

    def _invariant_loads(self):
        """True if the loop loads data that does not depend on it (its traffic grows f times)."""
        src = self.src
        for n in walk(self.loop):
            if isinstance(n, ast.Call) and src.call_name(n) == "nl.load":
                args = A.call_args(n, "nl.load") or {}
                if self.x not in A.read_names(args.get("src", n)):
                    return True
        return False

    def panel_bytes(self):
        """Largest per-iteration footprint (bytes per partition) of a block tensor filled by loads."""
        src = self.src
        best = 0
        for name in {n for n, _a in self.xlocal}:
            a = self.allocs[name]
            if a.buffer != "sbuf" or a.free_bytes() is None:
                continue
            for sub, kind in C.accesses(src, self.func, a):
                stmt = A.statement_of(src, sub)
                if kind != "write" or not (isinstance(stmt, ast.Assign) and src.call_name(stmt.value) == "nl.load"):
                    continue
                blocks = 1
                for i, e in enumerate(C.entries(sub)[:a.par]):
                    if isinstance(e, ast.Name) and e.id in self.loops and a.dims[i] is not None:
                        blocks *= a.dims[i]
                best = max(best, blocks * a.free_bytes())
        return best


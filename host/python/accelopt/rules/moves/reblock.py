"""Rule ``reblock``: make the block an outer GEMM loop walks f times wider, so the operand its inner loop
loads is read f times less often; narrow the inner loop's panel where the wider block needs the room.

A compiler-style GEMM (nki-facts §1.4) loads, per iteration of an outer loop, a block of one operand (the
published transpose_matmul: a 1024-column block of lhs, all of K, 64 KiB per partition) and then walks
the other operand in panels (rhs, 1024 columns of all of K, 64 KiB per partition), which do not depend on
the outer loop: all of rhs is read from HBM once per outer iteration (4 x 89.6 MB there). With an outer
block f times wider the loop runs f times fewer iterations and rhs is read f times less often; the wider
block must still fit SBUF beside a panel, so the inner panel is made g times narrower when
``f * block + panel`` exceeds usable SBUF (176 KiB per partition on trn1, nki-facts §3.1)::

    v4 = nl.ndarray((4, 16, nl.par_dim(128), 1024), ...)     ->  (2, 16, nl.par_dim(128), 2048)
    for i0 in nl.affine_range(4):                            ->  nl.affine_range(2)
        ... nl.load(v1[..., 1024 * i0 + nl.arange(1024)...])  ->  2048 * i0 + nl.arange(2048)
        for i2 in nl.affine_range(11):                       ->  nl.affine_range(22)   (g = 2: split_block)
            for i4 in nl.affine_range(8):                    ->  nl.affine_range(16)   (chunk loop of the block)
                nl.store(v3[8 * i0 + i4, ...], ...)          ->  16 * i0 + i4

The outer edit is ``split_block``'s with the ratio f instead of 1/f (same preconditions, proven on the AST:
module docstring of ``split_block``; block dimensions indexed by the block's chunk loops grow with them);
the inner one is ``split_block``'s own (g in 1, 2, 4; g = 1: no inner edit). Further preconditions: the
outer trip count is a multiple of f; the inner loop is inside the outer one and its loads do not depend on
the outer variable (they are the re-read operand), and together they load more than half of usable SBUF
per outer iteration (88 KiB: less would stay resident, so nothing is re-read); the two edits touch
disjoint nodes; ``f * block + panel / g`` fits usable SBUF, with g the smallest factor that makes it fit.
Knob: f in (2, 4).

Effect: HBM bytes of the re-read operand divided by f (nki-facts §3.4, §5.2); TensorE work unchanged.
The DMA count does not fall with a narrowed panel (as many rhs loads of half the size; the output is
stored in panel-wide pieces, so its stores double). The NKI matrix-multiplication tutorial's blocking
step chooses block sizes so that the loaded tiles are reused for as many output tiles as the SBUF limit
allows (S3
``tutorials/matrix_multiplication.rst``). Measured (emulated trn1, published transpose_matmul): 9.291 ms
-> 8.535 ms for ``i0*2+i2/2`` (HBM reads 416 -> 243 MB), docs/rules.md.
"""
import ast
from fractions import Fraction

from .. import analysis as A
from .. import cstyle as C
from ..base import Candidate
from ..errors import NotApplicable
from ..block_rescale import RESIDENT_BYTES, BlockRescale
from ..walk import walk

NAME = "reblock"
SUMMARY = "Widen the block an outer GEMM loop walks (narrowing the inner panel if needed) so the operand the inner loop loads is re-read less often."
EFFECT = ("HBM bytes: the operand the inner loop loads for every outer block is read f times less often, "
          "the wider block still fitting SBUF beside its panel (nki-facts §3.1, §3.4, §5.2)")
GAIN = 0.3  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"dma": 0.9, "tensor": 0.2}  # resource -> weight (docs/rules.md)
ORDER = 25  # position among the built-in rules when proposals tie (docs/rules.md)

SBUF_USABLE = 176 * 1024  # bytes per partition: 192 KiB less the compiler's 16 KiB reserve (nki-facts §3.1)
FACTORS = (2, 4)
PANEL_FACTORS = (1, 2, 4)


def _loads_of(src, loop):
    return [n for n in walk(loop) if isinstance(n, ast.Call) and src.call_name(n) == "nl.load"]


def _reread_bytes(src, allocs, loop, x):
    """Bytes per partition that ``loop`` loads per iteration of the loop over ``x`` without depending on
    ``x`` (its tiles times the trip counts of the loops between), or 0."""
    total = 0
    for call in _loads_of(src, loop):
        args = A.call_args(call, "nl.load") or {}
        if x in A.read_names(args.get("src", call)):
            return 0  # the inner loop also loads blocks of the outer one: not a pure re-read panel
        stmt = A.statement_of(src, call)
        dst = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        if not (isinstance(dst, ast.Subscript) and isinstance(dst.value, ast.Name) and dst.value.id in allocs):
            return 0
        size = allocs[dst.value.id].free_bytes()
        if size is None:
            return 0
        node = src.parents.get(stmt)
        reps = 1
        while node is not None and node is not src.parents.get(loop):
            if isinstance(node, ast.For):
                t = C.trip(src, node)
                if t is None:
                    return 0
                reps *= t
            node = src.parents.get(node)
        total += size * reps
    return total


class _Reblock:
    def __init__(self, src, func, allocs, outer, trip, inner, inner_trip, f):
        self.src, self.func, self.allocs = src, func, allocs
        self.outer, self.trip, self.inner, self.inner_trip, self.f = outer, trip, inner, inner_trip, f

    def plan(self):
        """(outer BlockRescale, inner BlockRescale or None, g, block bytes, panel bytes); NotApplicable otherwise."""
        src, x = self.src, self.outer.target.id
        if self.trip % self.f:
            raise NotApplicable("the factor does not divide the outer trip count")
        reread = _reread_bytes(src, self.allocs, self.inner, x)
        if reread <= RESIDENT_BYTES:
            raise NotApplicable("the inner loop re-reads no operand that SBUF could not hold")
        wide = BlockRescale(src, self.func, self.allocs, self.outer, self.trip, self.f)
        if wide.plan(benefit=False) is None:
            raise NotApplicable("the outer loop walks no block")
        block = wide.panel_bytes()
        if block == 0:
            raise NotApplicable("the outer loop loads no block")
        for g in PANEL_FACTORS:
            narrow, panel = None, reread // self.inner_trip
            if g > 1:
                narrow = BlockRescale(src, self.func, self.allocs, self.inner, self.inner_trip, Fraction(1, g))
                try:
                    if narrow.plan(benefit=False) is None:
                        continue
                except NotApplicable:
                    continue
                panel = narrow.panel_bytes()
            if self.f * block + panel // g > SBUF_USABLE:
                continue
            if narrow is not None and set(wide.edits) & set(narrow.edits):
                raise NotApplicable("the two loops' edits overlap")
            return wide, narrow, g, block, panel
        raise NotApplicable("the wider block does not fit SBUF beside any panel")

    def edits(self):
        wide, narrow, g, _block, _panel = self.plan()
        src = self.src
        out = [src.replace_node(self.outer.iter.args[0], str(wide.new_trip()))]
        out += [src.replace_node(node, text) for node, text in wide.edits.values()]
        if narrow is not None:
            out.append(src.replace_node(self.inner.iter.args[0], str(narrow.new_trip())))
            out += [src.replace_node(node, text) for node, text in narrow.edits.values()]
        return out


def _site(outer, inner, f, g):
    site = f"{outer.target.id}*{f}"
    return site + (f"+{inner.target.id}/{g}" if g > 1 else "")


def candidates(src):
    out = []
    for func, allocs, outer, t in C.counted_loops(src, 2):
        if not isinstance(outer.target, ast.Name):
            continue
        inners = [n for n in walk(outer) if isinstance(n, ast.For) and n is not outer
                  and isinstance(n.target, ast.Name) and C.trip(src, n)]
        for f in FACTORS:
            for inner in inners:
                rb = _Reblock(src, func, allocs, outer, t, inner, C.trip(src, inner), f)
                try:
                    _wide, _narrow, g, block, panel = rb.plan()
                except NotApplicable:
                    continue
                out.append(_cand(src, func, outer, t, inner, f, g, block, panel))
                break  # one re-read panel loop per outer loop and factor
    return out


def _cand(src, func, outer, trip, inner, f, g, block, panel):
    x, y = outer.target.id, inner.target.id
    inner_trip = C.trip(src, inner)

    def edits():
        rb = _Reblock(src, func, C.allocations(src, func), outer, trip, inner, inner_trip, f)
        _wide, _narrow, g2, _b, _p = rb.plan()
        if g2 != g:
            raise NotApplicable("reblock: the site changed")
        return rb.edits()

    narrowed = f"; the panel of '{y}' {g}x narrower ({panel // 1024} KiB -> {panel // 1024 // g} KiB)" if g > 1 else ""
    return Candidate(src, _site(outer, inner, f, g),
                     f"make the block the loop over '{x}' walks {f}x wider ({block // 1024} KiB -> "
                     f"{f * block // 1024} KiB per partition){narrowed}: what the loop over '{y}' loads is read "
                     f"{trip} -> {trip // f} times", edits,
                     {"loop": x, "factor": f, "inner": y, "panel_factor": g, "block_bytes": block,
                      "panel_bytes": panel},
                     {"dma": 0.9, "tensor": 0.2}, 57.0 if f == 2 else 53.0)

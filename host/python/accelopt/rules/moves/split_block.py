"""Rule ``split_block``: make the block an outer loop walks f times narrower, so its tiles fit SBUF twice.

Compiler-style GEMMs (nki-facts §1.4) walk the output in blocks (``for i0 in
nl.affine_range(12)`` over columns ``1024 * i0 + nl.arange(1024)``) and load,
per block, a whole K x W panel of one operand that the tiles of the other
dimension then reuse. The published matmul's rhs panel is 5120 x 1024 fp32,
160 KiB per partition: beside the other tiles it does not fit the 176 KiB of
SBUF, and its measured 9.06 GB of HBM reads match re-issuing the panel for
every row tile (nki-facts §5.2); the published transpose_matmul's rhs panels
(64 KiB each, beside a 64 KiB lhs block) fit once but not twice, so the next
block's panel cannot load while TensorE works on this one. With W / f the
panel is f times smaller; what the loop loads without depending on it is read
f times as often (matmul's lhs row tiles, and their TensorE transposes).

Before / after (f = 2; the loop runs f*T times over blocks of W/f; *chunk
loops* that walk the block in c-wide pieces run 1/f as many times; on-chip
tiles that hold the block lose (f-1)/f of that axis; block dimensions indexed
by the loop grow f times)::

    v6 = nl.ndarray((12, 5, 8, nl.par_dim(128), 1024), ...)      ->  (24, 5, 8, nl.par_dim(128), 512)
    for i0 in nl.affine_range(12):                                ->  nl.affine_range(24)
        ... nl.load(v2[..., nl.arange(1024)[None, :] + 1024 * i0]) ->  nl.arange(512)[None, :] + 512 * i0
            for i6 in nl.affine_range(2):                         ->  nl.affine_range(1)
                ... v6[i0, i7, i8, ..., 512 * i6 + nl.arange(512)[None, :]] ...

Preconditions (proven on the AST): the loop is ``nl.affine_range(T)``, T a
literal; its variable x occurs only (a) as a bare block index of an on-chip
tensor whose dim there is T, accessed only inside the loop and always with x
there, or (b) in a term ``W * x`` of an index or mask expression whose
x-dependent rest is ``nl.arange(W)``, ``c * j + nl.arange(c)`` or ``c * j``
(j a chunk loop ``nl.affine_range(W / c)``), with the term's sign; f divides
every such W and every chunk loop's trip count. On-chip axes that hold the
block (the destination axis of such a load, the value axis of such a store,
every axis a chunk loop walks) have extent W and are accessed only inside
the loop, as ``nl.arange(W)`` or through chunk loops; a statement that
narrows an ``nl.arange(W)`` narrows every other ``nl.arange(W)`` of the same
expansion in it; chunk loop variables occur only in such expressions and as
bare block indices. Benefit condition: a panel loaded per iteration spans at
least 64 KiB per partition (its double buffer and the other operand's tiles
exceed SBUF), and more than 88 KiB (half of SBUF: it cannot stay resident, so
it is re-issued) when the loop also loads data that does not depend on it
(whose traffic the split multiplies by f: transpose_matmul's M-block loop
re-reads all of rhs per block, so halving it buys SBUF with HBM traffic and
is not proposed). Knob: f in (2, 4), each a plan where the counts divide.

Effect: SBUF working set (nki-facts §3.1, §3.4, §3.6, §5.2): the reused panel
fits (no re-issue of its loads) or fits twice (the next one loads under this
one's matmuls). The NKI matrix-multiplication tutorial sizes its blocks so
that the configuration "keeps all the tensors within the SBUF limit as much
as possible" and notes that beyond it "spilling and reloading ... will
happen" (S3 ``tutorials/matrix_multiplication.rst``).
"""
import ast
from fractions import Fraction

from .. import analysis as A
from .. import cstyle as C
from ..base import Candidate
from ..block_rescale import BlockRescale
from ..errors import NotApplicable

NAME = "split_block"
SUMMARY = "Narrow the free-dimension block an outer loop walks (W -> W/2, W/4) so its reused tiles fit SBUF."
EFFECT = ("SBUF working set: the panel reused across the other dimension fits (no re-issued loads) or fits "
          "twice (the next panel loads under this one's matmuls) (nki-facts §3.1, §3.4, §3.6, §5.2)")
GAIN = 0.3  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"dma": 0.8, "tensor": 0.3}  # resource -> weight (docs/rules.md)
ORDER = 24  # position among the built-in rules when proposals tie (docs/rules.md)

FACTORS = (2, 4)


def candidates(src):
    out = []
    for func, allocs, loop, t in C.counted_loops(src, 1):
        for f in FACTORS:
            try:
                plan = BlockRescale(src, func, allocs, loop, t, Fraction(1, f)).plan()
            except NotApplicable:
                plan = None
            if plan is not None:
                out.append(_cand(src, loop, t, f, plan))
    return out


def _cand(src, loop, trip, f, plan):
    x = loop.target.id

    def edits():
        func = A.enclosing(src, loop, (ast.FunctionDef, ast.AsyncFunctionDef))
        split = BlockRescale(src, func, C.allocations(src, func), loop, trip, Fraction(1, f))
        if split.plan() is None:
            raise NotApplicable("split_block: the site changed")
        out = [src.replace_node(loop.iter.args[0], str(f * trip))]
        out += [src.replace_node(node, text) for node, text in split.edits.values()]
        return out

    widths = "/".join(str(w) for w in plan["widths"])
    new = "/".join(str(w // f) for w in plan["widths"])
    return Candidate(src, f"{x}/{f}", f"make the block the loop over '{x}' walks {f}x narrower ({widths} -> {new}; "
                     f"the panel loaded per block: {plan['panel'] // 1024} KiB -> {plan['panel'] // 1024 // f} KiB "
                     f"per partition)", edits,
                     {"loop": x, "factor": f, "tensors": plan["tensors"], "chunks": plan["chunks"],
                      "panel_bytes": plan["panel"]},
                     {"dma": 0.8, "tensor": 0.3}, 58.0 if f == 2 else 54.0)

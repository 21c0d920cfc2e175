"""Rule ``merge_loads``: the loads a block loop issues one per iteration become one DMA.

Compiler-style kernels (nki-facts §1.4) fill the blocks of an SBUF tensor one
``nl.load`` per loop iteration, even when the loads are small and all the
blocks feed TensorE (bmm's lhs row tiles, 32 KiB each)::

    v7 = nl.ndarray((4, 16, 4, 8, nl.par_dim(128), 64), dtype=np.float32, name='', buffer=nl.sbuf)
    ...
                for i3 in nl.affine_range(8):
                    v7[i1, i0, i2, i3, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.load(v1[i0, 1024 * i2 + 128 * i3 + nl.arange(128)[:, None], nl.arange(64)[None, :]], dtype=np.float32, mask=None)
                    v8[...] = nisa.nc_matmul(v7[i1, i0, i2, i3, nl.arange(128)[:, None], nl.arange(64)[None, :]], ...)

After (the loop's block dimension moves into the tile's free dimensions, the
block-dimension migration guide's form for blocks that are alive together,
and the loop variable becomes an ``nl.arange`` of the new middle axis)::

    v7 = nl.ndarray((4, 16, 4, nl.par_dim(128), 8, 64), dtype=np.float32, name='', buffer=nl.sbuf)
    ...
                v7[i1, i0, i2, nl.arange(128)[:, None, None], nl.arange(8)[None, :, None], nl.arange(64)[None, None, :]] = nl.load(v1[i0, 1024 * i2 + 128 * nl.arange(8)[None, :, None] + nl.arange(128)[:, None, None], nl.arange(64)[None, None, :]], dtype=np.float32, mask=None)
                for i3 in nl.affine_range(8):
                    v8[...] = nisa.nc_matmul(v7[i1, i0, i2, nl.arange(128)[:, None], i3, nl.arange(64)[None, :]], ...)

Every read ``D[..., j', P, F]`` becomes ``D[..., P, j', F]``. When the loop
body holds more than the load (as here), the merged load goes in front of
the loop (the loads read only kernel inputs, so their order does not
matter); a loop holding only the load is replaced by it.

Preconditions (proven on the AST): the loop is ``nl.affine_range(n)`` with a
literal n >= 2; the statement is ``D[...] = nl.load(S[...], dtype=..., mask=...)``
directly in its body (no other keywords); ``D`` is a compiler-style SBUF
allocation of rank ``par + 2`` (one free dimension) with literal dims, written
only by this statement; the destination index is the loop variable at exactly
one block position q (dims[q] == n), block entries free of it and of aranges,
then ``nl.arange(P)[:, None]`` and ``nl.arange(F)[None, :]`` over the whole
tile; ``S`` is a kernel parameter the kernel never writes; the source index
and the mask hold only 2-D arange expansions and affine occurrences of the
loop variable, and read only loop variables of enclosing loops; every other
mention of ``D`` is a TensorE operand (``nc_matmul``/``matmul``: the K tiles of
an accumulation group are needed together anyway) read with an arange-free
entry at q, after the load in the source; each load is latency-bound: its
bytes over ceil(P/8) DMA engines at 17 B/ns take less than the ~1.3 us DMA
start latency (nki-facts §3.1); the merged tile is at most 32 KiB per
partition (two of them within a third of SBUF: a merged tile is prefetched
whole, single blocks can load while earlier ones are still in use); the
blocks of ``D`` one iteration of the outermost loop around the load fills are
at most 88 KiB per partition (a larger panel is re-issued however it is
tiled; only a residency policy's choice of tiles would change).

Effect: one DMA trigger and completion semaphore instead of n ("each DMA
transfer starts with a DMA trigger from a NeuronCore and ends with a
semaphore update", S4 nki-dma-overview), so n start latencies become one.
The NKI matrix-multiplication tutorial's last step changes the loaded tiles'
layout this way ("optimize the layout of the loaded tiles to improve DMA
efficiency ... arranging the order of dimensions in nl.ndarray", S3).
"""
import ast

from .. import analysis as A
from .. import cstyle as C
from ..base import Candidate
from ..block_rescale import RESIDENT_BYTES  # a larger panel is re-issued however it is tiled
from ..errors import NotApplicable
from ..source import Edit
from ..walk import walk

NAME = "merge_loads"
SUMMARY = "Load all the blocks a loop fills with one DMA (the block dimension moves into the free dimensions)."
EFFECT = ("DMA count: one trigger, completion semaphore and start latency instead of one per small "
          "(latency-bound) block load (nki-facts §3.1, §3.4)")
GAIN = 0.08  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"dma": 0.6, "instructions": 0.3}  # resource -> weight (docs/rules.md)
ORDER = 22  # position among the built-in rules when proposals tie (docs/rules.md)

MAX_BYTES = 32 * 1024  # per partition: two merged tiles stay within a third of SBUF (nki-facts §3.1)
DMA_LATENCY_NS = 1300.0  # DMA start latency (semaphore to start), nki-facts §3.1 [D S4 DMA bandwidth guide]
DMA_BYTES_PER_NS = 17.0  # per DMA engine; a P-partition transfer uses ceil(P/8) engines (nki-facts §3.1)
_LOAD_KEYS = {"src", "dtype", "mask"}


def candidates(src):
    """One candidate per mergeable (load statement, loop)."""
    out = []
    for func in A.functions(src.tree):
        try:
            out += _sliced(src, func)
        except NotApplicable:
            pass
        allocs = C.allocations(src, func)
        if not allocs:
            continue
        params = {a.arg for a in func.args.args + func.args.posonlyargs + func.args.kwonlyargs}
        written = A.written_roots(src, func)
        for loop in walk(func):
            if not isinstance(loop, ast.For):
                continue
            n = C.trip(src, loop)
            if n is None or n < 2 or not src.owns_lines(loop):
                continue
            for stmt in loop.body:
                try:
                    c = _candidate(src, func, allocs, params, written, loop, n, stmt)
                except NotApplicable:
                    c = None
                if c is not None:
                    out.append(c)
    return out


def _candidate(src, func, allocs, params, written, loop, n, stmt):
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript)
            and isinstance(stmt.targets[0].value, ast.Name) and src.call_name(stmt.value) == "nl.load"):
        return None
    j = loop.target.id
    dst = stmt.targets[0]
    d = allocs.get(dst.value.id)
    if d is None or d.buffer != "sbuf" or d.rank != d.par + 2 or any(x is None for x in d.dims):
        return None
    args = A.call_args(stmt.value, "nl.load")
    if args is None or "src" not in args or set(args) - _LOAD_KEYS or not src.owns_lines(stmt):
        return None
    ent = C.entries(dst)
    if ent is None or len(ent) != d.rank:
        return None
    # destination: j at one block position, then the whole (P, F) tile
    q = [i for i in range(d.par) if isinstance(ent[i], ast.Name) and ent[i].id == j]
    if len(q) != 1 or d.dims[q[0]] != n:
        return None
    q = q[0]
    for i in range(d.par):
        if i != q and (j in A.read_names(ent[i]) or C.aranges(src, ent[i])):
            return None
    p_ar, f_ar = C.arange(src, ent[d.par]), C.arange(src, ent[d.par + 1])
    if p_ar != (d.dims[d.par], (True, False)) or f_ar != (d.dims[d.par + 1], (False, True)):
        return None
    if n * d.dims[d.par + 1] * d.itemsize > MAX_BYTES:
        return None
    p_rows = d.dims[d.par]
    one_dma = p_rows * d.dims[d.par + 1] * d.itemsize
    if one_dma / (-(-p_rows // 8) * DMA_BYTES_PER_NS) >= DMA_LATENCY_NS:
        return None  # each load already moves more than its fixed latency's worth of bytes
    if _panel_bytes(src, loop, ent, d) > RESIDENT_BYTES:
        return None
    # source: a kernel input never written; affine in j; only 2-D expansions
    s = args["src"]
    root = A.root_name(s)
    if not isinstance(s, ast.Subscript) or not isinstance(s.value, ast.Name) or root not in params or root in written:
        return None
    outer = set(C.loop_vars(src, loop))
    mods = C.module_names(src)
    exprs = [s.slice] + ([args["mask"]] if "mask" in args else [])
    for e in exprs:
        for _node, _k, pattern in C.aranges(src, e):
            if pattern not in ((True, False), (False, True)):
                return None
        if not C.linear_in(src, e, j):
            return None
        if A.read_names(e) - outer - mods - {j}:
            return None
    if j not in A.read_names(s.slice):
        return None
    for i in range(d.par):
        if i != q and A.read_names(ent[i]) - outer - mods:
            return None
    # every other mention of D: a read after the load, arange-free at q
    reads = []
    for sub, kind in C.accesses(src, func, d):
        if sub is dst:
            continue
        if kind != "read":
            return None
        e = C.entries(sub)
        if C.aranges(src, e[q]) or (sub.lineno, sub.col_offset) < (stmt.end_lineno, stmt.end_col_offset):
            return None
        if not _tensor_operand(src, sub):
            return None
        reads.append(sub)
    others = [b for b in loop.body if b is not stmt and not C.is_note(b)]
    return _cand(src, loop, stmt, d, q, n, ent, s, args, reads, j, alone=not others)


def _panel_bytes(src, loop, ent, d):
    """Bytes per partition of the blocks of ``d`` one iteration of the outermost loop around the load
    fills (every block position indexed by the variable of a loop inside it)."""
    outer = C.loop_vars(src, loop)  # innermost first, the loop itself excluded
    inner = {loop.target.id} | set(outer[:-1])
    blocks = 1
    for i in range(d.par):
        if isinstance(ent[i], ast.Name) and ent[i].id in inner:
            blocks *= d.dims[i]
    return blocks * d.free_bytes()


def _tensor_operand(src, sub):
    """True if ``sub`` is an operand of a TensorE matmul (``nisa.nc_matmul`` / ``nl.matmul``)."""
    holder = src.parents.get(sub)
    if isinstance(holder, ast.keyword):
        return holder.arg in ("stationary", "moving", "x", "y") and \
            src.call_name(src.parents.get(holder)) in ("nisa.nc_matmul", "nl.matmul")
    return isinstance(holder, ast.Call) and src.call_name(holder) in ("nisa.nc_matmul", "nl.matmul") \
        and sub in holder.args[:2]


def _cand(src, loop, stmt, d, q, n, ent, s, args, reads, j, alone):
    name = d.name

    def edits():
        out = []
        # allocation: the block dim q moves behind the partition dim
        order = [i for i in range(d.par) if i != q] + [d.par, q] + list(range(d.par + 1, d.rank))
        out.append(src.replace_node(d.shape, "(" + C.tuple_text(src, [d.entries[i] for i in order]) + ")"))
        for sub in reads:
            e = C.entries(sub)
            out.append(src.replace_node(sub.slice, C.tuple_text(src, [e[i] for i in order])))
        # the merged load
        nl = src.segment(ent[d.par].value.func.value)  # the kernel's own nl alias
        j_text = f"{nl}.arange({n})[None, :, None]"
        repl = {}
        exprs = [s.slice] + ([args["mask"]] if "mask" in args else [])
        for e in exprs:
            for node, k, pattern in C.aranges(src, e):
                repl[id(node)] = f"{src.segment(node.value)}[{':, None, None' if pattern[0] else 'None, None, :'}]"
            for node in walk(e):
                if isinstance(node, ast.Name) and node.id == j:
                    repl[id(node)] = j_text
        p, f = d.dims[d.par], d.dims[d.par + 1]
        block = [src.segment(ent[i]) for i in range(d.par) if i != q]
        index = block + [f"{nl}.arange({p})[:, None, None]", j_text, f"{nl}.arange({f})[None, None, :]"]
        target = f"{name}[{', '.join(index)}]"
        value = C.replaced(src, stmt.value, repl)
        indent = src.indent_of(loop)
        text = f"{indent}{target} = {value}\n"
        if alone:
            lo, hi = src.line_span(loop.lineno, loop.end_lineno)
            out.append(Edit(lo, hi, text))
        else:
            out.append(src.delete_stmt(stmt, loop.body))
            at, _ = src.line_span(src.comment_start(loop), loop.lineno)
            out.append(Edit(at, at, text))
        return out

    bytes_pp = n * d.dims[d.par + 1] * d.itemsize
    return Candidate(src, f"{name}@{j}", f"load the {n} blocks of '{name}' that the loop over '{j}' fills with one "
                     f"DMA ({bytes_pp // 1024} KiB per partition; the block dimension moves into the free dimensions)",
                     edits, {"tensor": name, "loop": j, "blocks": n, "bytes_per_partition": bytes_pp},
                     {"dma": 0.6, "instructions": 0.3}, 48.0)


# --- the hand-written form: T[:, k * W:(k + 1) * W] = nl.load(S[k * P:(k + 1) * P, lo:hi]) --------------------

def _kslice(node, k):
    """E (the node) when ``node`` is the slice ``k * E:(k + 1) * E``, else None."""
    if not (isinstance(node, ast.Slice) and node.step is None and isinstance(node.lower, ast.BinOp)
            and isinstance(node.lower.op, ast.Mult) and isinstance(node.upper, ast.BinOp)
            and isinstance(node.upper.op, ast.Mult)):
        return None
    lo, hi = node.lower, node.upper
    if not (isinstance(lo.left, ast.Name) and lo.left.id == k):
        return None
    plus = hi.left
    if not (isinstance(plus, ast.BinOp) and isinstance(plus.op, ast.Add) and isinstance(plus.left, ast.Name)
            and plus.left.id == k and isinstance(plus.right, ast.Constant) and plus.right.value == 1):
        return None
    return lo.right if ast.dump(lo.right) == ast.dump(hi.right) else None


def _width_of(node):
    """(start node, width node) of ``x * E:(x + 1) * E`` (width E) or ``a:a + E``; None otherwise."""
    if not (isinstance(node, ast.Slice) and node.step is None and node.lower is not None):
        return None
    if isinstance(node.lower, ast.BinOp) and isinstance(node.lower.op, ast.Mult) \
            and isinstance(node.lower.left, ast.Name):
        e = _kslice(node, node.lower.left.id)
        if e is not None:
            return node.lower, e
    up = node.upper
    if isinstance(up, ast.BinOp) and isinstance(up.op, ast.Add) and ast.dump(up.left) == ast.dump(node.lower):
        return node.lower, up.right
    return None


def _sliced(src, func):
    """Candidates of the hand-written form (module docstring of this file, "hand-written kernels")."""
    out = []
    defs = A.bindings(func)
    for loop in walk(func):
        if not (isinstance(loop, ast.For) and A.is_range_loop(src, loop, ("nl.affine_range",))
                and isinstance(loop.target, ast.Name) and len(loop.iter.args) == 1 and not loop.iter.keywords):
            continue
        body = [b for b in loop.body if not C.is_note(b)]
        if len(body) != 1 or not src.owns_lines(loop):
            continue
        c = _sliced_candidate(src, func, defs, loop, body[0])
        if c is not None:
            out.append(c)
    return out


def _sliced_candidate(src, func, defs, loop, stmt):
    k = loop.target.id
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript)
            and isinstance(stmt.targets[0].value, ast.Name) and src.call_name(stmt.value) == "nl.load"):
        return None
    dst = stmt.targets[0]
    t = dst.value.id
    args = A.call_args(stmt.value, "nl.load")
    if args is None or set(args) - {"src", "dtype"}:
        return None
    s = args["src"]
    if not (isinstance(dst.slice, ast.Tuple) and len(dst.slice.elts) == 2 and isinstance(s, ast.Subscript)
            and isinstance(s.value, ast.Name) and isinstance(s.slice, ast.Tuple) and len(s.slice.elts) == 2):
        return None
    whole, dslice = dst.slice.elts
    if not (isinstance(whole, ast.Slice) and whole.lower is None and whole.upper is None and whole.step is None):
        return None
    w = _kslice(dslice, k)
    p = _kslice(s.slice.elts[0], k)
    free = _width_of(s.slice.elts[1])
    if w is None or p is None or free is None or ast.dump(free[1]) != ast.dump(w):
        return None
    if k in A.read_names(s.slice.elts[1]) or k in A.read_names(s.value) or A.read_names(loop.iter) & \
            {n.id for n in A.name_stores(loop)}:
        return None
    # T: one 2-D SBUF tile of P partitions, written only here
    tdefs = defs.get(t, [])
    if len(tdefs) != 1 or tdefs[0] is None or src.call_name(tdefs[0]) != "nl.ndarray":
        return None
    shape = tdefs[0].args[0] if tdefs[0].args else None
    if not (isinstance(shape, ast.Tuple) and len(shape.elts) == 2 and ast.dump(shape.elts[0]) == ast.dump(p)):
        return None
    if any(kw.arg == "buffer" and src.qualname(kw.value) != "nl.sbuf" for kw in tdefs[0].keywords):
        return None
    rows, width = A.const_value(src, p), A.const_value(src, w)
    if rows is None or width is None or rows > 128:
        return None
    if rows * width * 4 / (-(-rows // 8) * DMA_BYTES_PER_NS) >= DMA_LATENCY_NS:
        return None
    if A.root_name(s) in A.written_roots(src, func):
        return None
    # every other use of T: a TensorE operand, here or in a module-level helper it is passed to
    for n in walk(func):
        if not (isinstance(n, ast.Name) and n.id == t) or isinstance(n.ctx, ast.Store) or src.parents.get(n) is dst:
            continue
        if not _tensor_use(src, n):
            return None
    nl = src.prefix("nl")
    n_text = src.segment(loop.iter.args[0])

    def edits():
        ks = f"{nl}.arange({n_text})[None, :, None]"
        target = (f"{t}[{nl}.arange({src.segment(p)})[:, None, None], {src.segment(w)} * {ks} + "
                  f"{nl}.arange({src.segment(w)})[None, None, :]]")
        source = (f"{src.segment(s.value)}[{src.segment(p)} * {ks} + {nl}.arange({src.segment(p)})[:, None, None], "
                  f"{src.segment(free[0])} + {nl}.arange({src.segment(w)})[None, None, :]]")
        extra = "".join(f", {kw.arg}={src.segment(kw.value)}" for kw in stmt.value.keywords if kw.arg == "dtype")
        text = f"{src.indent_of(loop)}{target} = {src.segment(stmt.value.func)}({source}{extra})\n"
        lo, hi = src.line_span(loop.lineno, loop.end_lineno)
        return [Edit(lo, hi, text)]

    return Candidate(src, f"{t}@{k}", f"load the {n_text} slices of '{t}' that the loop over '{k}' fills with one DMA "
                     f"(a 3-D index into the same tile)", edits, {"tensor": t, "loop": k, "blocks": n_text},
                     {"dma": 0.6, "instructions": 0.3}, 48.0)


def _tensor_use(src, name_node, depth=0):
    """True if this read of a tile is a TensorE operand (through one subscript), or the tile is passed to a
    module-level function whose parameter is only used that way."""
    node = name_node
    parent = src.parents.get(node)
    if isinstance(parent, ast.Subscript) and parent.value is node:
        node, parent = parent, src.parents.get(parent)
    if isinstance(parent, ast.keyword):
        return parent.arg in ("stationary", "moving", "x", "y") and \
            src.call_name(src.parents.get(parent)) in ("nisa.nc_matmul", "nl.matmul")
    if isinstance(parent, ast.Call) and src.call_name(parent) in ("nisa.nc_matmul", "nl.matmul"):
        return node in parent.args[:2]
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and node is name_node \
            and node in parent.args and depth < 3:
        helper = [f for f in src.tree.body if isinstance(f, ast.FunctionDef) and f.name == parent.func.id]
        if len(helper) != 1:
            return False
        params = [a.arg for a in helper[0].args.args]
        i = parent.args.index(node)
        if i >= len(params) or helper[0].args.vararg or any(A.name_stores(helper[0], params[i])):
            return False
        uses = A.name_loads(helper[0], params[i])
        return bool(uses) and all(_tensor_use(src, u, depth + 1) for u in uses)
    return False

"""Compiler-style block tensors: allocations, full-rank subscripts and ``nl.arange`` index terms.

neuronxcc-generated kernels (the published NKIBench baselines, nki-facts §1.4)
allocate every on-chip tensor once, with block dimensions in front of an
``nl.par_dim`` partition dimension, and access it with full-rank subscripts
whose partition and free entries are ``nl.arange`` expansions::

    v5 = nl.ndarray((4, 11, 16, nl.par_dim(128), 1024), dtype=np.float32, name='', buffer=nl.sbuf)
    v5[i0, i2, i3, nl.arange(128)[:, None], nl.arange(1024)[None, :]] = nl.load(...)

Shared by ``merge_loads``, ``hoist_nest`` and ``split_block``: reading such
allocations, finding every access of a tensor, recognising ``nl.arange``
terms, and rebuilding subscripts and shapes with entries removed, moved or
replaced (text edits located by AST positions, so the rest of each line
survives).
"""
import ast

from . import analysis as A
from .errors import NotApplicable
from .walk import walk

_ALLOC = ("nl.ndarray", "nl.zeros")
ITEMSIZE = {"float32": 4, "int32": 4, "uint32": 4, "bfloat16": 2, "float16": 2, "int16": 2, "uint16": 2,
            "int8": 1, "uint8": 1, "float8_e4m3": 1, "float8_e5m2": 1, "tfloat32": 4}


class Alloc:
    """One on-chip allocation ``T = nl.ndarray/zeros((B..., nl.par_dim(P), F...), ..., buffer=...)``.

    ``entries``: the shape tuple's element nodes; ``par``: index of the
    ``nl.par_dim`` entry; ``dims``: int per entry (None when not a literal);
    ``buffer``: "sbuf" or "psum"; ``itemsize``: bytes per element (4 when the
    dtype is not recognised).
    """

    __slots__ = ("name", "stmt", "call", "shape", "entries", "par", "dims", "buffer", "itemsize")

    def __init__(self, name, stmt, call, shape, par, dims, buffer, itemsize):
        self.name, self.stmt, self.call, self.shape = name, stmt, call, shape
        self.entries, self.par, self.dims, self.buffer, self.itemsize = shape.elts, par, dims, buffer, itemsize

    @property
    def rank(self):
        return len(self.entries)

    def free_bytes(self):
        """Bytes per partition of one block (product of the free dims x itemsize), None if unknown."""
        n = self.itemsize
        for d in self.dims[self.par + 1:]:
            if d is None:
                return None
            n *= d
        return n


def _int(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None


def _dtype_size(node):
    if node is None:
        return 4
    name = node.attr if isinstance(node, ast.Attribute) else node.value if isinstance(node, ast.Constant) else None
    return ITEMSIZE.get(name, 4) if isinstance(name, str) else 4


def allocations(src, func):
    """{name: Alloc} for the names of ``func`` bound exactly once, by an on-chip compiler-style allocation."""
    defs = A.bindings(func)
    out = {}
    for node in walk(func):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        call = node.value
        if len(defs.get(name, ())) != 1 or src.call_name(call) not in _ALLOC or not call.args:
            continue
        shape = call.args[0]
        buf = [k.value for k in call.keywords if k.arg == "buffer"]
        if not isinstance(shape, ast.Tuple) or len(buf) != 1:
            continue
        buffer = {"nl.sbuf": "sbuf", "nl.psum": "psum"}.get(src.qualname(buf[0]))
        if buffer is None:
            continue
        par, dims = None, []
        for i, e in enumerate(shape.elts):
            if isinstance(e, ast.Call) and src.call_name(e) == "nl.par_dim" and len(e.args) == 1 and not e.keywords:
                if par is not None:
                    par = -1
                    break
                par = i
                dims.append(_int(e.args[0]))
            else:
                dims.append(_int(e))
        if par is None or par < 0:
            continue
        dtype = [k.value for k in call.keywords if k.arg == "dtype"]
        dt = dtype[0] if dtype else (call.args[1] if len(call.args) > 1 else None)
        out[name] = Alloc(name, node, call, shape, par, dims, buffer, _dtype_size(dt))
    return out


def entries(sub):
    """The index entries of a subscript (a list of nodes), or None for a slice that is not a tuple."""
    s = sub.slice
    if isinstance(s, ast.Tuple):
        return list(s.elts)
    return None


def mentions(func, name):
    """Every Name node ``name`` in ``func``."""
    return [n for n in walk(func) if isinstance(n, ast.Name) and n.id == name]


def accesses(src, func, alloc):
    """[(Subscript, "read" | "write")] of every mention of ``alloc``'s tensor besides its allocation.

    Raises NotApplicable when the tensor is mentioned any other way (passed bare, aliased, sliced
    with fewer or more entries than its rank, written through ``+=``: "write" covers ``T[...] =``
    and ``T[...] +=``) or when a read is an ``nl.store`` destination or a ``reduce_res=`` tile.
    """
    out = []
    for n in mentions(func, alloc.name):
        parent = src.parents.get(n)
        if n is alloc.stmt.targets[0]:
            continue
        if not (isinstance(parent, ast.Subscript) and parent.value is n):
            raise NotApplicable(f"{alloc.name} is used without a subscript")
        ent = entries(parent)
        if ent is None or len(ent) != alloc.rank:
            raise NotApplicable(f"{alloc.name} is indexed with other than {alloc.rank} entries")
        holder = src.parents.get(parent)
        if isinstance(parent.ctx, ast.Store):
            out.append((parent, "write"))
        elif isinstance(holder, ast.AugAssign) and holder.target is parent:
            out.append((parent, "write"))
        else:
            if isinstance(holder, ast.keyword) and holder.arg in A.WRITE_KWARGS:
                raise NotApplicable(f"{alloc.name} is written through {holder.arg}=")
            call = src.parents.get(holder) if isinstance(holder, ast.keyword) else holder
            if isinstance(call, ast.Call) and src.call_name(call) == "nl.store":
                args = A.call_args(call, "nl.store") or {}
                if args.get("dst") is parent:
                    raise NotApplicable(f"{alloc.name} is an nl.store destination")
            out.append((parent, "read"))
    return out


def arange(src, node):
    """(n, pattern) for ``nl.arange(n)[e, ...]`` with every ``e`` ``:`` or ``None``; else None.

    ``pattern``: a tuple of booleans, True where the expansion has ``:`` (``[:, None]`` is
    (True, False)). ``n`` is an int literal (None is returned for other extents).
    """
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call)
            and src.call_name(node.value) == "nl.arange" and len(node.value.args) == 1
            and not node.value.keywords):
        return None
    n = _int(node.value.args[0])
    s = node.slice
    parts = s.elts if isinstance(s, ast.Tuple) else [s]
    pattern = []
    for p in parts:
        if isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None:
            pattern.append(True)
        elif isinstance(p, ast.Constant) and p.value is None:
            pattern.append(False)
        else:
            return None
    if n is None or pattern.count(True) != 1:
        return None
    return n, tuple(pattern)


def aranges(src, node):
    """[(Subscript node, n, pattern)] of every ``nl.arange`` expansion inside ``node``.

    Raises NotApplicable for an ``nl.arange`` that is not a plain expansion (a 1-D arange,
    ``nl.arange(n)`` without a subscript, a non-literal extent).
    """
    out = []
    seen = set()
    for n in walk(node):
        if isinstance(n, ast.Subscript):
            a = arange(src, n)
            if a is not None:
                out.append((n, a[0], a[1]))
                seen.add(id(n.value))
    for n in walk(node):
        if isinstance(n, ast.Call) and src.call_name(n) in ("nl.arange", "nl.mgrid") and id(n) not in seen:
            raise NotApplicable("an nl.arange/nl.mgrid that is not an [:, None]-style expansion")
    return out


def linear_in(src, node, name):
    """True if every occurrence of ``name`` in ``node`` is affine: an operand of ``+``/``-``, a
    unary minus, or a product with an int literal (so it may be replaced by an arange)."""
    for n in walk(node):
        if not (isinstance(n, ast.Name) and n.id == name):
            continue
        child, parent = n, src.parents.get(n)
        while parent is not None and parent is not node and not isinstance(parent, (ast.Subscript, ast.Tuple)):
            if isinstance(parent, ast.BinOp) and isinstance(parent.op, (ast.Add, ast.Sub)):
                pass
            elif isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub):
                pass
            elif isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mult):
                other = parent.right if parent.left is child else parent.left
                if _int(other) is None and not (isinstance(other, ast.UnaryOp) and _int(other.operand) is not None):
                    return False
            else:
                return False
            child, parent = parent, src.parents.get(parent)
    return True


def replaced(src, node, repl):
    """The text of ``node`` with sub-nodes replaced: ``repl`` = {id(sub-node): text}.

    Replacements must not nest (an outer one wins and its inner ones are dropped).
    """
    start, end = src.span(node)
    spans = []
    for n in walk(node):
        if id(n) in repl and hasattr(n, "lineno"):
            spans.append((*src.span(n), repl[id(n)]))
    spans.sort()
    kept = []
    for s in spans:
        if kept and s[0] < kept[-1][1]:
            continue
        kept.append(s)
    text = src.text
    out, pos = [], start
    for s, e, t in kept:
        out.append(text[pos:s])
        out.append(t)
        pos = e
    out.append(text[pos:end])
    return "".join(out)


def stmt_lines(src, stmt, repl, indent):
    """The whole lines of ``stmt`` (with ``repl`` applied as in :func:`replaced`), re-indented from
    the statement's own indentation to ``indent``; ends with a newline."""
    lo, hi = src.line_span(stmt.lineno, stmt.end_lineno)
    start, end = src.span(stmt)
    body = replaced(src, stmt, repl)
    text = src.text[lo:start] + body + src.text[end:hi]
    old = src.indent_of(stmt)
    out = []
    for line in text.splitlines(keepends=True):
        out.append(indent + line[len(old):] if line.startswith(old) else line)
    text = "".join(out)
    return text if text.endswith("\n") else text + "\n"


def tuple_text(src, nodes, texts=None):
    """``a, b, c`` from entry nodes (their source text) or explicit ``texts`` (None entries use the node)."""
    texts = texts or [None] * len(nodes)
    return ", ".join(t if t is not None else src.segment(n) for n, t in zip(nodes, texts))


def loop_vars(src, node):
    """Names of the range-loop targets enclosing ``node`` (innermost first)."""
    out = []
    p = src.parents.get(node)
    while p is not None:
        if isinstance(p, ast.For) and A.is_range_loop(src, p) and isinstance(p.target, ast.Name):
            out.append(p.target.id)
        p = src.parents.get(p)
    return out


def trip(src, loop):
    """The literal trip count of ``for v in nl.affine_range(<int>)`` (a Name target), else None."""
    if not (A.is_range_loop(src, loop, ("nl.affine_range",)) and isinstance(loop.target, ast.Name)
            and len(loop.iter.args) == 1 and not loop.iter.keywords):
        return None
    return _int(loop.iter.args[0])



def counted_loops(src, min_trip):
    """(func, allocations, loop, trip count) of every ``for`` loop of the module's kernels with a
    known trip count >= ``min_trip`` whose lines the rule owns; functions without on-chip
    allocations are skipped (the GEMM moves need them)."""
    for func in A.functions(src.tree):
        allocs = allocations(src, func)
        if not allocs:
            continue
        for loop in walk(func):
            if not isinstance(loop, ast.For):
                continue
            t = trip(src, loop)
            if t is not None and t >= min_trip and src.owns_lines(loop):
                yield func, allocs, loop, t

def is_note(stmt):
    """True for a bare string statement (the compiler's ``' end loop i3 '`` markers)."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def module_names(src):
    """Names that denote modules in kernels (NKI aliases, numpy)."""
    return set(src.aliases) | {"np", "numpy", "math"}

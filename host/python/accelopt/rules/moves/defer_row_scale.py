"""Rule ``defer_row_scale``: apply a per-row scale at the PSUM eviction instead of before the transposes.

RMSNorm followed by a matmul scales every row of ``x`` by its statistic
``r`` and then feeds the rows through TensorE transposes into the stationary
operand of the GEMM (compiler style, the published rmsnorm_matmul)::

    A[i0, i1, i3, ip, if_] = nisa.tensor_scalar(data=X[i0, i1, ip, 512 * i3 + if_], op0=nl.multiply,
                                                operand0=R[i0, i1, ip, 0])
    ...       P1[..] = nisa.nc_matmul(A[i0, i1, i3, ip, 128 * i4 + jf], I[..], is_transpose=True)
              B[i3, i4, i0, i1, ip, jf] = nl.copy(P1[..])
    ...       C[i5, i0, i8, i9, ip, kf] += nisa.nc_matmul(B[i10, i11, i0, i8, ip, jf], W[..])
          E[i0, i8, i5, ip, 512 * i9 + kf] = nl.copy(C[i5, i0, i8, i9, ip, kf])

Since ``(diag(r) x) @ W = diag(r) (x @ W)`` and the output's partitions are
the rows of ``x`` (the stationary's free dimension), the rewrite transposes
``X`` itself and scales at the eviction, which copies the tile anyway::

    ...       P1[..] = nisa.nc_matmul(X[i0, i1, ip, 512 * i3 + (128 * i4 + jf)], I[..], is_transpose=True)
          E[..] = nisa.tensor_scalar(data=C[i5, i0, i8, i9, ip, kf], op0=nl.multiply, operand0=R[i0, i8, ip, 0])

The multiply statement and its tensor go. The same move on hand-written kernels
(``y = nl.multiply(a, r)`` feeding ``nl.matmul``) is in row_scale_tiles.py. Effect (documented, nki-facts §3.2,
§3.3, §3.6): one VectorE pass per row tile less and one SBUF tensor less; the
TensorE transposes no longer wait for the statistic (a ScalarE/VectorE chain)
of their rows, so the in-order TensorE stream stalls less where a new row
block starts; the eviction costs the same as the copy it replaces.

Preconditions (all proven on the AST): ``A`` and ``B`` are on-chip tensors
written by exactly that one statement each; ``A`` is read only as the
stationary of ``nc_matmul(..., is_transpose=True)`` whose PSUM result is read
once, by a copy into ``B`` with the same index; ``B`` is read only as the
stationary of ``C[..] += nc_matmul(B[..], ..)`` (no ``is_transpose``), ``C``
is a PSUM tensor written only there and read once, by a plain copy with the
same index; ``X`` and ``R`` are on-chip tensors written by one statement each
(so every read of one index sees the same data); ``A``'s index is bare loop
variables followed by the partition and free ranges, ``R`` is a (P, 1) column
over the same partition range, the transposes read all partitions of ``A``,
``B`` is written and read over its whole free range ``nl.arange(P)`` and the
eviction reads ``C``'s rows over the same partition range; every loop
variable the eviction's scale index needs maps through the block indices of
``A``, the transposes and ``B`` to an expression over the loops around the
eviction (so the scale is the same for every term of the accumulation).
"""
import ast
import copy

from .. import analysis as A
from .. import blocks
from .. import patterns as P
from .. import row_scale_tiles
from ..base import Candidate
from ..imports import isa_prefix
from ..walk import walk

NAME = "defer_row_scale"
SUMMARY = "Scale matmul rows at the PSUM eviction instead of scaling the stationary's source before its transposes."
EFFECT = ("VectorE time and overlap: the per-row scale rides on the PSUM eviction that copies the tile "
          "anyway, so the row tiles' VectorE pass and SBUF tensor go and the in-order TensorE stream's "
          "transposes stop waiting for the row statistics (nki-facts §3.2, §3.3, §3.6)")
GAIN = 0.2  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"vector": 0.6, "tensor": 0.5, "instructions": 0.3}  # resource -> weight (docs/rules.md)
ORDER = 17  # position among the built-in rules when proposals tie (docs/rules.md)

_COPIES = ("nl.copy", "nisa.tensor_copy")


def candidates(src):
    """One candidate per row-scaling ``tensor_scalar`` (compiler style) or ``nl.multiply`` by a row
    statistic (hand-written style, row_scale_tiles.py) whose every use chain qualifies."""
    out = []
    for site, params, edits in row_scale_tiles.sites(src):
        out.append(Candidate(src, site, f"scale the rows by '{params['scale']}' when evicting the matmul result "
                             f"instead of in '{site}' before the matmul", edits, params,
                             {"vector": 0.6, "tensor": 0.5, "instructions": 0.3}, 58.0))
    for func in A.functions(src.tree):
        info = _Func(src, func)
        for stmt in walk(func):
            c = _site(src, info, stmt)
            if c is not None:
                out.append(c)
    return out


class _Func:
    """Writers, reads and allocations of every name of one function."""

    def __init__(self, src, func):
        self.src, self.func = src, func
        self.writers, self.reads, self.allocs = {}, {}, {}
        for n in walk(func):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                self.allocs.setdefault(n.targets[0].id, []).append(n)
            for name in A.written_roots(src, n) if isinstance(n, ast.stmt) and not isinstance(
                    n, (ast.For, ast.While, ast.If, ast.With, ast.FunctionDef)) else ():
                self.writers.setdefault(name, []).append(n)
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and isinstance(n.ctx, ast.Load):
                self.reads.setdefault(n.value.id, []).append(n)
        self.mentions = {}
        for n in walk(func):
            if isinstance(n, ast.Name):
                self.mentions[n.id] = self.mentions.get(n.id, 0) + 1

    def single(self, name):
        """The one statement writing on-chip tensor ``name``, or None."""
        allocs = self.allocs.get(name, [])
        w = self.writers.get(name, [])
        if len(allocs) != 1 or not blocks.on_chip_alloc(self.src, allocs[0]) or len(w) != 1:
            return None
        return w[0]

    def only_subscript_uses(self, name):
        """True if every mention of ``name`` is its allocation, a subscript write or a subscript read."""
        return self.mentions.get(name, 0) == 1 + len(self.writers.get(name, [])) + len(self.reads.get(name, []))


def _index(sub):
    return list(sub.slice.elts) if isinstance(sub.slice, ast.Tuple) else [sub.slice]


def _arange(src, node, free):
    """n if ``node`` is ``nl.arange(n)[None, :]`` (free) / ``nl.arange(n)[:, None]`` (partition), else None."""
    if not (isinstance(node, ast.Subscript) and src.call_name(node.value) == "nl.arange"
            and len(node.value.args) == 1 and isinstance(node.value.args[0], ast.Constant)
            and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2):
        return None
    a, b = node.slice.elts
    none_first = isinstance(a, ast.Constant) and a.value is None and isinstance(b, ast.Slice)
    none_last = isinstance(b, ast.Constant) and b.value is None and isinstance(a, ast.Slice)
    return node.value.args[0].value if (free and none_first) or (not free and none_last) else None


def _kwargs(src, call, allowed):
    """{keyword: node} of ``call`` without trivial ones, or None if positional or other keywords."""
    if call.args or any(k.arg is None for k in call.keywords):
        return None
    kw = P.clean(src, {k.arg: k.value for k in call.keywords})
    return kw if set(kw) <= set(allowed) else None


def _loop_vars(src, node):
    out = set()
    p = src.parents.get(node)
    while p is not None:
        if isinstance(p, ast.For) and isinstance(p.target, ast.Name):
            out.add(p.target.id)
        p = src.parents.get(p)
    return out


def _site(src, f, s1):
    if not (isinstance(s1, ast.Assign) and len(s1.targets) == 1 and isinstance(s1.targets[0], ast.Subscript)
            and isinstance(s1.targets[0].value, ast.Name) and src.call_name(s1.value) == "nisa.tensor_scalar"):
        return None
    kw = _kwargs(src, s1.value, ("data", "op0", "operand0"))
    if kw is None or set(kw) != {"data", "op0", "operand0"} or src.qualname(kw["op0"]) != "nl.multiply":
        return None
    x, r = kw["data"], kw["operand0"]
    if not all(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) for t in (x, r)):
        return None
    a_name, x_name, r_name = s1.targets[0].value.id, x.value.id, r.value.id
    if len({a_name, x_name, r_name}) != 3 or f.single(a_name) is not s1 or not f.only_subscript_uses(a_name) \
            or f.single(x_name) is None or f.single(r_name) is None:
        return None
    ia, ix, ir = _index(s1.targets[0]), _index(x), _index(r)
    if len(ia) < 3 or _arange(src, ia[-2], False) is None or _arange(src, ia[-1], True) is None:
        return None
    parts = _arange(src, ia[-2], False)
    block_vars = [e.id if isinstance(e, ast.Name) else None for e in ia[:-2]]
    if None in block_vars or len(set(block_vars)) != len(block_vars) or not set(block_vars) <= _loop_vars(src, s1):
        return None
    pn, fn = ast.dump(ia[-2]), ast.dump(ia[-1])
    if len(ir) < 2 or ast.dump(ir[-2]) != pn or not (isinstance(ir[-1], ast.Constant) and ir[-1].value == 0):
        return None
    if sum(ast.dump(n) == fn for n in walk(x.slice)) != 1 or sum(ast.dump(n) == pn for n in walk(x.slice)) != 1:
        return None
    r_vars = {n.id for e in ir[:-2] for n in walk(e) if isinstance(n, ast.Name)}
    if not r_vars <= set(block_vars):
        return None
    chains = []
    for read in f.reads.get(a_name, []):
        chain = _chain(src, f, read, ia, block_vars, r_vars, parts)
        if chain is None:
            return None
        chains.append(chain)
    if not chains or len(chains) != len(f.reads.get(a_name, [])):
        return None
    evictions = {}
    for ch in chains:
        for e_call, mapping in ch["evictions"]:
            r_index = _substituted(r, mapping)
            if id(e_call) in evictions and evictions[id(e_call)][1] != r_index:
                return None
            evictions[id(e_call)] = (e_call, r_index)
    alloc = f.allocs[a_name][0]

    def edits():
        isa, extra = isa_prefix(src)
        nl = src.prefix("nl")
        out = [src.delete_stmt(s1, A.body_of(src, s1)[0]), src.delete_stmt(alloc, A.body_of(src, alloc)[0])]
        for ch in chains:
            mapping = {v: ch["ra"][k] for k, v in enumerate(block_vars)}
            out.append(src.replace_node(ch["read"], _substituted(x, mapping, ia[-1], ch["ra"][-1])))
        for e_call, r_index in evictions.values():
            data = e_call.args[0] if e_call.args else [k.value for k in e_call.keywords if k.arg in ("data", "src", "x")][0]
            extras = [f"{k.arg}={src.segment(k.value)}" for k in e_call.keywords
                      if k.arg in ("dtype", "mask") and not P.trivial(src, k.arg, k.value)]
            text = f"{isa}.tensor_scalar(data={src.segment(data)}, op0={nl}.multiply, operand0={r_index}"
            out.append(src.replace_node(e_call, ", ".join([text] + extras) + ")"))
        return out + extra

    site = f"{a_name}->{'/'.join(sorted({ch['evict_root'] for ch in chains}))}"
    return Candidate(src, site, f"scale the rows by '{r_name}' when evicting the matmul result instead of in "
                     f"'{a_name}' before the transposes", edits,
                     {"scaled": a_name, "scale": r_name, "source": x_name},
                     {"vector": 0.6, "tensor": 0.5, "instructions": 0.3}, 58.0)


def _substituted(x, mapping, free_old=None, free_new=None):
    """Text of the subscript ``x`` with the names in ``mapping`` replaced by its expressions (and the
    subexpression ``free_old``, when given, by ``free_new``)."""
    free = ast.dump(free_old) if free_old is not None else None

    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            return copy.deepcopy(mapping[node.id]) if node.id in mapping else node

        def visit_Subscript(self, node):
            if free is not None and ast.dump(node) == free:
                return copy.deepcopy(free_new)
            return self.generic_visit(node)

    new = Sub().visit(copy.deepcopy(x))
    return ast.unparse(new)


def _chain(src, f, read, ia, block_vars, r_vars, parts):
    """Follows one read of ``A`` (transpose -> copy -> stationary -> eviction); dict or None."""
    call = src.parents.get(read)
    t = A.statement_of(src, read)
    if not (isinstance(call, ast.Call) and src.call_name(call) == "nisa.nc_matmul" and call.args
            and call.args[0] is read and isinstance(t, ast.Assign) and t.value is call
            and isinstance(t.targets[0], ast.Subscript) and isinstance(t.targets[0].value, ast.Name)):
        return None
    if not any(k.arg == "is_transpose" and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in call.keywords):
        return None
    ra = _index(read)
    if len(ra) != len(ia) or ast.dump(ra[-2]) != ast.dump(ia[-2]):
        return None
    p1 = t.targets[0].value.id
    if f.single(p1) is not t or not f.only_subscript_uses(p1) or len(f.reads.get(p1, [])) != 1:
        return None
    p1_read = f.reads[p1][0]
    cp = A.statement_of(src, p1_read)
    cp_call = src.parents.get(p1_read)
    if not (isinstance(cp, ast.Assign) and cp.value is cp_call and src.call_name(cp_call) in _COPIES
            and cp_call.args and cp_call.args[0] is p1_read and ast.dump(p1_read.slice) == ast.dump(t.targets[0].slice)
            and isinstance(cp.targets[0], ast.Subscript) and isinstance(cp.targets[0].value, ast.Name)):
        return None
    if any(k.arg not in ("dtype", "mask", "engine") for k in cp_call.keywords) or len(cp_call.args) != 1:
        return None
    b_name = cp.targets[0].value.id
    ib = _index(cp.targets[0])
    if f.single(b_name) is not cp or not f.only_subscript_uses(b_name) or _arange(src, ib[-1], True) != parts:
        return None
    # A's block position k -> the transpose's expression ra[k] (a bare loop variable) -> B's block position
    pos_in_b = {}
    for k, v in enumerate(block_vars):
        if v not in r_vars:
            continue
        if not isinstance(ra[k], ast.Name):
            return None
        hits = [m for m, e in enumerate(ib[:-2]) if isinstance(e, ast.Name) and e.id == ra[k].id]
        if len(hits) != 1:
            return None
        pos_in_b[v] = hits[0]
    evictions = []
    roots = set()
    for b_read in f.reads.get(b_name, []):
        ev = _eviction(src, f, b_read, ib, pos_in_b, parts)
        if ev is None:
            return None
        evictions.append(ev[:2])
        roots.add(ev[2])
    if not evictions:
        return None
    return {"read": read, "ra": ra, "evictions": evictions, "evict_root": "/".join(sorted(roots))}


def _eviction(src, f, b_read, ib, pos_in_b, parts):
    """(eviction call, scale index text, evicted tensor) for one stationary read of ``B``, or None."""
    mm = src.parents.get(b_read)
    acc = A.statement_of(src, b_read)
    if not (isinstance(mm, ast.Call) and src.call_name(mm) == "nisa.nc_matmul" and len(mm.args) >= 2
            and mm.args[0] is b_read and isinstance(acc, ast.AugAssign) and isinstance(acc.op, ast.Add)
            and acc.value is mm and isinstance(acc.target, ast.Subscript) and isinstance(acc.target.value, ast.Name)):
        return None
    if any(k.arg == "is_transpose" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
           for k in mm.keywords):
        return None
    rb = _index(b_read)
    if len(rb) != len(ib) or ast.dump(rb[-1]) != ast.dump(ib[-1]):
        return None
    c_name = acc.target.value.id
    c_alloc = f.allocs.get(c_name, [None])[0]
    if f.single(c_name) is not acc or not f.only_subscript_uses(c_name) or len(f.reads.get(c_name, [])) != 1 \
            or not any(k.arg == "buffer" and src.qualname(k.value) == "nl.psum" for k in c_alloc.value.keywords):
        return None
    c_read = f.reads[c_name][0]
    e_call = src.parents.get(c_read)
    ev = A.statement_of(src, c_read)
    if not (isinstance(ev, ast.Assign) and ev.value is e_call and src.call_name(e_call) in _COPIES
            and e_call.args == [c_read] and ast.dump(c_read.slice) == ast.dump(acc.target.slice)
            and isinstance(ev.targets[0], ast.Subscript) and isinstance(ev.targets[0].value, ast.Name)):
        return None
    if any(k.arg not in ("dtype", "mask", "engine") or (k.arg != "dtype" and not P.trivial(src, k.arg, k.value))
           for k in e_call.keywords):
        return None
    ic = _index(c_read)
    if len(ic) < 2 or _arange(src, ic[-2], False) != parts:
        return None
    around = _loop_vars(src, ev)
    mapping = {}
    for v, m in pos_in_b.items():
        if not {n.id for n in walk(rb[m]) if isinstance(n, ast.Name)} <= around:
            return None
        mapping[v] = rb[m]
    return e_call, mapping, ev.targets[0].value.id

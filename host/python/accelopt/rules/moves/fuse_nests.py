"""Rule ``fuse_nests``: fuse the nest that consumes a loop reduction into the producer's parallel loops, so
the reduced tiles live one row block at a time instead of all at once.

Before (a two-pass softmax the way neuronxcc emits it: every score tile of the whole matrix is computed and
kept, 64 MiB per batch, before the second nest reads them back; SBUF spills them to HBM)::

    for i1 in nl.affine_range(4):              # column blocks: reduced
        v6[i1, ...] = nl.load(...)             # prelude: does not use the chain
        for i2 in nl.affine_range(8):          # row tiles: parallel
            for i5 in nl.affine_range(2):      # column halves: reduced
                v10[i1, i2, i5, ...] = nisa.nc_matmul(...)
                v11[i2, i1, i5, ...] = nl.copy(v10[i1, i2, i5, ...])
                v18[i1, i2, i5, ...] = nisa.tensor_reduce(nl.max, data=v11[i2, i1, i5, ...], axis=[1])
                v12[i2, ...] = nl.loop_reduce(v18[i1, i2, i5, ...], op=np.max, loop_indices=[i1, i5])
    for i6 in nl.affine_range(8):              # the consumer, one row tile per iteration
        ...v12[i6, ...]...v11[i6, i8, i9, ...]...

After::

    for i1 in nl.affine_range(4):
        v6[i1, ...] = nl.load(...)
    for i6 in nl.affine_range(8):
        for i1 in nl.affine_range(4):
            for i5 in nl.affine_range(2):
                v10[i1, i6, i5, ...] = nisa.nc_matmul(...)
                ...
                v12[i6, ...] = nl.loop_reduce(v18[i1, i6, i5, ...], op=np.max, loop_indices=[i1, i5])
        ...v12[i6, ...]...v11[i6, i8, i9, ...]...

Preconditions (proven on the AST, else no candidate):

* the producer ``A`` and the consumer ``B`` are ``for`` statements of one statement list, ``A`` first; every
  loop from ``A`` down to the *chain* (the innermost statement list holding ``R[...] = nl.loop_reduce(...,
  loop_indices=[...])``) is ``nl.affine_range(<int>)`` with a name target (iterations independent,
  nki-facts §2.4); the chain holds no loop;
* the reduced loops are the ``loop_indices``; the other path loops are *parallel* and map one to one onto
  ``B``'s perfect loop prefix, read off ``B``'s subscript of ``R``, with equal trip counts;
* every other statement on the path (the *prelude*) reads and writes no tensor the chain writes, so it can
  run first as a nest of its own (loop fission);
* every read in ``B`` of a tensor the chain writes indexes the parallel axes with exactly the mapped loop
  variables (the consumer iteration reads only what the same producer iteration wrote), the other axes as
  written; ``B`` writes nothing the chain touches; the statements between ``A`` and ``B`` touch nothing the
  chain writes and write nothing it reads.

``nl.loop_reduce`` initialises on the first iteration of its loops wherever they sit (nki-facts §2.5), so
moving the reduced loops inside the parallel ones keeps every value. Effect: the intermediates of one
consumer iteration (a row block) are live at a time, so the working set fits SBUF and the spill saves and
reloads of the whole intermediate go (nki-facts §3.4, §5.2: what does not fit SBUF goes to HBM and back).
"""
import ast
import copy

from .. import analysis as A
from .. import cstyle as C
from ..base import Candidate
from ..source import Edit
from ..walk import walk


NAME = "fuse_nests"
SUMMARY = ("Fuse the nest that consumes a loop reduction into the producer's parallel loops, so the reduced "
           "tiles live one block at a time instead of spilling.")
EFFECT = ("SBUF working set: the reduced intermediate lives one row block at a time, its spill saves and "
          "reloads to HBM go (nki-facts §2.4, §3.4, §5.2)")
GAIN = 0.5  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"dma": 1.0, "vector": 0.2}  # resource -> weight (docs/rules.md)
ORDER = 27  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    """One candidate per (producer chain, consumer nest) pair."""
    out = []
    for func in A.functions(src.tree):
        for body in A.statement_lists(func):
            for ai, a in enumerate(body):
                if not isinstance(a, ast.For) or C.trip(src, a) is None or not src.owns_lines(a):
                    continue
                for path, chain, red in _chains(src, a):
                    cand = _match(src, body, ai, path, chain, red)
                    if cand is not None:
                        out.append(cand)
    return out


def _chains(src, a):
    """(path loops, chain statement list, reduced loop names) under ``a``."""
    for body in A.statement_lists(a):
        owner = src.parents.get(body[0])
        if not isinstance(owner, ast.For) or owner.body is not body:
            continue
        stmts = [s for s in body if not C.is_note(s)]
        red = _reduced(src, stmts)
        if red is None or any(isinstance(n, (ast.For, ast.While, ast.If, ast.With)) for s in stmts
                              for n in walk(s)):
            continue
        path = [owner]
        while path[0] is not a:
            p = src.parents.get(path[0])
            if p is None:
                break
            if isinstance(p, ast.For):
                path.insert(0, p)
        if path[0] is not a or any(C.trip(src, loop) is None or not src.owns_lines(loop) for loop in path):
            continue
        names = [loop.target.id for loop in path]
        if len(set(names)) != len(names) or not red <= set(names) or len(red) == len(names):
            continue
        yield path, stmts, red


def _reduced(src, stmts):
    """The loop names of the chain's ``nl.loop_reduce`` assignments (all must agree), or None."""
    red = None
    for s in stmts:
        if not (isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                and src.call_name(s.value) == "nl.loop_reduce"):
            continue
        kw = {k.arg: k.value for k in s.value.keywords}
        li = kw.get("loop_indices")
        if not isinstance(li, (ast.List, ast.Tuple)) or not all(isinstance(e, ast.Name) for e in li.elts):
            return None
        names = {e.id for e in li.elts}
        if red is not None and names != red:
            return None
        red = names
    return red


def _writes(stmts):
    """{root: [subscript nodes]} written by ``stmts`` (assignment targets and nl.store destinations)."""
    out = {}
    for s in stmts:
        for n in walk(s):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) \
                else []
            for t in targets:
                root = A.root_name(t)
                if root is not None:
                    out.setdefault(root, []).append(t)
    return out


def _reads(stmts):
    """Root names read by ``stmts``."""
    return {n.id for s in stmts for n in A.name_loads(s)}


def _prefix(src, b):
    """``b``'s perfect loop prefix (each loop's body is one loop, notes aside) and the innermost body."""
    loops = [b]
    while True:
        inner = [s for s in loops[-1].body if not C.is_note(s)]
        if len(inner) == 1 and isinstance(inner[0], ast.For) and C.trip(src, inner[0]) is not None:
            loops.append(inner[0])
        else:
            return loops, loops[-1].body


def _entries(sub):
    """The index entries of subscript ``sub`` (a list of nodes)."""
    s = sub.slice
    return list(s.elts) if isinstance(s, ast.Tuple) else [s]


def _mapping(w_entries, r_entries, par, red):
    """{parallel name: consumer name} from a write/read pair, or None if the read is not the same block."""
    if len(w_entries) != len(r_entries):
        return None
    out = {}
    for w, r in zip(w_entries, r_entries):
        used = A.read_names(w)
        if isinstance(w, ast.Name) and w.id in par:
            if not isinstance(r, ast.Name):
                return None
            out[w.id] = r.id
        elif used & red:
            continue  # a reduced axis: the consumer walks it itself
        elif used & par or ast.dump(w) != ast.dump(r):
            return None
    return out


def _match(src, body, ai, path, chain, red):
    names = [loop.target.id for loop in path]
    par = [n for n in names if n not in red]
    chain_w = _writes(chain)
    chain_r = _reads(chain)
    prelude = [s for loop in path for s in loop.body if s not in path and s not in chain and not C.is_note(s)]
    if set(_writes(prelude)) & (set(chain_w)) or _reads(prelude) & set(chain_w):
        return None
    for loop in path:  # trip counts must not depend on the loops around them
        if A.read_names(loop.iter) & set(names):
            return None
    reduce_stmt = next(s for s in chain if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                       and src.call_name(s.value) == "nl.loop_reduce")
    r_root = A.root_name(reduce_stmt.targets[0])
    if not isinstance(reduce_stmt.targets[0], ast.Subscript):
        return None
    for bi in range(ai + 1, len(body)):
        b = body[bi]
        between = [s for s in body[ai + 1:bi] if not C.is_note(s)]
        if between and (set(_writes(between)) & (chain_r | set(chain_w)) or _reads(between) & set(chain_w)):
            return None
        if not isinstance(b, ast.For) or not (_reads([b]) & set(chain_w)):
            continue
        return _consumer(src, path, chain, par, set(red), chain_w, chain_r, reduce_stmt, r_root, b)
    return None


def _consumer(src, path, chain, par, red, chain_w, chain_r, reduce_stmt, r_root, b):
    loops, inner = _prefix(src, b)
    if len(loops) < len(par) or not src.owns_lines(b):
        return None
    b_stmts = [b]
    if set(_writes(b_stmts)) & (chain_r | set(chain_w)):
        return None
    w_entries = _entries(reduce_stmt.targets[0])
    mapping = None
    for n in walk(b):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and A.root_name(n) == r_root \
                and isinstance(n.value, ast.Name):
            mapping = _mapping(w_entries, _entries(n), set(par), red)
            break
    prefix = {loop.target.id: loop for loop in loops}
    if mapping is None or set(mapping) != set(par) or len(set(mapping.values())) != len(par) \
            or not set(mapping.values()) <= set(prefix):
        return None
    by_name = {loop.target.id: loop for loop in path}
    if any(C.trip(src, by_name[p]) != C.trip(src, prefix[c]) for p, c in mapping.items()):
        return None
    # the fused nest sits inside the mapped prefix loops: they must be the outermost ones of B
    depth = max(i for i, loop in enumerate(loops) if loop.target.id in mapping.values()) + 1
    if depth != len(par):
        return None
    free = _reads(chain) - set(par)
    if set(mapping.values()) & free or red & (_reads([b]) | {n.id for n in A.name_stores(b)}):
        return None  # a renamed or re-inserted loop variable would capture another name
    # every consumer read of a chain tensor must be the block the same producer iteration wrote
    for n in walk(b):
        if not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in chain_w):
            continue
        sub = src.parents.get(n)
        if not (isinstance(sub, ast.Subscript) and sub.value is n):
            return None
        for w in chain_w[n.id]:
            if not isinstance(w, ast.Subscript) or _mapping(_entries(w), _entries(sub), set(par), red) != \
                    {p: mapping[p] for p in par if p in A.read_names(w)}:
                return None
            if any(not any(isinstance(e, ast.Name) and e.id == p for e in _entries(w)) for p in par):
                return None  # a block not indexed by every parallel loop is overwritten across them
    return _cand(src, path, chain, red, mapping, loops[depth - 1], b)


def _cand(src, path, chain, red, mapping, host, b):
    a = path[0]
    names = [loop.target.id for loop in path]

    def edits():
        out = []
        # the prelude keeps the path down to the last loop that still holds other statements
        keep = None
        for loop in path:
            if any(s not in path and s not in chain and not C.is_note(s) for s in loop.body):
                keep = loop
        if keep is None:
            out.append(src.delete_stmt(a, _body_of(src, a)))
        else:
            at = path.index(keep) + 1
            if at < len(path):
                out.append(src.delete_stmt(path[at], keep.body))
            else:
                out += [src.delete_stmt(s, keep.body) for s in chain]
        indent = src.indent_of(host.body[0])
        text = []
        depth = 0
        for loop in path:
            if loop.target.id in red:
                text.append(indent + "    " * depth + f"for {loop.target.id} in {src.segment(loop.iter)}:\n")
                depth += 1
        for s in chain:
            node = _renamed(s, mapping)
            text.append(indent + "    " * depth + ast.unparse(node) + "\n")
        at, _ = src.line_span(src.comment_start(host.body[0]), host.body[0].lineno)
        out.append(Edit(at, at, "".join(text)))
        return out

    pairs = ", ".join(f"{p}->{c}" for p, c in mapping.items())
    tensors = sorted({A.root_name(t) for s in chain for t in (s.targets if isinstance(s, ast.Assign) else [])})
    return Candidate(src, f"{names[0]}+{b.target.id}",
                     f"fuse the reduction over {', '.join(sorted(red))} into the consumer nest over "
                     f"'{b.target.id}' ({pairs}): {', '.join(tensors)} live one block at a time",
                     edits, {"producer": names[0], "consumer": b.target.id, "map": dict(mapping)},
                     {"dma": 1.0, "vector": 0.2}, 70.0)


def _body_of(src, stmt):
    parent = src.parents.get(stmt)
    for field in ("body", "orelse"):
        lst = getattr(parent, field, None)
        if isinstance(lst, list) and stmt in lst:
            return lst
    raise ValueError("statement has no parent list")


def _renamed(stmt, mapping):
    node = copy.deepcopy(stmt)
    for n in walk(node):
        if isinstance(n, ast.Name) and n.id in mapping:
            n.id = mapping[n.id]
    return node

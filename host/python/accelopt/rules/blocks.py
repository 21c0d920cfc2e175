"""Block temps: the compiler-style form of a temp (published NKIBench kernels, nki-facts §1.4).

neuronxcc-generated kernels (and the published NKIBench baselines written from
them) allocate every intermediate once at the top of the kernel as an SBUF or
PSUM tensor with block dimensions and write it with a subscript assignment::

    v7 = nl.ndarray((32, 7, 2, nl.par_dim(128), 512), dtype=np.float32, buffer=nl.sbuf)
    ...
            v7[i0, i1, i2, ip, if_] = nisa.tensor_scalar(data=v6[...], op0=nl.add, operand0=1.0)
            v8[i0, i1, i2, ip, if_] = nisa.reciprocal(data=v7[i0, i1, i2, ip, if_])

A *block temp* is such a tensor written by exactly one statement
``T[S] = <expr>`` and read exactly once, as ``T[S]`` with the identical index
``S``, in a simple statement of the same block after the write; nothing else
mentions ``T`` except its one allocation. Reading ``T[S]`` then equals
evaluating ``<expr>`` there (the peephole rules look through it as through a
name temp, analysis.single_use_temp).
"""
import ast

from . import analysis as A
from .walk import walk

_ALLOC = ("nl.ndarray", "nl.zeros", "nl.empty_like", "nl.zeros_like")


class BlockTemp:
    """One block temp: ``alloc`` (the allocation statement or None), ``store`` (``T[S] = expr``),
    ``read`` (the Subscript node reading it)."""

    __slots__ = ("name", "alloc", "store", "read")

    def __init__(self, name, alloc, store, read):
        self.name, self.alloc, self.store, self.read = name, alloc, store, read


def on_chip_alloc(src, stmt):
    """True if ``stmt`` is ``T = nl.ndarray/zeros(..., buffer=nl.sbuf|nl.psum)`` (buffer keyword
    required and on chip)."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return False
    call = stmt.value
    if src.call_name(call) not in _ALLOC:
        return False
    buf = [k.value for k in call.keywords if k.arg == "buffer"]
    return len(buf) == 1 and src.qualname(buf[0]) in ("nl.sbuf", "nl.psum")


def block_temp(src, func, node):
    """BlockTemp if ``node`` (a Subscript) reads a block temp of ``func`` (module docstring), else None."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
            and isinstance(node.ctx, ast.Load)):
        return None
    name = node.value.id
    mentions = [n for n in walk(func) if isinstance(n, ast.Name) and n.id == name]
    if len(mentions) != 3:  # allocation, store, read
        return None
    alloc = store = None
    for n in mentions:
        parent = src.parents.get(n)
        stmt = A.statement_of(src, n)
        if isinstance(n.ctx, ast.Store):
            if alloc is not None or not on_chip_alloc(src, stmt):
                return None
            alloc = stmt
        elif parent is node:
            continue
        elif isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store) \
                and isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.targets[0] is parent:
            store = stmt
        else:
            return None
    if alloc is None or store is None or ast.dump(store.targets[0].slice) != ast.dump(node.slice):
        return None
    body, i = A.body_of(src, store)
    use_stmt = A.statement_of(src, node)
    if body is None or use_stmt not in body or body.index(use_stmt) <= i:
        return None
    if not isinstance(use_stmt, (ast.Assign, ast.Expr, ast.AugAssign, ast.Return)):
        return None
    return BlockTemp(name, alloc, store, node)

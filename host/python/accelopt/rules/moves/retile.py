"""Rule ``retile``: set a tile-size constant of the kernel body to another power of two.

Tile sizes are searched parameters (the ``tunable`` rule covers module-level
declarations; this rule covers the published kernels' local constants such as
``TILE_N = 512`` or ``tile_size_S = 512``). A site is a function-level
``NAME = <int literal>`` (a power of two, bound once) read by the kernel,
where every read of NAME inside a loop has an enclosing loop whose trip count
reads NAME (``N // TILE_N``, ``range(0, S, tile_size_S)``), so the loop
structure follows the new value. Proposed values: half, double and four
times the current one, within the hardware limit of how NAME is used: 128 for
a partition dimension (``nl.arange(NAME)[:, None]``, the first index of a
subscript, the first entry of an allocation shape; nki-facts §3.1), 512 for a
PSUM tile or nc_matmul moving operand (one 2 KiB bank of fp32; nki-facts
§4.2-4.3), 4096 elements per partition otherwise (16 KiB of the 176 KiB SBUF).
With the arguments' shapes known (propose's ``input_shapes``) a value must
divide the dimensions NAME tiles (``analysis.tile_fits_shapes``); without
them, a value that does not divide the problem's shapes fails the kernel's
own asserts or the correctness check in the profile stage. Cost: larger tiles
mean fewer instructions and DMAs (each pays a fixed cost, nki-facts §3.2,
§3.4) and longer free sizes; smaller ones more overlap between iterations.
"""
import ast

from .. import analysis as A
from .. import effects
from ..base import Candidate
from ..walk import walk

NAME = "retile"
SUMMARY = "Set a local tile-size constant (TILE_N = 512, tile_size_S = 512, ...) to another power of two."
EFFECT = ("tile size: larger tiles mean fewer, larger instructions and DMAs (fixed costs per instruction "
          "and DMA, nki-facts §3.2, §3.4); smaller ones more, shorter instructions and more iterations to "
          "overlap (nki-facts §3.6)")
GAIN = 0.15  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"instructions": 1.0, "dma": 0.6, "vector": 0.3, "scalar": 0.3}  # resource -> weight (docs/rules.md)
ORDER = 15  # position among the built-in rules when proposals tie (docs/rules.md)

_PSUM_OPS = {"nl.matmul", "nisa.nc_matmul"}


def candidates(src):
    """One candidate per (tile constant, proposed value)."""
    out = []
    for func in A.functions(src.tree):
        for stmt in func.body:
            c = _constant(stmt)
            if c is None:
                continue
            name, node = c
            if len(A.name_stores(func, name)) != 1:
                continue
            reads = A.name_loads(func, name)
            if not reads or not all(_trip_follows(src, r, name) for r in reads):
                continue
            cap = _cap(src, func, name)
            value = node.value
            for new in sorted({value // 2, value * 2, value * 4}):
                if new < 32 or new > cap or new == value or not A.tile_fits_shapes(src, name, new):
                    continue
                out.append(_cand(src, name, node, value, new))
    return out


def _constant(stmt):
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
            and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int:
        v = stmt.value.value
        if v >= 32 and v & (v - 1) == 0:
            return stmt.targets[0].id, stmt.value
    return None


def _trip_follows(src, read, name):
    """True if ``read`` is outside every loop or some enclosing loop's trip count reads ``name``."""
    loop = A.enclosing(src, read, (ast.For,))
    if loop is None:
        return True
    while loop is not None:
        if name in A.read_names(loop.iter):
            return True
        loop = A.enclosing(src, loop, (ast.For,))
    return False


def _cap(src, func, name):
    cap = 4096
    for node in walk(func):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) \
                and src.call_name(node.value) == "nl.arange" and name in A.read_names(node.value) \
                and isinstance(node.slice, ast.Tuple) and node.slice.elts and isinstance(node.slice.elts[0], ast.Slice) \
                and len(node.slice.elts) == 2 and isinstance(node.slice.elts[1], ast.Constant):
            cap = min(cap, 128)  # nl.arange(NAME)[:, None]: partitions
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and node.slice.elts \
                and name in A.read_names(node.slice.elts[0]):
            cap = min(cap, 128)  # the first (partition) index
        elif isinstance(node, ast.Call) and src.call_name(node) in ("nl.ndarray", "nl.zeros", "nl.full"):
            shape = node.args[0] if node.args else None
            if isinstance(shape, ast.Tuple) and shape.elts:
                if name in A.read_names(shape.elts[0]):
                    cap = min(cap, 128)
                psum = any(k.arg == "buffer" and src.qualname(k.value) == "nl.psum" for k in node.keywords)
                if psum and name in A.read_names(shape):
                    cap = min(cap, 512)
        elif isinstance(node, ast.Call) and src.call_name(node) in _PSUM_OPS and name in A.read_names(node):
            cap = min(cap, 512)
    return cap


def _cand(src, name, node, old, new):
    larger = new > old
    return Candidate(src, f"{name}={new}", f"set the tile size {name} from {old} to {new}"
                     + (" (larger tiles: fewer instructions and DMAs)" if larger else " (smaller tiles)"),
                     (lambda: [src.replace_node(node, str(new))]), {"name": name, "value": new, "old": old},
                     {"instructions": 1.0, "dma": 0.6, "vector": 0.3, "scalar": 0.3} if larger
                     else {"tensor": 0.5, "dma": 0.5}, 53.0 if larger else 45.0,
                     effect=effects.TILE_LARGER if larger else effects.TILE_SMALLER)

"""Shared by ``evict_engine`` and ``copy_engine``: reading a copy call, pinning it to an engine, and
which names are PSUM tiles.

Both rules rewrite ``nl.copy(t)`` / ``nisa.tensor_copy(t)`` into
``nisa.tensor_copy(t, engine=nisa.scalar_engine)`` (or ``vector_engine``);
they differ only in which sources they accept (PSUM vs SBUF tiles) and in the
documented effect they name (docs/rules.md).
"""
import ast

from . import analysis as A
from . import patterns as P
from .imports import isa_prefix

ENGINES = {"scalar": "scalar_engine", "vector": "vector_engine"}
_KEYS = ("src", "mask", "dtype", "engine")


def copy_args(src, node):
    """{'src', 'mask', 'dtype', 'engine': ast node} of a copy call, or None.

    None when ``node`` is not ``nl.copy`` / ``nisa.tensor_copy`` or has any
    argument besides the source, ``mask``, ``dtype`` and ``engine`` (or
    ``**kwargs``): such a copy is left alone.
    """
    if src.call_name(node) not in ("nl.copy", "nisa.tensor_copy"):
        return None
    if len(node.args) > 1 or any(k.arg is None for k in node.keywords):
        return None
    args = dict(zip(_KEYS, node.args))
    args.update({k.arg: k.value for k in node.keywords})
    if "x" in args:  # nl.copy(x=...)
        args["src"] = args.pop("x")
    if set(args) - set(_KEYS) or "src" not in args:
        return None
    return args


def free_engines(src, args):
    """[(engine, nisa attribute)] the copy may be pinned to: both, or the other one when already pinned.

    An existing ``engine=`` other than unknown is respected; one that cannot
    be read (not an attribute) or names GpSimd leaves nothing to propose.
    """
    current = args.get("engine")
    if current is None or P.trivial(src, "engine", current):
        return list(ENGINES.items())
    pinned = current.attr if isinstance(current, ast.Attribute) else "?"
    if pinned not in ENGINES.values():
        return []
    return [(eng, attr) for eng, attr in ENGINES.items() if attr != pinned]


def pin_edits(src, node, args, attr):
    """The edit list that replaces ``node`` with ``nisa.tensor_copy(..., engine=nisa.<attr>)``.

    ``mask`` and ``dtype`` are kept unless trivial; ``nisa`` is imported when
    the kernel lacks it (imports.isa_prefix).
    """
    isa, extra = isa_prefix(src)
    parts = [src.segment(args["src"])]
    for key in ("mask", "dtype"):
        if key in args and not P.trivial(src, key, args[key]):
            parts.append(f"{key}={src.segment(args[key])}")
    parts.append(f"engine={isa}.{attr}")
    return [src.replace_node(node, f"{isa}.tensor_copy({', '.join(parts)})")] + extra


_PSUM_RESULTS = {"nl.matmul", "nisa.nc_matmul", "nl.transpose", "nisa.nc_transpose"}


def psum_names(src, func):
    """Names of ``func`` every binding of which is a PSUM tile (bound only to ``nl.zeros/ndarray(..., buffer=nl.psum)`` or to
    ``nl.matmul``/``nisa.nc_matmul``/``nl.transpose``/``nisa.nc_transpose`` results)."""
    defs = A.bindings(func)
    out = set()
    for name, values in defs.items():
        if values and all(v is not None and _psum_value(src, v) for v in values):
            out.add(name)
    return out


def _psum_value(src, v):
    qual = src.call_name(v)
    if qual in _PSUM_RESULTS:
        return True
    if qual in ("nl.zeros", "nl.ndarray"):
        return any(k.arg == "buffer" and src.qualname(k.value) == "nl.psum" for k in v.keywords)
    return False


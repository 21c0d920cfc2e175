"""Recognisers shared by the peephole rules (reciprocal, exp, tensor_scalar forms, temps).

A *temp* is a name bound once by ``t = <expr>`` and read once, later, in a
simple statement of the same block (analysis.single_use_temp). Peephole
rules may look through temps: the temp's definition is deleted and its
expression re-evaluated at the consumer, which is only done when nothing
between the two statements rebinds or writes a name the expression reads.
"""
import ast
import re

from . import analysis as A
from . import blocks
from .walk import walk

TYPED_ZERO = re.compile(r"np\.dtype\(np\.u?int(8|16|32|64)\)\.type\(0\)")
INT_DTYPES = re.compile(r"\b(u?int(8|16|32|64)|iota|bool_)\b")


def is_op(src, node, name):
    """True if ``node`` names the NKI op ``nl.<name>`` (e.g. ``nl.multiply``)."""
    return isinstance(node, (ast.Attribute, ast.Name)) and src.qualname(node) == "nl." + name


def number(node):
    """Numeric value of a literal (``1.0``, ``-1``), of ``np.float32(<literal>)`` or of the
    compiler's spelling ``np.dtype(np.float32).type(<literal>)``; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = number(node.operand)
        return -v if v is not None else None
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        f = node.func
        if _is_np_float32(f) or (isinstance(f, ast.Attribute) and f.attr == "type"
                                 and isinstance(f.value, ast.Call) and _np_attr(f.value.func, "dtype")
                                 and len(f.value.args) == 1 and _is_np_float32(f.value.args[0])):
            return number(node.args[0])
    return None


def _np_attr(node, attr):
    return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) \
        and node.value.id in ("np", "numpy")


def _is_np_float32(node):
    return _np_attr(node, "float32")


def is_float32(src, node):
    """True if ``node`` spells the float32 dtype (``np.float32``, ``nl.float32``, ``"float32"``)."""
    if isinstance(node, ast.Constant):
        return node.value == "float32"
    return _is_np_float32(node) or src.qualname(node) == "nl.float32" if isinstance(node, ast.Attribute) \
        else False


def trivial(src, key, value):
    """True if keyword ``key=value`` of an NKI call changes nothing in a float32 kernel:
    ``mask=None``, ``dtype=float32``, ``engine=unknown`` (the compiler's choice), ``reverse0/1=False``.
    (Kernels are float32 only: the harness rejects 16-bit types, nkibench/README.md.)"""
    if key == "mask" or key in ("reverse0", "reverse1"):
        return isinstance(value, ast.Constant) and value.value in (None, False)
    if key == "dtype":
        return is_float32(src, value) and not integer_dtypes(src)
    if key == "engine":
        return isinstance(value, ast.Attribute) and value.attr in ("unknown_engine", "unknown")
    return False


def clean(src, args):
    """``args`` (a call_args mapping or None) without its trivial keywords (see ``trivial``)."""
    if args is None:
        return None
    return {k: v for k, v in args.items() if not trivial(src, k, v)}


def only_keys(args, allowed):
    """True if the mapping ``args`` has no key outside ``allowed``."""
    return args is not None and set(args) <= set(allowed)


def reciprocal_arg(src, node):
    """x for ``nisa.reciprocal(x)``, ``nl.reciprocal(x)`` or ``nisa.activation(op=nl.reciprocal, data=x)``
    (no dtype, mask, scale or bias); else None."""
    qual = src.call_name(node)
    if qual in ("nisa.reciprocal", "nl.reciprocal"):
        args = clean(src, A.call_args(node, qual))
        key = "data" if qual == "nisa.reciprocal" else "x"
        return args[key] if only_keys(args, {key}) and key in args else None
    if qual == "nisa.activation":
        args = clean(src, A.call_args(node, qual))
        if only_keys(args, {"op", "data"}) and "data" in args and is_op(src, args.get("op"), "reciprocal"):
            return args["data"]
    return None


def activation_of(src, node, op):
    """x for ``nisa.activation(op=nl.<op>, data=x)`` without scale/bias/reduce/dtype/mask; else None."""
    if src.call_name(node) != "nisa.activation":
        return None
    args = clean(src, A.call_args(node, "nisa.activation"))
    if only_keys(args, {"op", "data"}) and "data" in args and is_op(src, args.get("op"), op):
        return args["data"]
    return None


def neg_exp_arg(src, node):
    """x for exp(-x): ``nisa.activation(op=nl.exp, data=x, scale=-1.0)`` or ``nl.exp(nl.negative(x))``."""
    qual = src.call_name(node)
    if qual == "nisa.activation":
        args = clean(src, A.call_args(node, qual))
        if args is not None and "bias" in args and zero_bias(src, args["bias"]):
            args = {k: v for k, v in args.items() if k != "bias"}
        if only_keys(args, {"op", "data", "scale"}) and is_op(src, args.get("op"), "exp") \
                and "data" in args and number(args.get("scale")) == -1.0:
            return args["data"]
    if qual == "nl.exp" and len(node.args) == 1 and not node.keywords:
        inner = node.args[0]
        if src.call_name(inner) == "nl.negative" and len(inner.args) == 1 and not inner.keywords:
            return inner.args[0]
    return None


def one_plus_arg(src, node):
    """e for 1 + e: ``tensor_scalar(data=e, op0=nl.add, operand0=1.0)``, ``nl.add(e, 1.0)``, ``e + 1``..."""
    qual = src.call_name(node)
    if qual == "nisa.tensor_scalar":
        args = clean(src, A.call_args(node, qual))  # reverse0 is irrelevant for add
        if only_keys(args, {"data", "op0", "operand0", "reverse0"}) and is_op(src, args.get("op0"), "add") \
                and number(args.get("operand0")) == 1.0 and "data" in args:
            return args["data"]
        return None
    if qual == "nl.add":
        args = clean(src, A.call_args(node, qual))
        if only_keys(args, {"x", "y"}) and len(args) == 2:
            if number(args["y"]) == 1.0:
                return args["x"]
            if number(args["x"]) == 1.0:
                return args["y"]
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        if number(node.right) == 1.0:
            return node.left
        if number(node.left) == 1.0:
            return node.right
    return None


def multiply_operands(src, node):
    """(a, b) for ``nl.multiply(a, b)`` (no dtype/mask) or ``a * b``; else None."""
    if src.call_name(node) == "nl.multiply":
        args = clean(src, A.call_args(node, "nl.multiply"))
        if only_keys(args, {"x", "y"}) and len(args) == 2:
            return args["x"], args["y"]
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return node.left, node.right
    return None


def pure(node, src=None):
    """True if ``node`` is a name or a subscript of names/constants/arithmetic: no calls, except
    (with ``src``) ``nl.arange`` index expressions, which have no effect."""
    for n in walk(node):
        if isinstance(n, ast.Call) and src is not None and src.call_name(n) == "nl.arange":
            continue
        if isinstance(n, (ast.Call, ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield)):
            return False
    return True


def _typed_zero(node):
    """True for ``np.dtype(<any>).type(0)`` (the compiler writes memset values this way)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "type" \
        and isinstance(node.func.value, ast.Call) and _np_attr(node.func.value.func, "dtype") \
        and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0


def zero_bias(src, node):
    """True if ``node`` reads a (P, 1) tile whose only writes are ``nisa.memset(..., value=0)``
    (the compiler's zero bias of an activation), e.g. ``v3[nl.arange(128)[:, None], 0]``."""
    root = A.root_name(node)
    func = A.enclosing(src, node, (ast.FunctionDef, ast.AsyncFunctionDef))
    if root is None or func is None:
        return False
    writes = 0
    for n in walk(func):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Subscript) and A.root_name(t) == root:
                    if src.call_name(n.value) != "nisa.memset":
                        return False
                    value = [k.value for k in n.value.keywords if k.arg == "value"]
                    if len(value) != 1 or not (number(value[0]) == 0.0 or _typed_zero(value[0])):
                        return False
                    writes += 1
                elif any(isinstance(x, ast.Name) and x.id == root for x in walk(t)) \
                        and not (isinstance(t, ast.Name) and blocks.on_chip_alloc(src, n)):
                    return False
        elif isinstance(n, ast.AugAssign) and A.root_name(n.target) == root:
            return False
        elif isinstance(n, ast.Call) and src.call_name(n) is None and root in A.read_names(n):
            return False  # a helper might write it
        elif isinstance(n, ast.keyword) and n.arg in A.WRITE_KWARGS and A.root_name(n.value) == root:
            return False
    return writes >= 1


def same_expr(a, b):
    """Structural equality of two expressions (ignoring positions)."""
    return ast.dump(a) == ast.dump(b)


class Inlining:
    """Looks through temps towards one consumer statement and checks the moves are safe.

    ``look(node)`` returns the temp's defining expression when ``node`` is a
    temp read (recording its definition for deletion), else ``node``
    itself. ``safe()`` verifies that every recorded definition lives in the
    consumer's block before it and that nothing in between rebinds or writes
    a name its expression reads.
    """

    def __init__(self, src, func, consumer_stmt):
        self.src, self.func, self.stmt = src, func, consumer_stmt
        self.defs = []
        self.allocs = []  # allocations of block temps (deleted with their store)

    def look(self, node):
        """The expression behind ``node`` (through at most one temp or block temp)."""
        if isinstance(node, ast.Subscript):
            bt = blocks.block_temp(self.src, self.func, node)
            if bt is None:
                return node
            self.defs.append(bt.store)
            self.allocs.append(bt.alloc)
            return bt.store.value
        if not isinstance(node, ast.Name):
            return node
        stores = A.name_stores(self.func, node.id)
        if len(stores) != 1:
            return node
        def_stmt = A.statement_of(self.src, stores[0])
        info = A.single_use_temp(self.src, self.func, node.id, def_stmt)
        if info is None or info[0] is not node:
            return node
        self.defs.append(def_stmt)
        return def_stmt.value

    def safe(self):
        """True if all recorded temp definitions may be evaluated at the consumer instead."""
        body, k = A.body_of(self.src, self.stmt)
        if body is None:
            return False
        for d in self.defs:
            if d not in body or body.index(d) >= k:
                return False
            if not A.stable_between(self.src, body, body.index(d), k, A.read_names(d.value)):
                return False
        return True

    def deletions(self):
        """Edits deleting the recorded temp definitions (and block temps' allocations)."""
        out = []
        for d in self.defs + self.allocs:
            body, _ = A.body_of(self.src, d)
            out.append(self.src.delete_stmt(d, body))
        return out


def tile_names(src, func):
    """Names of ``func`` every binding of which is the result of an NKI call (a tile) or a
    subscript/method view of such a name."""
    defs = {}
    for node in walk(func):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    defs.setdefault(t.id, []).append(node.value)
                else:
                    for n in A.name_stores(t):
                        defs.setdefault(n.id, []).append(None)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
            defs.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, (ast.For, ast.comprehension, ast.NamedExpr)):
            for n in A.name_stores(node.target):
                defs.setdefault(n.id, []).append(None)
        elif isinstance(node, ast.With):
            for item in node.items:
                for n in A.name_stores(item.optional_vars) if item.optional_vars is not None else ():
                    defs.setdefault(n.id, []).append(None)
    for a in func.args.args + func.args.kwonlyargs + func.args.posonlyargs:
        defs.setdefault(a.arg, []).append(None)
    tiles = set()
    changed = True
    while changed:
        changed = False
        for name, values in defs.items():
            if name not in tiles and all(v is not None and _tile_value(src, v, tiles) for v in values):
                tiles.add(name)
                changed = True
    return tiles


_NOT_TILE_CALLS = {"nl.affine_range", "nl.sequential_range", "nl.static_range", "nl.program_id",
                   "nl.num_programs", "nl.program_ndim", "nl.arange", "nl.mgrid", "nl.par_dim",
                   "nl.shared_constant", "nl.loop_reduce", "nl.device_print", "nl.store"}
_ALLOC_CALLS = {"nl.ndarray", "nl.zeros", "nl.ones", "nl.full", "nl.zeros_like", "nl.ones_like",
                "nl.empty_like", "nl.full_like"}


def _tile_call(src, call, qual):
    if qual in _NOT_TILE_CALLS:
        return False
    if qual in _ALLOC_CALLS:  # on chip unless allocated in HBM
        if len(call.args) > 2:
            return False  # buffer may be positional: unknown
        buf = [k.value for k in call.keywords if k.arg == "buffer"]
        return not buf or src.qualname(buf[0]) in ("nl.sbuf", "nl.psum")
    return True


def _tile_value(src, v, tiles):
    return is_tile(src, v, tiles)


def is_tile(src, expr, tiles):
    """True if ``expr`` provably is an on-chip tile: an NKI compute/load call, a name in
    ``tiles``, or a subscript / ``.broadcast_to`` of one."""
    if isinstance(expr, ast.Name):
        return expr.id in tiles
    if isinstance(expr, ast.Subscript):
        return is_tile(src, expr.value, tiles)
    qual = src.call_name(expr)
    if qual is not None:
        return _tile_call(src, expr, qual)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "broadcast_to":
        return is_tile(src, expr.func.value, tiles)
    return False


def label(src, stmt):
    """Short name of a statement for plan sites: its assignment target text, else its kind."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        text = src.segment(stmt.targets[0]).replace(" ", "")
        if len(text) > 24 and isinstance(stmt.targets[0], ast.Subscript) and A.root_name(stmt.targets[0]):
            return A.root_name(stmt.targets[0]) + "[]"  # a block-tensor store (compiler style)
        return text
    if isinstance(stmt, ast.AugAssign):
        return src.segment(stmt.target).replace(" ", "") + "+="
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return (src.call_name(stmt.value) or "call").split(".")[-1]
    if isinstance(stmt, ast.Return):
        return "return"
    return type(stmt).__name__.lower()


def integer_dtypes(src):
    """True if the kernel mentions integer dtypes or iota (elementwise dtype rules then differ).

    The compiler's spelling of a zero memset value, ``np.dtype(np.uint16).type(0)``, does not count.
    """
    return bool(INT_DTYPES.search(TYPED_ZERO.sub("", src.text)))

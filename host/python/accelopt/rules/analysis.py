"""Small def-use and scalar analyses over kernel functions (conservative).

Everything here answers "can we prove it?"; an unknown answers no.
"""
import ast
from .walk import walk

LOOP_CALLS = ("nl.affine_range", "nl.sequential_range", "nl.static_range")
RANGE_CALLS = LOOP_CALLS + ("range",)
SCALAR_FUNCS = {"float", "int", "abs", "min", "max", "round"}
# builtins that never write into their arguments
PURE_BUILTINS = SCALAR_FUNCS | {"range", "len", "slice", "tuple", "list", "isinstance", "print", "str", "bool"}
# modules whose calls never write kernel tensors (np.float32(...), np.dtype(...).type(...), math.sqrt)
PURE_MODULES = {"np", "numpy", "math"}
SCALAR_MODULE_FUNCS = {"sqrt", "exp", "log", "float32", "float64", "ceil", "floor", "prod"}
# NKI call keywords through which a call writes an existing tile.
WRITE_KWARGS = {"reduce_res"}

# Positional parameter order of the NKI calls the rules rewrite.
SIGNATURES = {
    "nisa.tensor_scalar": ("data", "op0", "operand0", "reverse0", "op1", "operand1", "reverse1"),
    "nisa.activation": ("op", "data", "bias", "scale"),
    "nisa.reciprocal": ("data",),
    "nl.reciprocal": ("x",),
    "nl.load": ("src",),
    "nl.store": ("dst", "value"),
}
for _n in ("add", "subtract", "multiply", "divide", "maximum", "minimum"):
    SIGNATURES["nl." + _n] = ("x", "y")


def call_args(call, qual):
    """{param: node} of ``call`` to API ``qual`` (positional mapped by SIGNATURES), or None if unknown."""
    sig = SIGNATURES.get(qual)
    if sig is None or len(call.args) > len(sig) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    out = dict(zip(sig, call.args))
    for kw in call.keywords:
        if kw.arg is None or kw.arg in out:
            return None
        out[kw.arg] = kw.value
    return out


def functions(tree):
    """All function definitions of the module (nested ones included), in source order."""
    return [n for n in walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def statement_lists(func):
    """Every non-empty statement list (a ``body`` or ``orelse``) inside ``func``, itself included."""
    for node in walk(func):
        for field in ("body", "orelse"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body


def name_loads(node, name=None):
    """Name nodes read inside ``node`` (optionally only ``name``)."""
    return [n for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and (name is None or n.id == name)]


def name_stores(node, name=None):
    """Name nodes bound inside ``node`` (assignment/for/with targets; optionally only ``name``)."""
    return [n for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))
            and (name is None or n.id == name)]


def read_names(node):
    """Set of names read inside ``node``."""
    return {n.id for n in name_loads(node)}


def root_name(expr):
    """The base variable of ``x``, ``x[...]``, ``x.attr``, ``x.reshape(...)[...]``; None otherwise."""
    while True:
        if isinstance(expr, ast.Name):
            return expr.id
        if isinstance(expr, (ast.Subscript, ast.Attribute)):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        else:
            return None


def _target_parts(t):
    """The assignment target ``t`` and, for tuple/list/starred targets, their parts (index
    expressions inside a subscript target are reads, not targets)."""
    yield t
    if isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _target_parts(e)
    elif isinstance(t, ast.Starred):
        yield from _target_parts(t.value)


def written_roots(src, node):
    """Names whose tensors may be written inside ``node``.

    Subscript/augmented assignment targets, ``nl.store`` destinations,
    ``reduce_res=`` tiles, and every name passed to a call that is not an NKI
    API (a helper function may store into it).
    """
    out = set()
    for n in walk(node):
        targets = []
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        for t in targets:
            for sub in _target_parts(t):
                if isinstance(sub, (ast.Subscript, ast.Attribute)) or \
                        (isinstance(n, ast.AugAssign) and isinstance(sub, ast.Name)):
                    r = root_name(sub)
                    if r:
                        out.add(r)
        if isinstance(n, ast.Call):
            qual = src.call_name(n)
            if qual == "nl.store":
                args = call_args(n, qual) or {}
                dst = args.get("dst")
                if dst is not None and root_name(dst):
                    out.add(root_name(dst))
            elif qual is None:
                func_root = root_name(n.func) if isinstance(n.func, ast.Attribute) else None
                if func_root in src.aliases or func_root in PURE_MODULES or \
                        (isinstance(n.func, ast.Name) and n.func.id in PURE_BUILTINS):
                    continue
                if isinstance(n.func, ast.Attribute) and n.func.attr in ("reshape", "broadcast_to", "astype",
                                                                         "expand_dims", "view"):
                    continue  # views/copies: do not write
                for a in list(n.args) + [k.value for k in n.keywords]:
                    for r in read_names(a):
                        out.add(r)
            for kw in n.keywords:
                if kw.arg in WRITE_KWARGS and root_name(kw.value):
                    out.add(root_name(kw.value))
    return out


def bindings(func):
    """{name: [bound value expression, or None when not a plain ``name = <expr>``]} of ``func``:
    plain assignments give their value; other bindings (for/with targets, annotated
    assignments, walrus, tuple unpacking) give None. ``name += v`` is not a binding here: on a
    tile it updates in place (its buffer, shape and dtype stay)."""
    defs = {}
    for node in walk(func):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                for n in name_stores(t):
                    defs.setdefault(n.id, []).append(node.value if t is n else None)
        elif isinstance(node, (ast.AnnAssign, ast.For, ast.comprehension, ast.NamedExpr)):
            for n in name_stores(node.target):
                defs.setdefault(n.id, []).append(None)
        elif isinstance(node, ast.With):
            for item in node.items:
                for n in name_stores(item.optional_vars) if item.optional_vars is not None else ():
                    defs.setdefault(n.id, []).append(None)
    return defs


def body_of(src, stmt):
    """(body list, index) of the statement list that directly holds ``stmt``."""
    parent = src.parents.get(stmt)
    if parent is None:
        return None, -1
    for field in ("body", "orelse", "finalbody", "handlers"):
        lst = getattr(parent, field, None)
        if isinstance(lst, list) and stmt in lst:
            return lst, lst.index(stmt)
    return None, -1


def enclosing(src, node, kinds):
    """Nearest ancestor of ``node`` that is an instance of ``kinds``, or None."""
    p = src.parents.get(node)
    while p is not None and not isinstance(p, kinds):
        p = src.parents.get(p)
    return p


def statement_of(src, node):
    """The innermost statement containing ``node``."""
    while node is not None and not isinstance(node, ast.stmt):
        node = src.parents.get(node)
    return node


def is_range_loop(src, stmt, kinds=RANGE_CALLS):
    """True if ``stmt`` is ``for <target> in <one of kinds>(...)``."""
    if not isinstance(stmt, ast.For) or stmt.orelse or not isinstance(stmt.iter, ast.Call):
        return False
    it = stmt.iter
    name = src.call_name(it)
    if name is None and isinstance(it.func, ast.Name) and it.func.id == "range":
        name = "range"
    return name in kinds


def single_use_temp(src, func, name, def_stmt):
    """Checks that ``name`` is a temporary defined by ``def_stmt`` and read exactly once later.

    Returns (use Name node, use statement, body, def index, use index) when
    ``name`` has exactly one binding in ``func`` (``def_stmt``, a plain
    ``name = <expr>``), exactly one read, and that read sits in a simple
    statement (assignment/expression) of the same statement list, after the
    definition, and outside any nested loop or branch. Otherwise None.
    """
    if not (isinstance(def_stmt, ast.Assign) and len(def_stmt.targets) == 1
            and isinstance(def_stmt.targets[0], ast.Name) and def_stmt.targets[0].id == name):
        return None
    if len(name_stores(func, name)) != 1:
        return None
    uses = name_loads(func, name)
    if len(uses) != 1:
        return None
    body, i = body_of(src, def_stmt)
    use_stmt = statement_of(src, uses[0])
    if body is None or use_stmt not in body:
        return None
    k = body.index(use_stmt)
    if k <= i or not isinstance(use_stmt, (ast.Assign, ast.Expr, ast.AugAssign, ast.Return)):
        return None
    return uses[0], use_stmt, body, i, k


def stable_between(src, body, i, k, names):
    """True if no statement body[i+1:k] rebinds or writes any of ``names``."""
    for stmt in body[i + 1:k]:
        bound = {n.id for n in name_stores(stmt)}
        if bound & names or written_roots(src, stmt) & names:
            return False
    return True


class Scalars:
    """Names of ``func`` provably bound to Python/NumPy scalars (never tiles).

    Module-level numeric constants, ``A, B = t.shape``, ``A = t.shape[i]``,
    range-loop variables and assignments of scalar expressions (fixpoint).
    Function parameters are unknown (an ``eps`` could be a tile) and excluded.
    """

    def __init__(self, src, func):
        self.src = src
        self.names = set()
        module_defs = {}
        for node in src.tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                module_defs.setdefault(node.targets[0].id, []).append(node.value)
        changed = True
        while changed:
            changed = False
            for name, values in module_defs.items():
                if name not in self.names and all(self.is_scalar(v) for v in values):
                    self.names.add(name)
                    changed = True
        params = {a.arg for a in func.args.args + func.args.kwonlyargs + func.args.posonlyargs}
        local_defs = {}
        for node in walk(func):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    self._collect(t, node.value, local_defs)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                local_defs.setdefault(node.target.id, []).append(None)
            elif isinstance(node, ast.For):
                loop_scalar = is_range_loop(src, node) and isinstance(node.target, ast.Name)
                for n in name_stores(node.target):
                    local_defs.setdefault(n.id, []).append("int" if loop_scalar else None)
            elif isinstance(node, (ast.With, ast.comprehension, ast.NamedExpr)):
                for n in name_stores(node):
                    local_defs.setdefault(n.id, []).append(None)
        for name in set(local_defs) | params:
            self.names.discard(name)  # shadowed module constants are re-decided locally
        changed = True
        while changed:
            changed = False
            for name, values in local_defs.items():
                if name in self.names or name in params:
                    continue
                if all(v == "int" or (v is not None and self.is_scalar(v)) for v in values):
                    self.names.add(name)
                    changed = True

    @staticmethod
    def _collect(target, value, out):
        if isinstance(target, ast.Name):
            if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Attribute) \
                    and value.value.attr == "shape":
                out.setdefault(target.id, []).append("int")
            else:
                out.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(value.elts) == len(target.elts) and not any(isinstance(e, ast.Starred) for e in target.elts):
            for elt, val in zip(target.elts, value.elts):  # M, K = 4096, 1024
                Scalars._collect(elt, val, out)
        elif isinstance(target, (ast.Tuple, ast.List)):
            shape = isinstance(value, ast.Attribute) and value.attr == "shape"
            for elt in target.elts:
                for n in name_stores(elt):
                    out.setdefault(n.id, []).append("int" if shape and isinstance(elt, ast.Name) else None)
        else:
            for n in name_stores(target):
                out.setdefault(n.id, []).append(None)

    def is_scalar(self, expr):
        """True if ``expr`` provably evaluates to a number (int/float), never a tile."""
        if isinstance(expr, ast.Constant):
            return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
        if isinstance(expr, ast.Name):
            return expr.id in self.names
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            return self.is_scalar(expr.operand)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult, ast.Div,
                                                                ast.FloorDiv, ast.Mod, ast.Pow)):
            return self.is_scalar(expr.left) and self.is_scalar(expr.right)
        if isinstance(expr, ast.Call) and not expr.keywords and expr.args:
            f = expr.func
            ok = (isinstance(f, ast.Name) and f.id in SCALAR_FUNCS) or (
                isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                and f.value.id in ("np", "numpy", "math") and f.attr in SCALAR_MODULE_FUNCS)
            return ok and all(self.is_scalar(a) for a in expr.args)
        return False


def module_number(src, name):
    """Value of a module-level ``name = <int/float literal>`` bound once, else None."""
    found = []
    for node in src.tree.body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if any(n.id == name for n in name_stores(t)):
                    found.append(node)
    if len(found) != 1 or not isinstance(found[0].targets[0], ast.Name):
        return None
    v = found[0].value
    if isinstance(v, ast.Constant) and isinstance(v.value, (int, float)) and not isinstance(v.value, bool):
        return v.value
    return None


def const_value(src, expr):
    """Numeric value of a literal or a module-level numeric constant name, else None."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)) \
            and not isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        v = const_value(src, expr.operand)
        return -v if v is not None else None
    if isinstance(expr, ast.Name):
        return module_number(src, expr.id)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Add, ast.Sub, ast.FloorDiv)):
        a, b = const_value(src, expr.left), const_value(src, expr.right)
        if a is None or b is None or (isinstance(expr.op, ast.FloorDiv) and b == 0):
            return None
        return {ast.Mult: a * b, ast.Add: a + b, ast.Sub: a - b}.get(type(expr.op), None) \
            if not isinstance(expr.op, ast.FloorDiv) else a // b
    return None


def shape_value(src, func, name):
    """The value of ``name`` when ``func`` binds it once from an argument's shape
    (``rows, cols = x.shape`` or ``cols = x.shape[1]``) and the request gave the
    arguments' shapes (``src.input_shapes``, in argument order), else None."""
    params = [a.arg for a in func.args.args]
    found = []
    for node in walk(func):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(n.id == name for t in targets for n in name_stores(t)):
                found.append(node)
    if len(found) != 1 or not isinstance(found[0], ast.Assign) or len(found[0].targets) != 1:
        return None
    target, value = found[0].targets[0], found[0].value
    dim = None
    if isinstance(target, ast.Tuple) and _is_shape_of(value, params):
        names = [e.id if isinstance(e, ast.Name) else None for e in target.elts]
        if name not in names:
            return None
        dim, array = names.index(name), value.value.id
    elif isinstance(target, ast.Name) and isinstance(value, ast.Subscript) and _is_shape_of(value.value, params) \
            and isinstance(value.slice, ast.Constant) and isinstance(value.slice.value, int):
        dim, array = value.slice.value, value.value.value.id
    if dim is None:
        return None
    index = params.index(array)
    shapes = getattr(src, "input_shapes", None) or []
    if index >= len(shapes) or not -len(shapes[index]) <= dim < len(shapes[index]):
        return None
    return shapes[index][dim]


def _is_shape_of(expr, params):
    return isinstance(expr, ast.Attribute) and expr.attr == "shape" and isinstance(expr.value, ast.Name) \
        and expr.value.id in params


def tiled_extents(src, name):
    """The argument dimensions a tile-size constant ``name`` divides in the kernel: ``E`` of
    ``E // name``, ``E % name`` and ``range(a, E, name)`` (any ``*range``), where ``E`` is known
    from the arguments' shapes (``src.input_shapes``: a name bound from ``x.shape``, or
    ``x.shape[k]`` itself) or is an integer literal. An empty set when none is known."""
    out = set()
    for func in functions(src.tree):
        params = [a.arg for a in func.args.args]
        for node in walk(func):
            extent = None
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mod)) \
                    and isinstance(node.right, ast.Name) and node.right.id == name:
                extent = node.left
            elif isinstance(node, ast.Call) and len(node.args) == 3 and isinstance(node.args[2], ast.Name) \
                    and node.args[2].id == name and (src.call_name(node) or getattr(node.func, "id", "") or "").endswith("range"):
                extent = node.args[1]
            if extent is None:
                continue
            value = _extent_value(src, func, params, extent)
            if isinstance(value, int) and value > 0:
                out.add(value)
    return out


def _extent_value(src, func, params, expr):
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr.value
    if isinstance(expr, ast.Name):
        return shape_value(src, func, expr.id)
    if isinstance(expr, ast.Subscript) and _is_shape_of(expr.value, params) and isinstance(expr.slice, ast.Constant) \
            and isinstance(expr.slice.value, int):
        shapes = getattr(src, "input_shapes", None) or []
        index, dim = params.index(expr.value.value.id), expr.slice.value
        if index < len(shapes) and -len(shapes[index]) <= dim < len(shapes[index]):
            return shapes[index][dim]
    return None


def tile_fits_shapes(src, name, value):
    """Whether tile size ``value`` for the constant ``name`` can work for the arguments' shapes
    (``src.input_shapes``): it divides every dimension the kernel tiles with ``name``
    (``tiled_extents``), or, when none of those is known, some dimension of some argument.
    True when the shapes are unknown or ``value`` is not a positive integer."""
    shapes = getattr(src, "input_shapes", None) or []
    if not shapes or type(value) is not int or value <= 0:
        return True
    extents = tiled_extents(src, name)
    if extents:
        return all(extent % value == 0 for extent in extents)
    return any(dim > 0 and dim % value == 0 for shape in shapes for dim in shape)

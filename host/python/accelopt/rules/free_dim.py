"""Free-dimension analysis shared by the rules that widen or re-slice tiles (``widen_loop``,
``tile_free``, ``hoist_transpose``): which elementwise calls are safe to widen, and reading a
loop variable's stride out of an index expression (``j * W``, ``(j + 1) * W``).
"""
import ast

from .walk import walk

# The nki.language / nki.isa calls that act element by element along the free dimension: a
# wider (or chunked) free extent changes their instruction count, never their result.
NL_OK = {"load", "store", "copy", "add", "subtract", "multiply", "divide", "maximum", "minimum",
          "power", "exp", "log", "sqrt", "rsqrt", "square", "reciprocal", "sigmoid", "tanh", "relu",
          "gelu", "gelu_apprx_tanh", "silu", "softplus", "mish", "erf", "abs", "sign", "sin", "cos",
          "negative", "identity"}
NISA_OK = {"activation", "tensor_scalar", "tensor_tensor", "reciprocal", "tensor_copy"}


def is_loop_var(node, j):
    """Whether ``node`` is the name ``j``."""
    return isinstance(node, ast.Name) and node.id == j


def mul_j(expr, j):
    """W for ``j * W`` or ``W * j`` (W free of j), else None."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        for a, b in ((expr.left, expr.right), (expr.right, expr.left)):
            if is_loop_var(a, j) and not any(is_loop_var(n, j) for n in walk(b)):
                return b
    return None


def mul_j1(expr, j):
    """W for ``(j + 1) * W``, ``W * (j + 1)`` or ``j * W + W``, else None."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        for a, b in ((expr.left, expr.right), (expr.right, expr.left)):
            if isinstance(a, ast.BinOp) and isinstance(a.op, ast.Add) and not any(is_loop_var(n, j) for n in walk(b)):
                pair = (a.left, a.right)
                if any(is_loop_var(p, j) for p in pair) and any(isinstance(p, ast.Constant) and p.value == 1
                                                          for p in pair):
                    return b
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        w = mul_j(expr.left, j)
        if w is not None and ast.dump(w) == ast.dump(expr.right):
            return w
    return None


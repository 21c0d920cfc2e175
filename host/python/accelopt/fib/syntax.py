"""Python syntax checks for FIB's validators (flashinfer/model.h, PythonSyntax).

Only the AST is built; nothing is executed. Imports nothing but ``ast`` so the
C++ validator can call it without torch.
"""
import ast


def _error_text(exc):
    line = getattr(exc, "lineno", None)
    message = getattr(exc, "msg", None) or str(exc)
    return f"{message} (line {line})" if line else message


def check_module(source):
    """None when ``source`` parses and defines a top-level ``def run``; else the error (str)."""
    try:
        tree = ast.parse(source, mode="exec")
    except (SyntaxError, ValueError) as exc:
        return "must be valid Python code: " + _error_text(exc)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "run":
            return None
    return "must define a top-level function named 'run'"


def check_expression(source):
    """None when ``source`` is one Python expression; else the error (str)."""
    try:
        ast.parse(source, mode="eval")
    except (SyntaxError, ValueError) as exc:
        return _error_text(exc)
    return None


def check_many(items):
    """Batch form: ``[{"kind": "module"|"expression", "source": str}]`` -> list of (str|None)."""
    out = []
    for item in items:
        check = check_expression if item.get("kind") == "expression" else check_module
        out.append(check(item.get("source", "")))
    return out

"""Canonical state hashes of kernel sources for the graph search.

A kernel's state is its source with comments, formatting and docstrings
removed: the text is parsed with ``ast``, docstrings (a string constant as
the first statement of a module, function or class) are dropped, and the
hash is the SHA-256 of ``ast.dump`` of what remains (no line numbers, no
attributes). Two sources that differ only in comments, blank lines,
indentation style, quotes or parentheses get the same hash; renaming a
variable or reordering statements gives another. NKI kernels have no launch
configuration beyond their source (grids are in the code), so the source
alone is the state.

A text that does not parse falls back to a hash of the text with '#'
comments and all whitespace removed (marked ``"ast": false``).
"""
import ast
import hashlib
import re

HASH_CHARS = 16


def _strip_docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def canonical_form(source):
    """(canonical text, parsed) of a kernel source; parsed is False for the text fallback."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        text = re.sub(r"#[^\n]*", "", source)
        return re.sub(r"\s+", "", text), False
    return ast.dump(_strip_docstrings(tree), annotate_fields=True, include_attributes=False), True


def state_hash(source):
    """16 hex digits of SHA-256 of the canonical form of ``source``."""
    text, _ = canonical_form(source)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_CHARS]


def state_hashes(request):
    """``{"sources": [str] | "paths": [str]}`` -> ``{"hashes": [...], "ast": [bool]}``.

    Paths that cannot be read get ``None``. Never raises for bad input:
    returns ``{"hashes": [], "error": {...}}`` instead.
    """
    if not isinstance(request, dict):
        return {"hashes": [], "error": {"kind": "bad_request", "message": "request must be an object"}}
    sources = request.get("sources")
    if sources is None:
        sources = []
        for path in request.get("paths") or []:
            try:
                with open(path, encoding="utf-8") as handle:
                    sources.append(handle.read())
            except (OSError, UnicodeDecodeError, TypeError):
                sources.append(None)
    hashes, parsed = [], []
    for source in sources:
        if not isinstance(source, str):
            hashes.append(None)
            parsed.append(False)
            continue
        text, ok = canonical_form(source)
        hashes.append(hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_CHARS])
        parsed.append(ok)
    return {"hashes": hashes, "ast": parsed}

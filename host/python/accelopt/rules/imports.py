"""Namespace aliases for generated code, adding the ``nki.isa`` import when a kernel lacks it."""
import ast

from .errors import NotApplicable
from .source import Edit
from .walk import walk

ISA_IMPORT = "import neuronxcc.nki.isa as nisa\n"


def isa_prefix(src):
    """(text naming the isa namespace, [Edit]) for code a rule generates.

    Uses the kernel's own alias when it has one (no edits); otherwise adds
    ``import neuronxcc.nki.isa as nisa`` after the last module-level NKI import,
    provided the name ``nisa`` is free. Raises NotApplicable when neither works.
    """
    try:
        return src.prefix("nisa"), []
    except NotApplicable:
        pass
    if any(isinstance(n, ast.Name) and n.id == "nisa" for n in walk(src.tree)) or "nisa" in src.aliases:
        raise NotApplicable("the kernel imports no nki.isa alias and uses the name 'nisa'")
    last = None
    for node in src.tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                a.name.split(".")[0] in ("neuronxcc", "nki") or (node.module or "").startswith(("neuronxcc", "nki"))
                for a in node.names):
            last = node
    if last is None:
        raise NotApplicable("the kernel has no module-level NKI import to add nki.isa next to")
    _, at = src.line_span(last.lineno, last.end_lineno)
    return "nisa", [Edit(at, at, ISA_IMPORT)]

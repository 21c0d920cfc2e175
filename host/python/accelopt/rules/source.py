"""Parsed kernel source plus text edits guided by AST positions.

Rewrites are expressed as character-range replacements on the original text
(``Edit``), so everything outside the replaced ranges (comments, blank lines,
formatting) survives. Positions come from the ``ast`` module (Python 3.11:
``col_offset`` counts UTF-8 bytes; ``Source`` converts them to characters).
"""
import ast
import difflib

from .errors import NotApplicable
from .walk import freeze

# Module paths (without a leading "neuronxcc.") of the two NKI namespaces.
LANGUAGE = "nki.language"
ISA = "nki.isa"


class Edit:
    """Replace text[start:end] (character offsets) by ``text``."""

    __slots__ = ("start", "end", "text")

    def __init__(self, start, end, text):
        self.start, self.end, self.text = start, end, text

    def __repr__(self):
        return f"Edit({self.start}, {self.end}, {self.text!r})"


class Source:
    """One kernel file: its text, AST, line offsets and NKI module aliases.

    Raises NotApplicable if the text is not valid Python.
    """

    def __init__(self, text):
        if not isinstance(text, str):
            raise NotApplicable("source must be a string")
        self.text = text
        try:
            self.tree = ast.parse(text)
        except SyntaxError as exc:
            raise NotApplicable(f"source does not parse: {exc.msg} (line {exc.lineno})") from exc
        self.lines = text.splitlines(keepends=True)
        self._line_start = []
        pos = 0
        for line in self.lines:
            self._line_start.append(pos)
            pos += len(line)
        self._line_start.append(pos)
        self.aliases = _module_aliases(self.tree)
        # The kernel arguments' shapes when the caller knows them (propose's input_shapes):
        # rules may read extents from them (analysis.shape_value).
        self.input_shapes = []
        self.parents = {}
        freeze(self.tree)
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node

    # --- positions ------------------------------------------------------------------
    def offset(self, lineno, col_bytes):
        """Character offset of (1-based line, UTF-8 byte column)."""
        if lineno - 1 >= len(self.lines):
            return len(self.text)
        line = self.lines[lineno - 1]
        return self._line_start[lineno - 1] + len(line.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))

    def span(self, node):
        """(start, end) character offsets of ``node``."""
        return (self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset))

    def segment(self, node):
        """The source text of ``node``."""
        start, end = self.span(node)
        return self.text[start:end]

    def line_span(self, first, last):
        """(start, end) offsets covering whole lines first..last (1-based, inclusive)."""
        return self._line_start[first - 1], self._line_start[min(last, len(self.lines))]

    def indent_of(self, node):
        """The leading whitespace of the line where ``node`` starts."""
        line = self.lines[node.lineno - 1]
        return line[:len(line) - len(line.lstrip())]

    def owns_lines(self, stmt):
        """True if ``stmt`` is alone on its lines (only whitespace/comments besides it)."""
        start, end = self.span(stmt)
        lo, hi = self.line_span(stmt.lineno, stmt.end_lineno)
        before = self.text[lo:start]
        after = self.text[end:hi].strip()
        return not before.strip() and (not after or after.startswith("#"))

    # --- NKI names ------------------------------------------------------------------
    def qualname(self, func):
        """"nl.<name>" / "nisa.<name>" for a call target in the NKI namespaces, else None."""
        parts = []
        node = func
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        parts.append(self.aliases[node.id])
        dotted = ".".join(reversed(parts))
        for prefix, short in ((LANGUAGE + ".", "nl."), (ISA + ".", "nisa.")):
            if dotted.startswith(prefix) and dotted.count(".") == prefix.count("."):
                return short + dotted[len(prefix):]
        return None

    def call_name(self, node):
        """qualname() of ``node`` if it is a Call, else None."""
        return self.qualname(node.func) if isinstance(node, ast.Call) else None

    def prefix(self, which):
        """Text that names the language ("nl") or isa ("nisa") namespace in this file.

        Raises NotApplicable if the file imports no usable alias for it.
        """
        module = LANGUAGE if which == "nl" else ISA
        best = None
        for alias, path in sorted(self.aliases.items()):
            if path == module:
                return alias
            if best is None and module.startswith(path + "."):
                best = alias + module[len(path):]
        if best is None:
            raise NotApplicable(f"the kernel imports no alias for {module}")
        return best

    # --- edits ----------------------------------------------------------------------
    def apply_edits(self, edits):
        """New text with ``edits`` applied; raises NotApplicable on overlap or a parse failure."""
        ordered = sorted(edits, key=lambda e: (e.start, e.end))
        for a, b in zip(ordered, ordered[1:]):
            if b.start < a.end:
                raise NotApplicable("internal: overlapping edits")
        out = self.text
        for e in reversed(ordered):
            out = out[:e.start] + e.text + out[e.end:]
        try:
            ast.parse(out)
        except SyntaxError as exc:
            raise NotApplicable(f"internal: rewrite produced invalid Python ({exc.msg})") from exc
        return out

    def replace_node(self, node, text):
        """Edit replacing ``node``'s text."""
        start, end = self.span(node)
        return Edit(start, end, text)

    def delete_stmt(self, stmt, body):
        """Edit deleting statement ``stmt`` (its whole lines) from the list ``body``.

        A statement that is the only one of its block is replaced by ``pass``.
        Raises NotApplicable if the statement shares its lines with other code.
        """
        if not self.owns_lines(stmt):
            raise NotApplicable(f"line {stmt.lineno}: statement shares its line with other code")
        lo, hi = self.line_span(stmt.lineno, stmt.end_lineno)
        if len(body) == 1:
            return Edit(lo, hi, self.indent_of(stmt) + "pass\n")
        lo, _ = self.line_span(self.comment_start(stmt), stmt.lineno)
        return Edit(lo, hi, "")

    def comment_start(self, stmt):
        """First line of the comment block directly above ``stmt`` (same indentation, no blank
        line, not an ``# accelopt:`` directive); ``stmt.lineno`` when there is none."""
        first = stmt.lineno
        indent = self.indent_of(stmt)
        while first > 1:
            prev = self.lines[first - 2]
            rest = prev[len(indent):]
            if prev.startswith(indent) and rest.startswith("#") and not rest.startswith("# accelopt:"):
                first -= 1
            else:
                break
        return first

    def stmt_text(self, stmt, indent):
        """``stmt``'s original lines, with the comment block directly above it, re-indented
        from its own indentation to ``indent``."""
        lo, hi = self.line_span(self.comment_start(stmt), stmt.end_lineno)
        old = self.indent_of(stmt)
        out = []
        for line in self.text[lo:hi].splitlines(keepends=True):
            out.append(indent + line[len(old):] if line.startswith(old) else line)
        text = "".join(out)
        return text if text.endswith("\n") else text + "\n"


def _module_aliases(tree):
    """Maps local names to NKI module paths ("nki", "nki.language", "nki.isa")."""
    aliases = {}

    def norm(path):
        if path == "neuronxcc":
            return None
        if path.startswith("neuronxcc."):
            path = path[len("neuronxcc."):]
        return path if path == "nki" or path.startswith("nki.") else None

    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                path = norm(a.name)
                if path is None:
                    continue
                if a.asname:
                    aliases[a.asname] = path
                elif a.name == "nki":
                    aliases["nki"] = "nki"
                # "import neuronxcc.nki.language" binds "neuronxcc": not supported (rare)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module
            for a in node.names:
                full = norm(f"{base}.{a.name}")
                if full is not None:
                    aliases[a.asname or a.name] = full
    return aliases


def unified_diff(old, new, name="kernel.py"):
    """Unified diff of two source texts (str)."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{name}", tofile=f"b/{name}"))


def unparse(node):
    """ast.unparse of ``node`` (Python 3.9+)."""
    return ast.unparse(node)

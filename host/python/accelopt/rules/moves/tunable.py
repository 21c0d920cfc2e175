"""Rule ``tunable``: set a declared tunable constant to another of its declared choices.

Declaration (module level, the comment on the line right before the assignment)::

    # accelopt: tunable TILE_N = 512 choices=[128, 256, 512]
    TILE_N = 512

Preconditions: the comment parses (NAME, VALUE, a literal list of numbers or
strings), the next line is a module-level ``NAME = <literal>`` bound only
there, and the new value is one of the choices and differs from the current
one. The kernel author vouches that every choice is valid for the shapes the
kernel accepts (its asserts); the profile stage checks it anyway. With the
arguments' shapes known (propose's ``input_shapes``), a numeric choice must
divide every dimension the kernel tiles with NAME (``N // NAME``,
``N % NAME``, ``range(0, N, NAME)``), or, when none is known, some argument
dimension (``analysis.tile_fits_shapes``): silu at N = 1024 is not offered
TILE_N = 2048, which fails its ``N % TILE_N == 0`` assert.
"""
import ast
import re

from .. import analysis as A
from .. import effects
from ..base import Candidate
from ..source import Edit
from ..walk import walk

NAME = "tunable"
SUMMARY = "Set a declared tunable (# accelopt: tunable NAME = V choices=[...]) to another choice."
EFFECT = ("tile size: larger tiles mean fewer, larger instructions and DMAs (fixed costs per instruction "
          "and DMA, nki-facts §3.2, §3.4); smaller ones more, shorter instructions and more iterations to "
          "overlap (nki-facts §3.6)")
GAIN = 0.15  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"instructions": 1.0, "dma": 0.6, "vector": 0.3, "scalar": 0.3}  # resource -> weight (docs/rules.md)
ORDER = 0  # position among the built-in rules when proposals tie (docs/rules.md)

DECL = re.compile(r"^(?P<indent>[ \t]*)#\s*accelopt:\s*tunable\s+(?P<name>[A-Za-z_]\w*)\s*=\s*"
                  r"(?P<value>[^\s]+)\s+choices\s*=\s*(?P<choices>\[.*\])\s*$")


class Tunable:
    """One declaration: name, current value, choices, the assignment node and comment line."""

    def __init__(self, name, value, choices, assign, line_no, match):
        self.name, self.value, self.choices = name, value, choices
        self.assign, self.line_no, self.match = assign, line_no, match


def declarations(src):
    """All well-formed tunable declarations of ``src`` (list of Tunable), in source order."""
    assigns = {}
    counts = {}
    for node in src.tree.body:
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in walk(t):
                    if isinstance(n, ast.Name):
                        counts[n.id] = counts.get(n.id, 0) + 1
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigns[node.lineno] = node
    out = []
    for idx, line in enumerate(src.lines):
        m = DECL.match(line.rstrip("\r\n"))
        if not m or m.group("indent"):
            continue
        node = assigns.get(idx + 2)
        name = m.group("name")
        if node is None or node.targets[0].id != name or counts.get(name) != 1:
            continue
        if not isinstance(node.value, ast.Constant) or isinstance(node.value.value, bool):
            continue
        try:
            choices = ast.literal_eval(m.group("choices"))
        except (ValueError, SyntaxError):
            continue
        if not isinstance(choices, list) or not choices or not all(
                isinstance(c, (int, float, str)) and not isinstance(c, bool) for c in choices):
            continue
        out.append(Tunable(name, node.value.value, choices, node, idx + 1, m))
    return out


def _literal(value):
    return repr(value)


def candidates(src):
    """One candidate per (declared tunable, choice different from its current value)."""
    out = []
    for decl in declarations(src):
        ordered = sorted(set(decl.choices), key=lambda c: (str(type(c)), c))
        for choice in ordered:
            if choice == decl.value or not A.tile_fits_shapes(src, decl.name, choice):
                continue
            numeric = isinstance(choice, (int, float)) and isinstance(decl.value, (int, float))
            if numeric and decl.value in ordered:
                dist = abs(ordered.index(choice) - ordered.index(decl.value))
            else:
                dist = 1
            larger = numeric and choice > decl.value
            relieves = {"instructions": 1.0, "dma": 0.6, "vector": 0.3, "scalar": 0.3} if larger \
                else {"tensor": 0.5, "dma": 0.5}
            base = 56.0 - 6.0 * dist + (3.0 if larger else 0.0)
            out.append(Candidate(
                src, f"{decl.name}={choice}",
                f"set tunable {decl.name} from {decl.value!r} to {choice!r}"
                + (" (larger tiles: fewer instructions and DMAs)" if larger else " (smaller tiles)"),
                _edits(src, decl, choice), {"name": decl.name, "value": choice, "old": decl.value},
                relieves, base, effect=(effects.TILE_LARGER if larger else effects.TILE_SMALLER) if numeric else None))
    return out


def _edits(src, decl, choice):
    def make():
        value_edit = src.replace_node(decl.assign.value, _literal(choice))
        lo, _ = src.line_span(decl.line_no, decl.line_no)
        m = decl.match
        comment = Edit(lo + m.start("value"), lo + m.end("value"), _literal(choice))
        return [value_edit, comment]
    return make

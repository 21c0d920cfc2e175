"""``ast.walk`` with memory, for the trees the rules analyse.

Proposing moves runs every rule over a kernel, and the rules ask for the nodes
under the same function, loop or statement again and again: on the large
published kernels the repeated walks were most of the host's time per search
round (issue 14, docs/benchmarks/rule-speed.txt). A :class:`Source`'s tree is
never modified (rules rewrite text; a rule that transforms nodes deep-copies
them first), so the nodes under any of its nodes can be listed once.
:func:`freeze` registers a parsed tree; :func:`walk` returns the cached list
for a node of a registered tree and walks any other node (a copy a rule
transforms) afresh. The lists are shared: callers iterate them, never change
them. The last ``KEEP`` trees stay registered.
"""
import ast
from collections import deque

KEEP = 4
_nodes = {}  # id(node) -> [node, descendants or None], for the nodes of registered trees
_trees = deque()  # registered trees' node lists, oldest first


def freeze(tree):
    """Registers ``tree`` (a freshly parsed module, never modified afterwards)."""
    nodes = list(ast.walk(tree))
    for n in nodes:
        _nodes[id(n)] = [n, None]
    _nodes[id(tree)][1] = nodes
    _trees.append(nodes)
    while len(_trees) > KEEP:
        for n in _trees.popleft():
            entry = _nodes.get(id(n))
            if entry is not None and entry[0] is n:
                del _nodes[id(n)]


def walk(node):
    """The nodes under ``node``, itself included, in ``ast.walk``'s order (a list for a
    node of a registered tree, else ``ast.walk``'s generator)."""
    entry = _nodes.get(id(node))
    if entry is None or entry[0] is not node:
        return ast.walk(node)
    if entry[1] is None:
        entry[1] = list(ast.walk(node))
    return entry[1]

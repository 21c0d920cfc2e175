"""Static import graph of a Python source tree (no module is executed).

``find_modules(root)`` maps dotted module names to file paths;
``build(modules)`` parses them and returns a :class:`Graph` whose edges go
from a module to each module of the tree it imports (``import a.b``,
``from . import x``, ``from .x import y``; statements inside functions
included; imports of modules outside the tree ignored); ``cycles(edges)``
lists the strongly connected components with more than one module.
"""
import ast
import os


class Graph:
    """``edges``: {module: set of imported modules of the tree}; ``private_imports``:
    [(module, imported module, name)] for every ``from X import _name`` (not dunder)
    where X is another module of the tree."""

    def __init__(self):
        self.edges = {}
        self.private_imports = []


def find_modules(root, skip_dirs=("__pycache__",)):
    """{dotted name: path} of every ``.py`` file below ``root`` (``pkg/__init__.py`` is
    ``pkg``), skipping directories named in ``skip_dirs``."""
    modules = {}
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in skip_dirs)
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            parts = os.path.relpath(os.path.join(directory, name), root)[:-3].split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts:
                modules[".".join(parts)] = os.path.join(directory, name)
    return modules


def build(modules):
    """Graph of ``modules`` ({dotted name: path}). Raises SyntaxError for an unparsable file."""
    sources, packages = {}, set()
    for name, path in modules.items():
        with open(path, encoding="utf-8") as handle:
            sources[name] = handle.read()
        if os.path.basename(path) == "__init__.py":
            packages.add(name)
    return build_from_sources(sources, packages)


def build_from_sources(sources, packages):
    """Graph of ``sources`` ({dotted name: source text}); ``packages``: names that are packages."""
    graph = Graph()
    for name, text in sources.items():
        graph.edges[name] = set()
        for node in ast.walk(ast.parse(text, filename=name)):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    _add(graph, name, _known_prefix(alias.name, sources))
            elif isinstance(node, ast.ImportFrom):
                base = _from_base(name, node, name in packages)
                for alias in node.names:
                    submodule = f"{base}.{alias.name}" if base else alias.name
                    if submodule in sources:
                        _add(graph, name, submodule)
                        continue
                    target = _known_prefix(base, sources)
                    _add(graph, name, target)
                    private = alias.name.startswith("_") and not alias.name.startswith("__")
                    if target is not None and target != name and private:
                        graph.private_imports.append((name, target, alias.name))
    return graph


def _from_base(module, node, is_package):
    """Absolute module named by a ``from X import`` statement in ``module``."""
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
    return ".".join(parts + ([node.module] if node.module else []))


def _known_prefix(name, sources):
    """The longest dotted prefix of ``name`` that is a module of the tree, or None."""
    while name and name not in sources:
        name = name.rpartition(".")[0]
    return name or None


def _add(graph, source, target):
    if target is not None and target != source:
        graph.edges[source].add(target)


def cycles(edges):
    """Strongly connected components of more than one module (each sorted), sorted (Tarjan,
    iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in edges:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)

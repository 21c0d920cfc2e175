"""The Python tree has no import cycle and no module imports another's private name.

Every ``import`` statement counts, also those inside functions: a lazy import
hides a cycle from the interpreter but not from a reader. The modules are
those of host/python (nki_emu, accelopt), bench/ and tests/python (fixtures
excluded: some are deliberately broken kernels).
"""
import os

from structure import import_graph

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROOTS = [os.path.join(REPO, "host", "python"), os.path.join(REPO, "bench"), os.path.join(REPO, "tests", "python")]

# Cycles that exist in directories being reworked by others, as sets of module names. A
# new cycle fails the test; one listed here may only disappear (then delete its entry).
KNOWN_CYCLES = []
# Module prefixes exempt from the private-name rule for the same reason.
PRIVATE_IMPORT_EXEMPT = ()


def _graph():
    modules = {}
    for root in ROOTS:
        modules.update(import_graph.find_modules(root, skip_dirs=("fixtures", "__pycache__")))
    return import_graph.build(modules)


def test_no_import_cycles():
    graph = _graph()
    cycles = import_graph.cycles(graph.edges)
    unexpected = [sorted(c) for c in cycles if not any(set(c) <= known for known in KNOWN_CYCLES)]
    assert not unexpected, "import cycles: " + "; ".join(
        " <-> ".join(c) + " (" + ", ".join(f"{m} -> {sorted(graph.edges[m] & set(c))}" for m in c) + ")"
        for c in unexpected)


def test_no_private_names_imported_across_modules():
    graph = _graph()
    found = [f"{m} imports {name} from {target}" for m, target, name in graph.private_imports
             if not m.startswith(PRIVATE_IMPORT_EXEMPT)]
    assert not found, "; ".join(found)


def test_checker_finds_a_cycle_and_a_private_import():
    modules = {"pkg": "", "pkg.a": "from . import b\n", "pkg.b": "def f():\n    from .a import _x\n"}
    graph = import_graph.build_from_sources(modules, packages={"pkg"})
    assert import_graph.cycles(graph.edges) == [["pkg.a", "pkg.b"]]
    assert graph.private_imports == [("pkg.b", "pkg.a", "_x")]
    acyclic = import_graph.build_from_sources({"c": "import d\n", "d": "import os\n"}, packages=set())
    assert import_graph.cycles(acyclic.edges) == [] and acyclic.edges == {"c": {"d"}, "d": set()}

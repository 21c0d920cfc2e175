"""A rule is one file (issue 40, item 2): accelopt/rules/moves/<NAME>.py holds the rule's
preconditions, rewrite, documented effect, gain and what it relieves, and registers itself by
being there. Shared analysis stays in accelopt/rules/, rules never import each other, every
rule is tested and documented, and no other file keeps a table keyed by rule names (the
effects, gains and the planner's relief table derive from the registry)."""
import ast
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PYTHON_ROOT = os.path.join(REPO, "host", "python")
RULES_DIR = os.path.join(PYTHON_ROOT, "accelopt", "rules")
MOVES_DIR = os.path.join(RULES_DIR, "moves")
sys.path.insert(0, PYTHON_ROOT)

from accelopt.rules import effects, registry  # noqa: E402


def _rule_files():
    return sorted(name[:-3] for name in os.listdir(MOVES_DIR) if name.endswith(".py") and not name.startswith("_"))


def _tree(path):
    with open(path, encoding="utf-8") as handle:
        return ast.parse(handle.read(), path)


def _top_level_names(tree):
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_every_rule_file_is_registered_with_its_whole_contract():
    builtins = [name for name, module in registry.RULES.items() if module.__name__.startswith("accelopt.rules.moves.")]
    assert sorted(builtins) == _rule_files()
    for name in builtins:
        module = registry.RULES[name]
        assert module.NAME == name and os.path.basename(module.__file__) == f"{name}.py"
        assert effects.EFFECTS[name] == module.EFFECT and "nki-facts" in module.EFFECT, name
        assert effects.GAINS[name] == module.GAIN, name
        assert registry.RELIEVES[name] == module.RELIEVES, name


def test_rules_live_only_in_moves():
    """A module of accelopt/rules/ outside moves/ that defines NAME and candidates is a rule out of place."""
    misplaced = []
    for name in sorted(os.listdir(RULES_DIR)):
        if name.endswith(".py"):
            defined = _top_level_names(_tree(os.path.join(RULES_DIR, name)))
            if {"NAME", "candidates"} <= defined:
                misplaced.append(name)
    assert not misplaced, f"rule modules outside accelopt/rules/moves/: {misplaced}"


def test_a_rule_imports_shared_analysis_never_another_rule():
    offenders = []
    for name in _rule_files():
        for node in ast.walk(_tree(os.path.join(MOVES_DIR, f"{name}.py"))):
            if isinstance(node, ast.ImportFrom):
                # level 1 is moves/ itself (another rule); "accelopt.rules.moves" spelled out is the same
                if node.level == 1 or (node.module or "").startswith("accelopt.rules.moves"):
                    offenders.append(f"{name}.py imports {'.' * node.level}{node.module or ''}")
    assert not offenders, "move the shared part to accelopt/rules/ (shared analysis):\n" + "\n".join(offenders)


def test_no_other_file_keeps_a_table_of_rules():
    """Effects, gains, reliefs and the rule order are declared in each rule's file only: no dict,
    list or tuple literal elsewhere under host/python names three or more built-in rules."""
    rules = set(_rule_files())
    offenders = []
    for root, _dirs, files in os.walk(PYTHON_ROOT):
        if os.path.abspath(root).startswith(MOVES_DIR):
            continue
        for file in files:
            if not file.endswith(".py"):
                continue
            path = os.path.join(root, file)
            for node in ast.walk(_tree(path)):
                items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None) \
                    if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else None
                if items is None:
                    continue
                named = {i.value for i in items if isinstance(i, ast.Constant) and i.value in rules}
                named |= {i.id for i in items if isinstance(i, ast.Name) and i.id in rules}
                if len(named) >= 3:
                    offenders.append(f"{os.path.relpath(path, REPO)}:{node.lineno}: {sorted(named)}")
    assert not offenders, "derive it from accelopt.rules.registry instead:\n" + "\n".join(offenders)


def test_every_rule_has_a_test_and_a_doc_section():
    tests_dir = os.path.join(REPO, "tests", "python", "rules")
    tests = ""
    for file in sorted(os.listdir(tests_dir)):
        if file.endswith(".py"):
            with open(os.path.join(tests_dir, file), encoding="utf-8") as handle:
                tests += handle.read()
    with open(os.path.join(REPO, "docs", "rules.md"), encoding="utf-8") as handle:
        doc = handle.read()
    untested = [n for n in _rule_files() if f'"{n}"' not in tests and f"'{n}'" not in tests]
    undocumented = [n for n in _rule_files() if f"| `{n}` |" not in doc]
    assert not untested, f"rules no test under tests/python/rules/ names: {untested}"
    assert not undocumented, f"rules without a row in docs/rules.md's vocabulary table: {undocumented}"


TOY_RULE = '''"""Rule ``toy_swap``: a test-only rule (swaps nl.multiply's operands; result and cost unchanged)."""
import ast

from ..base import Candidate
from ..walk import walk

NAME = "toy_swap"
SUMMARY = "Swap the operands of nl.multiply (test only)."
EFFECT = "none: a test of the rule contract (nki-facts §3.3: the product costs the same)"
GAIN = 0.05
RELIEVES = {"vector": 0.2}


def candidates(src):
    out = []
    for node in walk(src.tree):
        if isinstance(node, ast.Call) and src.call_name(node) == "nl.multiply" and len(node.args) == 2:
            a, b = (src.segment(x) for x in node.args)
            text = f"{src.prefix('nl')}.multiply({b}, {a})"
            out.append(Candidate(src, f"{a}*{b}", f"swap {a} and {b}", (lambda n=node, t=text: [src.replace_node(n, t)]),
                                 {}, RELIEVES, 5.0))
    return out
'''

TOY_CHECK = '''
import json, sys
from accelopt.rules import effects, propose, registry
from accelopt.search import vocabulary
kernel = open(sys.argv[1]).read()
plans = [p for p in propose({"source": kernel, "max_plans": 1000})["plans"] if p["rule"] == "toy_swap"]
kinds = {k["name"]: k for k in vocabulary.kinds()}
print(json.dumps({"registered": list(registry.RULES)[-1], "effect": effects.EFFECTS.get("toy_swap"),
                  "gain": effects.GAINS.get("toy_swap"), "relieves": vocabulary.relieves_of("toy_swap", []),
                  "kind": "toy_swap" in kinds, "plans": len(plans)}))
'''


def test_a_new_rule_is_one_new_file():
    """Copies the Python tree, adds one file to moves/ and nothing else: the rule is proposed, its
    effect, gain and relief are known, and the LLM planner's vocabulary offers it."""
    kernel = os.path.join(REPO, "nkibench", "kernels", "silu_0.py")
    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "python")
        shutil.copytree(PYTHON_ROOT, tree, ignore=shutil.ignore_patterns("__pycache__"))
        with open(os.path.join(tree, "accelopt", "rules", "moves", "toy_swap.py"), "w", encoding="utf-8") as handle:
            handle.write(TOY_RULE)
        env = dict(os.environ, PYTHONPATH=tree, ACCELOPT_RULES_PATH="")
        result = subprocess.run([sys.executable, "-c", TOY_CHECK, kernel], env=env, capture_output=True,
                                text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    import json
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["registered"] == "toy_swap"  # no ORDER: after the built-ins that declare one
    assert seen["effect"].startswith("none: a test") and seen["gain"] == 0.05
    assert seen["relieves"] == {"vector": 0.2} and seen["kind"] and seen["plans"] >= 1

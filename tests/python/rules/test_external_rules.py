"""A rule written outside the install, loaded from ACCELOPT_RULES_PATH (issue 36, item 10).

The worked example of docs/rules.md, "Writing a rule", is docs/examples/rules/swap_multiply.py:
it is loaded from its folder, proposed and applied like a built-in rule, and a module that
breaks the contract is refused with a message naming the file.
"""
import os
import shutil
import tempfile

from accelopt import rules
from accelopt.rules import effects, registry

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_EXAMPLE = os.path.join(_REPO, "docs", "examples", "rules")


def _silu():
    with open(os.path.join(_REPO, "nkibench", "kernels", "silu_0.py"), encoding="utf-8") as handle:
        return handle.read()


def test_the_documented_example_rule_loads_from_its_folder_and_applies():
    loaded, refused = registry.load_external([_EXAMPLE])
    try:
        assert refused == [], refused
        assert loaded == ["swap_multiply"], loaded
        plans = rules.propose({"source": _silu(), "rules": ["swap_multiply"], "max_plans": 10})["plans"]
        assert [p["id"] for p in plans] == ["swap_multiply:y_tile"], plans
        assert plans[0]["effect"] == effects.EFFECTS["swap_multiply"] and "example" in plans[0]["effect"]
        out = rules.apply({"source": _silu(), "plan": plans[0]})
        assert "y_tile = nl.multiply(r_tile, x_tile)" in out["source"], out
    finally:
        registry.unload_external(loaded)
    assert "swap_multiply" not in registry.RULES


def test_a_module_that_breaks_the_contract_is_refused_with_its_file():
    folder = tempfile.mkdtemp(prefix="accelopt_rules_ext_")
    try:
        with open(os.path.join(folder, "no_name.py"), "w", encoding="utf-8") as handle:
            handle.write("SUMMARY = 'x'\n\ndef candidates(src):\n    return []\n")
        with open(os.path.join(folder, "clash.py"), "w", encoding="utf-8") as handle:
            handle.write("NAME = 'tunable'\nSUMMARY = 'x'\n\ndef candidates(src):\n    return []\n")
        with open(os.path.join(folder, "broken.py"), "w", encoding="utf-8") as handle:
            handle.write("def broken(:\n")
        loaded, refused = registry.load_external([folder])
        assert loaded == [], loaded
        text = "\n".join(refused)
        assert "no_name.py" in text and "NAME" in text, text
        assert "clash.py" in text and "'tunable' is already a rule" in text, text
        assert "broken.py" in text and "SyntaxError" in text, text
        assert registry.RULES["tunable"].__name__ == "accelopt.rules.moves.tunable"
    finally:
        shutil.rmtree(folder, True)

"""accelopt.rules.engine_pin: which copy calls the engine-pinning rules read, and which engines stay free."""
import ast
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers  # noqa: E402,F401  (puts accelopt on sys.path)

from accelopt.rules.engine_pin import copy_args, free_engines, pin_edits  # noqa: E402
from accelopt.rules.source import Source  # noqa: E402

HEADER = "import neuronxcc.nki.language as nl\nimport neuronxcc.nki.isa as nisa\n"


def _call(line):
    src = Source(HEADER + line + "\n")
    node = next(n for n in ast.walk(src.tree) if isinstance(n, ast.Call) and src.call_name(n))
    return src, node


def test_copy_args_reads_source_mask_dtype_engine():
    src, node = _call("y = nl.copy(x=t, dtype=nl.bfloat16)")
    args = copy_args(src, node)
    assert set(args) == {"src", "dtype"} and src.segment(args["src"]) == "t"


def test_copy_args_refuses_other_calls_and_extra_arguments():
    for line in ("y = nl.exp(t)", "y = nl.copy(t, u)", "y = nl.copy(t, **kw)", "y = nl.copy(t, name='n')"):
        src, node = _call(line)
        assert copy_args(src, node) is None, line


def test_free_engines_respects_an_existing_pin():
    cases = {"y = nl.copy(t)": ["scalar", "vector"],
             "y = nisa.tensor_copy(t, engine=nisa.scalar_engine)": ["vector"],
             "y = nisa.tensor_copy(t, engine=nisa.gpsimd_engine)": [],
             "y = nisa.tensor_copy(t, engine=e)": []}
    for line, expected in cases.items():
        src, node = _call(line)
        assert [eng for eng, _ in free_engines(src, copy_args(src, node))] == expected, line


def test_pin_edits_keep_a_nontrivial_dtype():
    src, node = _call("y = nl.copy(t, dtype=nl.bfloat16)")
    text = src.apply_edits(pin_edits(src, node, copy_args(src, node), "vector_engine"))
    assert "y = nisa.tensor_copy(t, dtype=nl.bfloat16, engine=nisa.vector_engine)" in text

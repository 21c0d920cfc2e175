"""accelopt.rules.walk: the cached ast.walk gives ast.walk's nodes in its order for a
Source's tree, walks copies afresh (a rule may transform a deep copy), and stays
correct after older trees are evicted; proposals are the same with and without it."""
import ast
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402
from accelopt.rules import walk  # noqa: E402
from accelopt.rules.api import propose  # noqa: E402
from accelopt.rules.source import Source  # noqa: E402

KERNEL = H.kernel_source('''
    import numpy as np


    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((4, 128, 512), dtype=np.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            s = nl.load(b[0:128, 0:512])
            t = nl.exp(s)
            x = nl.load(a[i, 0:128, 0:512])
            nl.store(out[i, 0:128, 0:512], value=nl.multiply(x, t))
        return out
''')


def test_same_nodes_in_the_same_order():
    src = Source(KERNEL)
    for node in ast.walk(src.tree):
        assert list(walk.walk(node)) == list(ast.walk(node))
    loop = next(n for n in ast.walk(src.tree) if isinstance(n, ast.For))
    assert walk.walk(loop) is walk.walk(loop)  # listed once


def test_a_transformed_copy_is_walked_afresh():
    src = Source(KERNEL)
    loop = next(n for n in ast.walk(src.tree) if isinstance(n, ast.For))
    walk.walk(loop)
    twin = copy.deepcopy(loop)
    twin.body = twin.body[:1]
    assert len(list(walk.walk(twin))) == len(list(ast.walk(twin))) < len(walk.walk(loop))


def test_evicted_trees_fall_back_to_ast_walk():
    first = Source(KERNEL)
    for _ in range(walk.KEEP + 2):
        Source(KERNEL)
    func = next(n for n in ast.walk(first.tree) if isinstance(n, ast.FunctionDef))
    assert not isinstance(walk.walk(func), list)  # not cached any more
    assert list(walk.walk(func)) == list(ast.walk(func))


def test_proposals_do_not_depend_on_the_cache():
    cached = propose({"source": KERNEL, "max_plans": 100})["plans"]
    saved = walk.KEEP
    walk.KEEP = 0
    try:
        plain = propose({"source": KERNEL, "max_plans": 100})["plans"]
    finally:
        walk.KEEP = saved
    assert cached and cached == plain

"""Canonical state hashes (accelopt.search.canon): formatting and comments do not
make a new state, real edits do."""
import os

from accelopt.search import canon

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

KERNEL = '''"""A kernel."""
import nki.language as nl


def k(x):
    """Doc."""
    # load
    t = nl.load(x[0:128, 0:512])
    return nl.exp(t)
'''

SAME = '''import nki.language as nl
def k(x):
    t = nl.load( x[0:128, 0:512] )   # a comment
    return (nl.exp(t))
'''


def test_comments_formatting_and_docstrings_do_not_change_the_state():
    assert canon.state_hash(KERNEL) == canon.state_hash(SAME)


def test_a_real_edit_changes_the_state():
    assert canon.state_hash(KERNEL) != canon.state_hash(SAME.replace("nl.exp", "nl.log"))
    assert canon.state_hash(KERNEL) != canon.state_hash(SAME.replace("t = ", "u = ").replace("(t)", "(u)"))


def test_batch_and_unparsable_fallback():
    out = canon.state_hashes({"sources": [KERNEL, "def (:\n  # x\n", 3]})
    assert out["hashes"][0] == canon.state_hash(KERNEL)
    assert out["ast"] == [True, False, False]
    assert out["hashes"][1] == canon.state_hash("def (:\n")  # comments and whitespace ignored
    assert out["hashes"][2] is None
    assert canon.state_hashes("nope")["error"]["kind"] == "bad_request"


def test_the_executors_python_calls_return_the_state_key_of_their_source():
    """rules.apply and edits.resolve give the new kernel's state hash with it, so native:execute
    passes it on and native:mcgs_merge_states need not read the file back through Python."""
    from accelopt import edits
    from accelopt.rules import apply, propose

    parent = "import neuronxcc.nki.language as nl\n\ndef k(a):\n    x = nl.load(a)\n    return x\n"
    child = parent.replace("return x", "return x  # same state")
    resolved = edits.resolve({"parent": parent, "source": child})
    assert resolved["state_hash"] == canon.state_hash(child) == canon.state_hash(parent)
    with_diff = edits.resolve({"parent": parent, "diff": edits.make_diff(parent, child.replace("x", "y"))})
    assert with_diff["state_hash"] == canon.state_hash(with_diff["source"])
    with open(os.path.join(REPO, "nkibench", "kernels", "silu_0.py"), encoding="utf-8") as handle:
        kernel = handle.read()
    plan = propose({"source": kernel, "max_plans": 1})["plans"][0]
    applied = apply({"source": kernel, "plan": plan})
    assert applied["state_hash"] == canon.state_hash(applied["source"]) != canon.state_hash(kernel)

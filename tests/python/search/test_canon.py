"""Canonical state hashes (accelopt.search.canon): formatting and comments do not
make a new state, real edits do."""
from accelopt.search import canon

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

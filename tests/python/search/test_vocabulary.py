"""The move vocabulary of LLM moves (accelopt.search.vocabulary): every rule is
a kind with its effect, the applicable moves come from accelopt.rules.propose,
unknown kinds are refused with the known ones listed."""
from accelopt.rules import registry
from accelopt.search import vocabulary as vocab

SILU = '''import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, 0:512])
        e = nl.exp(nl.negative(t))
        d = nl.add(e, 1.0)
        r = nl.divide(t, d)
        nl.store(out[i * 128:(i + 1) * 128, 0:512], value=r)
    return out
'''


def test_every_rule_is_a_kind_with_its_effect_and_relieves():
    names = [k["name"] for k in vocab.kinds()]
    assert names == list(registry.RULES) + [vocab.OPEN_KIND]
    assert all(k["effect"] for k in vocab.kinds())
    assert set(vocab.KIND_RELIEVES) <= set(registry.RULES)


def test_kind_check_normalizes_and_refuses_unknown_kinds():
    assert vocab.check_kind("Fuse-SiLU") == ("fuse_silu", None)
    assert vocab.check_kind("`widen loop`") == ("widen_loop", None)
    assert vocab.check_kind("fuse_silu:assign r") == ("fuse_silu", None)
    kind, error = vocab.check_kind("rewrite_in_cuda")
    assert kind is None and "'rewrite_in_cuda' is not in the vocabulary" in error and "fuse_silu" in error
    assert vocab.check_kind("")[1].startswith("the reply names no move kind")


def test_describe_lists_applicable_moves_and_the_bottleneck():
    out = vocab.describe({"source": SILU, "metrics": {"vector_engine_active_time_percent": 0.8,
                                                      "scalar_engine_active_time_percent": 0.2,
                                                      "dma_active_time_percent": 0.3}})
    assert "error" not in out
    assert out["bottleneck"]["bottleneck"] == "vector"
    rules = {p["rule"] for p in out["applicable"]}
    assert "fuse_silu" in rules
    silu = next(k for k in out["kinds"] if k["name"] == "fuse_silu")
    assert silu["applicable"] >= 1 and silu["relieves"]["vector"] == 1.0
    assert all("relieves" in p and "params" in p for p in out["applicable"])
    assert vocab.describe("x")["error"]["kind"] == "bad_request"


def test_resolve_move_matches_the_site_or_the_first_applicable_move():
    applicable = [{"id": "widen_loop:i*2", "rule": "widen_loop", "params": {"site": "i*2"}},
                  {"id": "widen_loop:j*2", "rule": "widen_loop", "params": {"site": "j*2"}}]
    assert vocab.resolve_move({"kind": "widen-loop", "site": "j*2", "applicable": applicable})["matched"]["id"] == "widen_loop:j*2"
    assert vocab.resolve_move({"kind": "widen_loop", "site": "k*4", "applicable": applicable})["matched"]["id"] == "widen_loop:i*2"
    assert vocab.resolve_move({"kind": "fuse_silu", "applicable": applicable}) == {"kind": "fuse_silu", "matched": None}
    assert vocab.resolve_move({"kind": "teleport", "applicable": applicable})["error"]["kind"] == "unknown_move"
    assert vocab.resolve_move({"kind": "", "applicable": applicable})["error"]["kind"] == "no_move"


def test_the_open_move_is_a_kind_of_its_own_that_no_rule_applies():
    assert vocab.check_kind("open") == ("open", None)
    assert vocab.check_kind("**Restructure**") == ("open", None)
    assert "open for a free restructuring" in vocab.check_kind("teleport")[1]
    applicable = [{"id": "widen_loop:i*2", "rule": "widen_loop", "params": {"site": "i*2"}}]
    assert vocab.resolve_move({"kind": "Open", "site": "i*2", "applicable": applicable}) == {"kind": "open", "matched": None}
    out = vocab.describe({"source": SILU, "metrics": {}})
    open_kind = next(k for k in out["kinds"] if k["name"] == "open")
    assert open_kind["applicable"] == 0 and open_kind["relieves"] == vocab.OPEN_RELIEVES
    assert "restructuring" in open_kind["effect"]
    assert all(p["rule"] != "open" for p in out["applicable"])

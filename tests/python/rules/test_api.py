"""propose/apply contract: determinism, ranking with metrics, history, errors instead of exceptions."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402
from accelopt import rules  # noqa: E402

SILU_PATH = os.path.join(os.path.dirname(os.path.abspath(H.profile.__file__)), "..", "..", "..",
                         "nkibench", "kernels", "silu_0.py")
VECTOR_BOUND = {"bottleneck": "vector", "vector_engine_active_time_percent": 0.9,
                "scalar_engine_active_time_percent": 0.2, "dma_active_time_percent": 0.3}
DMA_BOUND = {"bottleneck": "dma", "vector_engine_active_time_percent": 0.1,
             "scalar_engine_active_time_percent": 0.1, "dma_active_time_percent": 0.95}


def _silu():
    with open(SILU_PATH, encoding="utf-8") as handle:
        return handle.read()


def test_propose_is_deterministic_and_json():
    src = _silu()
    req = {"source": src, "metrics": VECTOR_BOUND, "max_plans": 20, "seed": 7}
    a, b = rules.propose(dict(req)), rules.propose(dict(req))
    assert a == b and a["plans"], a
    assert json.loads(json.dumps(a)) == a
    for plan in a["plans"]:
        # with metrics every plan also names its documented effect and a predicted gain (docs/rules.md)
        assert set(plan) == {"id", "rule", "description", "params", "effect", "relieves", "predicted_gain"}
        assert plan["effect"] and "nki-facts §" in plan["effect"] and 0.0 <= plan["predicted_gain"] <= 0.9
        assert plan["id"].startswith(plan["rule"] + ":") and "\n" not in plan["description"]
        assert plan["rule"] in rules.RULES
    assert len({p["id"] for p in a["plans"]}) == len(a["plans"])
    # another seed may only reorder ties: same plan set
    c = rules.propose(dict(req, seed=8))
    assert sorted(p["id"] for p in c["plans"]) == sorted(p["id"] for p in a["plans"])
    assert len(rules.propose(dict(req, max_plans=2))["plans"]) == 2
    # without metrics there is nothing to predict from
    assert all("predicted_gain" not in p for p in rules.propose(dict(req, metrics={}))["plans"])


def test_ranking_follows_the_bottleneck():
    src = _silu()
    vec = [p["rule"] for p in rules.propose({"source": src, "metrics": VECTOR_BOUND, "max_plans": 50})["plans"]]
    dma = [p["rule"] for p in rules.propose({"source": src, "metrics": DMA_BOUND, "max_plans": 50})["plans"]]
    assert vec.index("reciprocal_to_scalar") < vec.index("widen_loop"), vec
    assert dma.index("widen_loop") < dma.index("reciprocal_to_scalar"), dma
    assert dma.index("widen_loop") < dma.index("fuse_reciprocal"), dma
    assert vec[0] == "fuse_silu", vec


def test_history_drops_tried_plans_and_demotes_rules():
    src = _silu()
    first = rules.propose({"source": src, "max_plans": 50})["plans"]
    top = first[0]
    again = rules.propose({"source": src, "max_plans": 50, "history": [top["id"]]})["plans"]
    assert top["id"] not in [p["id"] for p in again]
    demoted = rules.propose({"source": src, "max_plans": 50, "history": [top["rule"]]})["plans"]
    assert [p["id"] for p in demoted].index(top["id"]) > 0


def test_apply_round_trip_for_every_proposed_plan():
    src = _silu()
    for plan in rules.propose({"source": src, "max_plans": 50})["plans"]:
        res = rules.apply({"source": src, "plan": json.loads(json.dumps(plan))})
        assert "error" not in res, (plan, res)
        assert res["source"] != src and res["diff"]
        compile(res["source"], "rewritten.py", "exec")


def test_bad_input_gives_errors_not_exceptions():
    assert rules.propose("nope")["error"]["kind"] == "bad_request"
    assert rules.propose({"source": 3})["error"]["kind"] == "bad_source"
    assert rules.propose({"source": "def (:"})["error"]["kind"] == "bad_source"
    assert rules.propose({"source": "", "max_plans": -1})["error"]["kind"] == "bad_request"
    assert rules.propose({"source": "x = 1\n"}) == {"plans": []}
    src = _silu()
    assert rules.apply([])["error"]["kind"] == "bad_request"
    assert rules.apply({"source": src})["error"]["kind"] == "bad_request"
    assert rules.apply({"source": src, "plan": {"rule": "nope", "params": {"site": "x"}}})["error"]["kind"] \
        == "bad_request"
    assert rules.apply({"source": src, "plan": {"rule": "tunable", "params": {}}})["error"]["kind"] == "bad_request"
    assert rules.apply({"source": "def (:", "plan": {"rule": "tunable", "params": {"site": "x"}}})["error"][
        "kind"] == "bad_source"
    stale = rules.apply({"source": src, "plan": {"rule": "fuse_silu", "params": {"site": "z_tile"}}})
    assert stale["error"]["kind"] == "not_applicable" and "z_tile" in stale["error"]["message"]
    by_id = rules.apply({"source": src, "plan": {"id": "tunable:TILE_N=256"}})
    assert "TILE_N = 256" in by_id["source"]


def test_nki_aliases_are_resolved():
    src = _silu()
    ids = [p["id"] for p in rules.propose({"source": src, "max_plans": 50})["plans"]]
    other = H.edit(src, "import neuronxcc.nki.language as nl", "from neuronxcc.nki import language as nl")
    assert sorted(p["id"] for p in rules.propose({"source": other, "max_plans": 50})["plans"]) == sorted(ids)
    renamed = H.edit(src, "import neuronxcc.nki.isa as nisa", "import neuronxcc.nki.isa as isa2").replace(
        "nisa.", "isa2.")
    new = rules.apply({"source": renamed, "plan": {"rule": "reciprocal_to_scalar", "params": {"site": "r_tile"}}})
    assert "r_tile = isa2.activation(op=nl.reciprocal, data=d_tile)" in new["source"], new
    via_nki = H.edit(src, "import neuronxcc.nki.language as nl\n", "")
    new = rules.apply({"source": via_nki, "plan": {"rule": "reciprocal_to_scalar", "params": {"site": "r_tile"}}})
    assert "nisa.activation(op=nki.language.reciprocal, data=d_tile)" in new["source"], new
    no_lang = H.edit(via_nki, "import neuronxcc.nki as nki\n", "")
    rules_left = {p["rule"] for p in rules.propose({"source": no_lang, "max_plans": 50})["plans"]}
    assert not rules_left & {"fuse_silu", "fuse_sigmoid", "reciprocal_to_scalar"}, rules_left


def test_every_plan_on_every_nkibench_kernel_applies():
    root = os.path.dirname(SILU_PATH)
    total = 0
    for name in sorted(os.listdir(root)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(root, name), encoding="utf-8") as handle:
            src = handle.read()
        for plan in rules.propose({"source": src, "max_plans": 100})["plans"]:
            res = rules.apply({"source": src, "plan": plan})
            assert "error" not in res, (name, plan["id"], res)
            compile(res["source"], name, "exec")
            total += 1
    assert total >= 30, total

"""The launch cost the planner prompt states next to an emulator latency (accelopt.launch_cost)."""
import nki_emu
from accelopt import launch_cost
from nki_emu.cost import targets


def test_estimated_latency_states_the_emulator_launch_cost():
    for name in ("trn1", "trn2"):
        got = launch_cost.describe({"estimated": True, "target": name})
        assert got["launch_ms"] == targets.get(name).launch_ns * 1e-6
        assert "launch_ns" in got["source"]


def test_the_launch_cost_is_inside_every_estimate():
    # A kernel with no instruction at all is estimated at exactly the launch cost.
    def empty(x):
        return x

    run = nki_emu.run(empty, [__import__("numpy").zeros((1, 1), "float32")])
    assert abs(run.profile["latency_ms"] - launch_cost.describe({"estimated": True})["launch_ms"]) < 1e-9


def test_measured_latency_states_none():
    assert launch_cost.describe({"estimated": False, "target": "trn1"})["launch_ms"] is None


def test_unknown_target_is_refused():
    try:
        launch_cost.describe({"estimated": True, "target": "trn9"})
    except ValueError:
        return
    raise AssertionError("trn9 accepted")

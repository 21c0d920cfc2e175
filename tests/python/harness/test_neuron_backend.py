"""The testable parts of the Neuron backend: command line, summary parsing, retry policy."""
import json

from accelopt.backends import PROFILE_FIELDS, neuron_available, resolve_backend_name
from accelopt.backends import neuron

SUMMARY = json.dumps({
    "kernel_profile_0": {
        "total_time": 0.0013333,
        "hbm_read_bytes": 117440512,
        "hbm_write_bytes": "117440512",
        "vector_engine_active_time_percent": 0.74,
        "unrelated_field": 3,
    },
    "second": {"total_time": 99.0},
})


def test_profile_command():
    argv = neuron.profile_command("/tmp/a.neff", "/tmp/a.ntff")
    assert argv == ["neuron-profile", "view", "--output-format", "summary-json",
                    "-n", "/tmp/a.neff", "-s", "/tmp/a.ntff"]
    assert neuron.COMPILE_OPTS == "--disable-dge --logical-nc-config=1"
    assert neuron.NEURON_ENV == {"NEURON_CC_FLAGS": "--auto-cast=none", "NEURON_RT_NUM_CORES": "1"}


def test_parse_summary_takes_first_entry():
    latency, metrics = neuron.parse_summary(SUMMARY)
    assert abs(latency - 1.3333) < 1e-9
    assert metrics["hbm_read_bytes"] == 117440512.0
    assert metrics["hbm_write_bytes"] == 117440512.0
    assert metrics["vector_engine_active_time_percent"] == 0.74
    assert metrics["total_time"] == 0.0013333
    assert "unrelated_field" not in metrics
    assert set(metrics) <= set(PROFILE_FIELDS) | {"total_time"}


def test_parse_summary_rejects_bad_text():
    for text in ("", "not json", "[]", "{}", '{"a": {"hbm_read_bytes": 1}}', '{"a": {"total_time": 0}}'):
        try:
            neuron.parse_summary(text)
        except ValueError:
            continue
        raise AssertionError(f"accepted {text!r}")


def _fake(series):
    """measure_once returning successive latencies from ``series``; counts warm-ups."""
    state = {"i": 0, "warm": 0}

    def measure():
        value = series[state["i"]]
        state["i"] += 1
        return value, {"total_time": value / 1e3, "n": state["i"]}

    def warm():
        state["warm"] += 1
    return measure, warm, state


def test_benchmark_stable_round_is_kept():
    measure, warm, state = _fake([2.0] * 10)
    stats = neuron.benchmark(measure, warm, sleep=lambda s: None)
    assert stats["rounds"] == 1 and state["warm"] == 2 and state["i"] == 10
    assert stats["latency_ms"] == 2.0 and stats["rel_diffs"] == 0.0
    assert stats["metrics"]["n"] == 10


def test_benchmark_retries_twice_and_keeps_steadiest_round():
    noisy = [1.0] * 9 + [1.5]       # rel_diffs 0.5
    less_noisy = [1.0] * 9 + [1.1]  # rel_diffs 0.1
    noisy2 = [1.0] * 9 + [1.3]      # rel_diffs 0.3
    sleeps = []
    measure, warm, state = _fake(noisy + less_noisy + noisy2 + [9.0] * 10)
    stats = neuron.benchmark(measure, warm, sleep=sleeps.append)
    assert stats["rounds"] == 3 and state["i"] == 30 and state["warm"] == 6
    assert sleeps == [1.0, 1.0]
    assert abs(stats["rel_diffs"] - 0.1) < 1e-12 and abs(stats["latency_ms"] - 1.01) < 1e-12
    assert stats["min_ms"] == 1.0 and stats["max_ms"] == 1.1
    assert stats["metrics"]["n"] == 20  # metrics of the kept round


def test_auto_picks_emulator_without_neuronxcc():
    assert not neuron_available()
    assert resolve_backend_name("auto") == "emulator"
    assert resolve_backend_name("neuron") == "neuron"
    try:
        resolve_backend_name("cuda")
    except ValueError:
        return
    raise AssertionError("unknown backend accepted")

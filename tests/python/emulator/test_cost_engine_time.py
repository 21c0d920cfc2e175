"""bench/engine_time.py: the measured active times it reads and the instruction mix it
counts (issue 35)."""
import importlib.util
import os
import tempfile

import numpy as np

import nki_emu
from nki_emu.cost import targets

nki_emu.install()
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _engine_time():
    bench = os.path.join(REPO, "bench")
    import sys
    if bench not in sys.path:
        sys.path.insert(0, bench)
    spec = importlib.util.spec_from_file_location("bench_engine_time", os.path.join(bench, "engine_time.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_measured_active_times_are_shares_of_the_latency():
    import pathlib
    e = _engine_time()
    with tempfile.TemporaryDirectory() as folder:
        tmp_path = pathlib.Path(folder)
        path = tmp_path / e.CSV_PATH
        path.parent.mkdir(parents=True)
        profile = ('"{""latency"": 2.0, ""scalar_engine_active_time_percent"": 0.25, '
                   '""vector_engine_active_time_percent"": 0.5}"')
        path.write_text("problem,values,profile\nsilu,{},%s\n" % profile)
        ms, active = e.measured_active(str(tmp_path))["silu"]
    assert ms == 2.0 and active == {"scalar": 0.5, "vector": 1.0}


def test_instruction_mix_counts_engines_ops_and_elements():
    def kernel(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = nl.load(b)
        z = nisa.tensor_tensor(x, y, nl.multiply)
        w = nisa.reciprocal(z)
        v = nisa.tensor_scalar(w, nl.add, 1.0)
        nl.store(out, v)
        return out

    a = np.ones((128, 512), np.float32)
    result = nki_emu.run(kernel, [a, a], target="trn1", compute=False, keep_trace=True)
    records, _ = result.trace
    mix = _engine_time().instruction_mix(records, targets.get("trn1"))
    assert mix["vector"]["tensor_tensor"] == [1, 512]
    assert mix["vector"]["reciprocal"] == [1, 512]
    # engine=unknown counts on the target's auto engine (ScalarE on trn1)
    assert sum(n for n, _ in mix["scalar"].values()) + sum(n for n, _ in mix["vector"].values()) == 3

"""The cost model is monotone: removing work never raises the estimate (issue 35).

Every record of every trace below (an even spread of 150 of a longer one) is deleted once (its readers then find no
writer: their use is harmless) and every DMA and compute instruction is halved
once; no mutation may raise the estimated latency. Traces: the small case of
each of our 14 NKIBench baselines, the rule moves the proposer offers for them
(up to four each), and streaming kernels of the silu shape that issue 35 found
non-monotone (a copy estimated 30 % slower than the same copy plus an activation).
A violation fails with the smallest trace that shows it (nki_emu.cost.monotone).
bench/monotone.py runs the same check on the 14 published baselines.
"""
import importlib.util
import json
import os

import numpy as np

import nki_emu
from nki_emu.cost import monotone, targets

nki_emu.install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NKIBENCH = os.path.join(REPO, "nkibench")
T1 = targets.get("trn1")


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _small_cases():
    """[(name, kernel source, inputs)] of the 14 baselines' small cases."""
    summary = json.load(open(os.path.join(NKIBENCH, "summary.json")))
    out = []
    for name, entry in summary.items():
        impl = entry["cases"]["small"]["impls"][0]
        ref = _load(os.path.join(NKIBENCH, impl["task"]), "monotone_ref_" + name)
        np.random.seed(0)
        inputs = ref.transform_to_nki_inputs(ref.get_inputs())
        with open(os.path.join(NKIBENCH, impl["kernel"]), encoding="utf-8") as f:
            out.append((name, f.read(), inputs))
    return out


def _trace_source(name, source, inputs):
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"monotone_{os.getpid()}_{name}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    try:
        kernel = _load(path, "monotone_" + name).kernel
        return nki_emu.run(kernel, inputs, compute=False, keep_trace=True).trace
    finally:
        os.remove(path)


def _streaming(tile, act, rows=512, cols=4096):
    """One load, optionally one fused activation, one store per (128 x tile) block."""
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(rows // 128):
            for j in nl.affine_range(cols // tile):
                t = nl.load(x[i * 128:(i + 1) * 128, j * tile:(j + 1) * tile])
                y = nisa.activation(op=nl.exp, data=t) if act else t
                nl.store(out[i * 128:(i + 1) * 128, j * tile:(j + 1) * tile], value=y)
        return out
    x = np.zeros((rows, cols), np.float32)
    return nki_emu.run(kernel, [x], compute=False, keep_trace=True).trace


def _traces():
    from accelopt.rules import api
    out = []
    for name, source, inputs in _small_cases():
        out.append((name, _trace_source(name, source, inputs)))
        plans = api.propose({"source": source, "metrics": {}, "max_plans": 4}).get("plans", [])
        for plan in plans:
            applied = api.apply({"source": source, "plan": plan})
            if "source" not in applied:
                continue
            try:
                out.append((f"{name} after {plan['id']}", _trace_source(name + "_move", applied["source"], inputs)))
            except Exception:  # noqa: BLE001 - a move that fails to run is the rule tests' concern
                continue
    for tile in (512, 1024, 2048):
        for act in (False, True):
            out.append((f"streaming tile {tile} {'exp' if act else 'copy'}", _streaming(tile, act)))
    return out


def _report(name, records, what, base, after, mutate):
    small = monotone.minimize(records, mutate, T1)
    lines = [f"{name}: {what} raises the estimate {base:.1f} -> {after:.1f} ns "
             f"({len(records)} records); smallest trace showing it ({len(small)} records):"]
    lines += [f"  {rec[:4]}" for rec in small]
    return "\n".join(lines)


def test_removing_or_shrinking_work_never_raises_the_estimate():
    failures = []
    for name, (records, counters) in sorted(_traces(), key=lambda item: len(item[1][0])):
        # every record of a trace up to 150 records, an even spread of 150 of a longer one
        stride = -(-len(records) // 150)
        found = monotone.violations(records, counters, T1, limit=1, stride=stride)
        if found:
            what, base, after, mutate = found[0]
            failures.append(_report(name, records, what, base, after, mutate))
    assert not failures, "\n".join(failures)


def test_a_copy_is_never_slower_than_the_same_copy_plus_an_activation():
    # issue 35: (128 x 1024) tiles, a copy estimated 30 % slower than copy + silu
    for tile in (1024, 2048):
        copy = monotone.latency_ns(*_streaming(tile, False), T1)
        act = monotone.latency_ns(*_streaming(tile, True), T1)
        assert copy <= act, (tile, copy, act)

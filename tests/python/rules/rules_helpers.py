"""Helpers for the rule tests (not a test module): tiny kernels + references on disk, profiling."""
import atexit
import os
import shutil
import tempfile
import textwrap

from accelopt import profile
from accelopt import rules

_DIR = tempfile.mkdtemp(prefix="accelopt_rules_test_")
atexit.register(shutil.rmtree, _DIR, True)
_count = [0]

HEADER = """\
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

"""

_REF = """\
import numpy as np

SHAPES = {shapes!r}
POSITIVE = {positive!r}


def get_inputs():
    out = []
    for shape, pos in zip(SHAPES, POSITIVE):
        x = np.random.normal(loc=0.0, scale=1.0, size=shape).astype(np.float32)
        out.append((np.abs(x) + np.float32(0.5)) if pos else x)
    return out


def forward({args}):
    return {expr}


def transform_to_nki_inputs(inputs):
    return list(inputs)


def transform_nki_outputs(k_res, ref):
    outs = k_res if isinstance(k_res, tuple) else (k_res,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    return [np.reshape(o, r.shape) for o, r in zip(outs, refs)]
"""


def kernel_source(body):
    """A kernel file: the NKI imports followed by the dedented ``body``."""
    return HEADER + textwrap.dedent(body).lstrip("\n")


def reference(args, expr, shapes, positive=None):
    """Writes a NKIBench-style reference module; returns its path.

    ``args``: forward() parameter names (str, comma-separated); ``expr``: the
    NumPy expression it returns; ``shapes``: one shape per input;
    ``positive``: per input, draw |N(0,1)| + 0.5 instead of N(0,1).
    """
    positive = list(positive or [False] * len(shapes))
    return _write("ref", _REF.format(shapes=[tuple(s) for s in shapes], positive=positive, args=args,
                                     expr=expr))


def edit(source, old, new):
    """``source`` with ``old`` replaced by ``new``; fails if ``old`` is not in it (keeps tests honest)."""
    assert old in source, f"test bug: {old!r} not in the kernel"
    return source.replace(old, new)


def _write(kind, text):
    _count[0] += 1
    path = os.path.join(_DIR, f"{kind}_{_count[0]}.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def run(source, ref_path):
    """profile_kernel on the emulator for kernel text ``source``; returns the result dict."""
    path = _write("kernel", source)
    return profile.profile_kernel({"kernel": path, "reference": ref_path, "backend": "emulator",
                                   "target": "trn1"})


def ok(result):
    """Asserts a correct, timed result and returns its latency (ms)."""
    assert result["error"] is None, result["error"]
    assert result["correct"] and result["latency_ms"] is not None
    return result["latency_ms"]


def plans(source, rule=None, metrics=None, seed=0, history=None):
    """All plans of ``rule`` (or every rule) for ``source``."""
    req = {"source": source, "metrics": metrics or {}, "max_plans": 100, "seed": seed,
           "history": history or []}
    if rule is not None:
        req["rules"] = [rule]
    out = rules.propose(req)
    assert "error" not in out, out
    return out["plans"]


def rewrite(source, rule, site=None):
    """Applies the first plan of ``rule`` (or the one at ``site``); returns (new source, plan)."""
    found = plans(source, rule)
    assert found, f"{rule}: no plan for the source"
    if site is not None:
        found = [p for p in found if p["params"]["site"] == site]
        assert found, f"{rule}: no plan at site {site}"
    plan = found[0]
    res = rules.apply({"source": source, "plan": plan})
    assert "error" not in res, res
    assert res["source"] != source and res["diff"].startswith("--- ")
    return res["source"], plan


def not_applicable(source, rule):
    """Asserts ``rule`` proposes nothing and a forged plan is refused as not_applicable."""
    assert plans(source, rule) == [], plans(source, rule)
    res = rules.apply({"source": source, "plan": {"rule": rule, "params": {"site": "anything"}}})
    assert res.get("error", {}).get("kind") == "not_applicable", res


def check(source, ref_path, rule, faster=True, site=None):
    """Rewrites ``source`` with ``rule``, profiles both versions and checks the result.

    Both must be correct on the 5 seeds; with ``faster`` the rewritten one
    must have a strictly lower estimated latency. Returns (new source,
    latency before, latency after).
    """
    new, _plan = rewrite(source, rule, site)
    before = ok(run(source, ref_path))
    after = ok(run(new, ref_path))
    if faster:
        assert after < before, f"{rule}: {before:.5f} ms -> {after:.5f} ms"
    return new, before, after

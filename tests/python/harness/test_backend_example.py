"""The documented backend example (docs/examples/wallclock_backend.py) keeps the Backend contract."""
import importlib.util
import os

import numpy as np

from accelopt import loading, nkibench

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _example():
    path = os.path.join(REPO, "docs", "examples", "wallclock_backend.py")
    spec = importlib.util.spec_from_file_location("wallclock_backend_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_backend_example_runs_and_measures_a_kernel():
    backend = _example().WallClockBackend("trn1", repeats=2)
    backend.prepare()
    (case,) = nkibench.iter_cases(problems=["silu"], case_ids=["small"])
    reference = loading.load_reference(case.task)
    kernel = loading.load_kernel(case.kernel)
    np.random.seed(0)
    inputs = reference.get_inputs()
    args = reference.transform_to_nki_inputs(inputs)
    outputs = reference.transform_nki_outputs(backend.run(kernel, args, profiled=True), reference.forward(*inputs))
    expected = reference.forward(*inputs)
    assert np.linalg.norm(outputs[0] - expected) < case.rel_tol * np.linalg.norm(expected)
    latency_ms, metrics = backend.measure(kernel, args)
    assert latency_ms > 0 and metrics == {}
    assert backend.name == "wallclock" and backend.estimated is False


def test_backend_example_classifies_errors():
    backend = _example().WallClockBackend("trn2")
    backend.prepare()
    import nki_emu
    assert backend.is_compile_error(nki_emu.errors.NKICompileError("err_x", "refused"))
    assert backend.error_kind(nki_emu.errors.NKICompileError("err_x", "refused")) == "compile_error"
    assert backend.error_kind(ValueError("a kernel bug")) is None
    try:
        _example().WallClockBackend("trn9")
    except ValueError:
        return
    raise AssertionError("an unknown target must be refused")

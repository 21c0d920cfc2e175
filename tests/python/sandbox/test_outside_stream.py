"""Work outside the instruction stream (issue 12): kernels that compute with NumPy on
tensor storage, or return outputs no store wrote, are refused in the split harness
(static scan on and off) while the good kernel of the same test passes.

The worker is simulated in-process as in test_trusted_split.py; the C++ worker suite
runs the same fixtures in real workers."""
import json
import os

import numpy as np

from sandbox.tracing import traced
from accelopt.sandbox import trusted, untrusted

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")

# fixture -> (kind with the static scan off, kind with it on)
CASES = {
    "adv_asarray.py": ("runtime_error", "runtime_error"),
    "adv_data_alias.py": ("runtime_error", "forbidden_access"),
    "adv_vars.py": ("unwritten_output", "forbidden_access"),
    "adv_memoryview.py": ("runtime_error", "forbidden_access"),
    "adv_unwritten.py": ("unwritten_output", "unwritten_output"),
    "adv_half_store.py": ("unwritten_output", "unwritten_output"),
    "adv_sbuf_output.py": ("unwritten_output", "unwritten_output"),
    "adv_print_capture.py": ("unwritten_output", "unwritten_output"),
}


def _isolated(kernel, static_checks):
    request = {"kernel": os.path.join(FIXTURES, kernel), "reference": os.path.join(FIXTURES, "ref_tiny.py"),
               "backend": "emulator", "target": "trn1", "seeds": [0, 21]}
    prepared, blobs = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel", "arg": request,
                                       "options": {"static_checks": static_checks}})
    prepared, blobs = traced(prepared, blobs)
    if "result" in prepared:
        return prepared["result"]
    job = json.loads(json.dumps(prepared["worker"]))
    value, out_blobs = getattr(untrusted, job["function"])(job["arg"], [bytes(b) for b in blobs])
    outcome = {"ok": True, "result": json.loads(json.dumps(value)), "integrity": []}
    result, _ = trusted.finish({"token": prepared["token"], "outcome": outcome}, [bytes(b) for b in out_blobs])
    return result


def test_outside_the_stream_fixtures_are_refused_with_their_kinds():
    good = _isolated("kernel_good.py", static_checks=True)
    assert good["error"] is None and good["correct"], good["error"]
    for kernel, kinds in CASES.items():
        for static_checks, kind in zip((False, True), kinds):
            result = _isolated(kernel, static_checks)
            error = result["error"]
            assert error is not None and error["kind"] == kind, (kernel, static_checks, error)
            assert result["correct"] is False and result["latency_ms"] is None, kernel
    assert trusted.pending() == 0


def test_unwritten_output_message_names_the_output_and_the_count():
    result = _isolated("adv_half_store.py", static_checks=True)
    message = result["error"]["message"]
    assert "output 0" in message and "4096 of 8192 elements" in message and "[64, 0]" in message, message
    result = _isolated("adv_sbuf_output.py", static_checks=True)
    assert "output 0 is an SBUF tile" in result["error"]["message"], result["error"]


def test_device_print_text_is_not_capturable_through_sys_stdout():
    import contextlib
    import io

    import nki_emu
    nki_emu.install()
    import neuronxcc.nki.language as nl
    sink = io.StringIO()

    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        tile = nl.load(x)
        with contextlib.redirect_stdout(sink):
            nl.device_print("probe", tile)
        nl.store(out, value=tile)
        return out
    x = np.full((4, 4), 3.5, np.float32)
    assert np.array_equal(nki_emu.run(k, [x], trace=False).outputs, x)
    assert sink.getvalue() == ""


def test_static_scan_flags_storage_names_and_attribute_builtin_aliases():
    from accelopt.sandbox import static_check

    def kinds(source):
        return [v.kind for v in static_check.scan(source)]
    for source in ("def kernel(x):\n    return x.data * 2\n",
                   "def kernel(x):\n    return x.tolist()\n",
                   "fetch = getattr\n",
                   "def kernel(x):\n    return list(map(getattr, [x], ['data']))\n",
                   "def kernel(x):\n    return hasattr(x, '_data')\n",
                   "def kernel(x, name):\n    return hasattr(x, name)\n",
                   "import operator\n\ndef kernel(x):\n    return operator.attrgetter('arr')(x)\n",
                   "from operator import methodcaller\n",
                   "from logging.config import _resolve\n"):
        assert kinds(source) and set(kinds(source)) == {"forbidden_access"}, source
    for source in ("def kernel(x):\n    return getattr(x, 'shape')\n",
                   "def kernel(x):\n    return hasattr(x, 'shape')\n",
                   "def kernel(d):\n    return sum(d.values())\n"):
        assert kinds(source) == [], source



def test_static_scan_flags_modules_that_reach_attributes_by_runtime_strings():
    from accelopt.sandbox import static_check
    for source in ("import string\n", "from pydoc import locate\n", "import pdb\n", "import unittest.mock\n"):
        assert [v.kind for v in static_check.scan(source)] == ["forbidden_import"], source
    assert static_check.scan("from neuronxcc.nki import trace\nimport neuronxcc.nki.language as nl\n") == []

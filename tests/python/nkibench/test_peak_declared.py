"""A problem declares its % of peak work next to its reference (issue 36, item 6).

``peak_work()`` in the reference module (nkibench/README.md, "Peak model") gives the
vector/scalar FLOPs, matmul FLOPs and HBM bytes of one call; ``accelopt.peak.describe``
uses it when given the reference, and says how to declare it when neither the reference
nor the built-in table of the 14 problems knows the problem.
"""
import atexit
import os
import shutil
import tempfile

from accelopt import peak

_WITH = """\
import numpy as np

M = 256
N = 1024


def get_inputs():
    return [np.random.normal(size=(M, N)).astype(np.float32)]


def forward(x):
    return x * 2


def peak_work():
    \"\"\"One call: M*N multiplies on the vector engine, x read and the output written (fp32).\"\"\"
    return {"vec_flops": M * N, "mm_flops": 0, "bytes": 4 * 2 * M * N}
"""


def _write(text):
    folder = tempfile.mkdtemp(prefix="peak_declared_")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "double_M256_N1024_numpy.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def test_a_declared_peak_work_gives_percent_of_peak():
    reference = _write(_WITH)
    described = peak.describe({"problem": "double", "values": {"M": 256, "N": 1024}, "reference": reference,
                               "latency_ms": 0.01, "target": "trn1"})
    assert described["bytes"] == 4 * 2 * 256 * 1024 and described["vec_flops"] == 256 * 1024
    assert described["bound"] == "memory"
    assert described["source"] == "reference"
    expected_ms = 4 * 2 * 256 * 1024 / peak.PEAK["trn1"]["bw"] * 1e3
    assert abs(described["percent_of_peak"] - 100.0 * expected_ms / 0.01) < 1e-9


def test_a_problem_without_a_peak_model_says_how_to_declare_one():
    reference = _write(_WITH.split("def peak_work")[0])
    try:
        peak.describe({"problem": "double", "values": {"M": 256, "N": 1024}, "reference": reference,
                       "latency_ms": 0.01})
    except KeyError as error:
        message = str(error)
        assert "no peak model for problem 'double'" in message, message
        assert "peak_work()" in message and reference in message and "nkibench/README.md" in message, message
    else:
        raise AssertionError("a problem without a peak model must raise")


def test_a_malformed_declaration_is_named():
    reference = _write(_WITH.replace('"bytes": 4 * 2 * M * N', '"bytez": 1'))
    try:
        peak.describe({"problem": "double", "values": {}, "reference": reference})
    except KeyError as error:
        assert "peak_work()" in str(error) and "bytes" in str(error), str(error)
    else:
        raise AssertionError("a malformed peak_work() must raise")


def test_the_builtin_problems_keep_their_formulas():
    described = peak.describe({"problem": "silu", "values": {"M": 256, "N": 1024}, "latency_ms": 0.05})
    assert described["source"] == "accelopt.peak"
    assert described["bytes"] == 4 * 2 * 256 * 1024

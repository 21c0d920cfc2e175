"""The static anti-cheat scan (accelopt.sandbox.static_check; docs/isolation.md S1-S4)."""
import glob
import os

from accelopt.sandbox import static_check as S

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HEADER = "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\nimport numpy as np\n"


def _kinds(body):
    return [(v.kind, v.line) for v in S.scan(HEADER + body)]


def test_forbidden_imports_are_reported_with_their_line():
    for module in ("os", "subprocess", "ctypes", "socket", "importlib", "sys", "time", "nki_emu",
                   "accelopt.profile", "os.path", "builtins", "gc", "inspect", "threading"):
        assert _kinds(f"import {module}\n") == [(S.FORBIDDEN_IMPORT, 4)], module
        assert _kinds(f"from {module.split('.')[0]} import x\n")[0][0] == S.FORBIDDEN_IMPORT, module
    assert _kinds("from . import helper\n")[0][0] == S.FORBIDDEN_IMPORT


def test_forbidden_accesses():
    cases = {
        "f = open('/etc/passwd')\n": "open",
        "exec('1')\n": "exec",
        "m = __import__('os')\n": "__import__",
        "g = kernel.__globals__\n": "__globals__",
        "c = ().__class__.__subclasses__()\n": "__class__",
        "np._cache = 1\n": "private",
        "np.allclose = lambda *a: True\n": "assigning",
        "np.core.umath.add = None\n": "assigning",
        "x = np.load('ref.npy')\n": ".load",
        "np.save('out.npy', x)\n": ".save",
        "y = getattr(np, name)\n": "computed",
        "y = getattr(np, '__dict__')\n": "__dict__",
        "setattr(np, 'x', 1)\n": "setattr",
        "t = nl.runtime\n": "runtime",
    }
    for body, needle in cases.items():
        found = S.scan(HEADER + body)
        assert found and found[0].kind == S.FORBIDDEN_ACCESS, (body, found)
        assert any(needle in v.message for v in found), (body, found)


def test_ordinary_kernels_pass():
    body = ("@nki.jit\ndef kernel(a, b):\n    t = nl.load(a[0:128, 0:64])\n"
            "    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)\n"
            "    nl.store(out[0:128, 0:64], value=nl.exp(t))\n    y = getattr(nl, 'exp')\n"
            "    z = np.zeros((2, 2))\n    z[0, 0] = 1.0\n    return out\n")
    assert S.scan(HEADER + body) == []
    kernels = glob.glob(os.path.join(REPO, "nkibench", "kernels", "*.py"))
    kernels += glob.glob(os.path.join(REPO, "tests", "python", "harness", "fixtures", "kernel_*.py"))
    assert len(kernels) >= 14
    for path in kernels:
        with open(path, encoding="utf-8") as handle:
            assert S.scan(handle.read(), path) == [], path


def test_unparsable_source_is_left_to_the_loader():
    assert S.scan("def broken(:\n") == []
    assert S.first_violation("import os\nx = open('f')\n").kind == S.FORBIDDEN_IMPORT


def test_star_imports_outside_the_nki_api_are_refused():
    # `from operator import *` brought attrgetter under its own name past the scan (issue 34)
    found = _kinds("from operator import *\ng = attrgetter('f_back')\n")
    assert (S.FORBIDDEN_ACCESS, 4) in found
    assert _kinds("from neuronxcc.nki.language import *\n") == []


def test_class_pattern_keywords_are_attribute_reads():
    # `case object(__globals__=g)` reads __globals__ without an Attribute node (issue 34)
    body = "def f(k):\n    match k:\n        case object(__globals__=g):\n            return g\n"
    assert (S.FORBIDDEN_ACCESS, 6) in _kinds(body)
    assert _kinds("def f(k):\n    match k:\n        case object(f_back=g):\n            return g\n")
    assert _kinds("def f(k):\n    match k:\n        case object(shape=s):\n            return s\n") == []

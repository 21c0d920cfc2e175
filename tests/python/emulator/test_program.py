"""Kernel programs (nki_emu.program; docs/isolation.md, "Trusted evaluation"): the
untrusted trace holds no input value, the trusted replay equals a direct run, and the
replayer refuses whatever is not NKI API."""
import copy
import json
import os
import types

import numpy as np

import nki_emu
from accelopt import loading
from nki_emu import program
from nki_emu.program import replay

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
KERNELS = os.path.join(REPO, "nkibench", "kernels")

SOURCE = '''
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.jit
def kernel(x, scale):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(M // 128):
        tile = nl.load(x[i * 128 + nl.arange(128)[:, None], nl.arange(N)[None, :]])
        y = nisa.activation(op=np.exp, data=tile, scale=scale)
        nl.store(out[i * 128 + nl.arange(128)[:, None], nl.arange(N)[None, :]], value=nl.multiply(y, 2.0))
    return out
'''


def _loader(source, path="/virtual/kernel.py"):
    def load():
        loading.remember_source(path, source)  # what the liveness analysis reads (as the worker does)
        module = types.ModuleType("program_test_kernel")
        module.__file__ = path
        exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - the test's own kernel
        return module.kernel
    return load


def _record(source=SOURCE, args=None):
    args = args if args is not None else [np.zeros((256, 64), np.float32), 0.5]
    return program.record(_loader(source), args, "/virtual/kernel.py")


def test_replay_equals_a_direct_run_and_the_trace_holds_no_values():
    x = np.random.default_rng(0).normal(size=(256, 64)).astype(np.float32)
    recorded = _record()
    text = program.dumps(recorded).decode()
    assert recorded["params"] == [{"name": "x", "annotation": None}, {"name": "scale", "annotation": None}]
    assert "0.5" in text and str(float(x[0, 0])) not in text
    replayed = nki_emu.run(program.kernel_from(text), [x, 0.5])
    module = types.ModuleType("direct")
    exec(compile(SOURCE, "/virtual/direct.py", "exec"), module.__dict__)  # noqa: S102
    direct = nki_emu.run(module.kernel, [x, 0.5])
    assert np.array_equal(replayed.outputs, direct.outputs)
    assert np.allclose(replayed.outputs, 2 * np.exp(0.5 * x), rtol=1e-6)
    assert replayed.profile["latency_ms"] == direct.profile["latency_ms"]


def test_nkibench_kernels_replay_bit_for_bit_with_the_same_latency():
    rng = np.random.default_rng(1)
    for name, shapes in (("silu_0.py", [(256, 1024)]), ("matmul_0.py", [(256, 256), (256, 1024)]),
                         ("bmm_0.py", [(2, 256, 64), (2, 64, 512)])):
        path = os.path.join(KERNELS, name)
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        args = [rng.normal(size=s).astype(np.float32) for s in shapes]
        recorded = program.record(_loader(source, path), [np.zeros_like(a) for a in args], path)
        replayed = nki_emu.run(program.kernel_from(program.dumps(recorded)), args)
        module = types.ModuleType("direct")
        exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102
        direct = nki_emu.run(module.kernel, args)
        assert np.array_equal(replayed.outputs, direct.outputs), name
        assert replayed.profile["latency_ms"] == direct.profile["latency_ms"], name


def test_the_kernel_sees_placeholders_without_members():
    seen = {}
    source = SOURCE.replace("    M, N = x.shape\n", "    M, N = x.shape\n    SEEN['x'] = repr(x)\n")

    def load():
        module = types.ModuleType("program_test_kernel")
        module.__file__ = "/virtual/kernel.py"
        module.SEEN = seen
        exec(compile(source, "/virtual/kernel.py", "exec"), module.__dict__)  # noqa: S102
        return module.kernel
    program.record(load, [np.full((256, 64), 7.0, np.float32), 0.5], "/virtual/kernel.py")
    assert seen["x"]  # a handle over a tensor of zero members: no value to read
    assert "7.0" not in seen["x"]


def _refused(mutate, needle):
    recorded = _record()
    bad = copy.deepcopy(recorded)
    mutate(bad)
    try:
        nki_emu.run(program.kernel_from(json.dumps(bad)), [np.ones((256, 64), np.float32), 0.5])
    except program.ProgramError as exc:
        assert needle in str(exc), str(exc)
        return
    raise AssertionError("the replayer accepted a tampered program")


def _first(ops, head):
    return next(op for op in ops if op[0] == head)


def test_the_replayer_refuses_what_is_not_nki_api():
    # a private attribute, an attribute outside the API, a module, a launcher
    _refused(lambda p: _first(p["ops"], "g").__setitem__(2, "_data"), "private attribute")
    _refused(lambda p: p["ops"].insert(0, ["g", "neuronxcc.nki.language", "np", {"h": 0}, 1]), "not NKI API")
    _refused(lambda p: p["ops"].insert(0, ["g", "nki", "baremetal", {"h": 0}, 1]), "not NKI API")
    _refused(lambda p: p["ops"].insert(0, ["g", "os", "system", {"h": 0}, 1]), "not NKI API")

    def tensor_internals(p):  # reading .fill / .layout of the argument tensor (handle 0 or 1)
        arg = p["args"]["t"][0]["h"]
        p["ops"].insert(0, ["g", arg, "allocate", {"h": p["handles"]}, 1])
        p["handles"] += 1
    _refused(tensor_internals, "does not offer")

    _refused(lambda p: p["ops"].insert(0, ["c", p["handles"] - 1, [], [], {"=": None}, 1]), "before it was made")

    def operator_on_literals(p):
        p["ops"].insert(0, ["o", "mul", ["a", 10 ** 9], {"h": p["handles"]}, 1])
        p["handles"] += 1
    _refused(operator_on_literals, "is not NKI API")
    _refused(lambda p: p["ops"].insert(0, ["o", "__import__", ["os"], {"=": None}, 1]), "unknown operator")
    _refused(lambda p: p["ops"].insert(0, ["o", "add", [p["args"]["t"][0], {"nf": "load"}], {"=": None}, 1]),
             "not allowed")  # np.load by name
    _refused(lambda p: p.__setitem__("version", 99), "not a version")


def test_malformed_programs_are_refused():
    for data in (b"{", b"[]", b'{"format": "x"}', json.dumps({"format": program.FORMAT, "version": 1}).encode()):
        try:
            program.kernel_from(data)
        except program.ProgramError:
            continue
        raise AssertionError(data)


def test_a_literal_that_differs_on_replay_is_a_divergence():
    recorded = _record()
    shape_read = next(op for op in recorded["ops"] if op[0] == "g" and op[2] == "shape")
    shape_read[3] = {"=": {"t": [512, 64]}}
    try:
        nki_emu.run(program.kernel_from(json.dumps(recorded)), [np.ones((256, 64), np.float32), 0.5])
    except replay.ProgramDivergence as exc:
        assert "depends on input data" in str(exc) and exc.kernel_file == "/virtual/kernel.py"
        return
    raise AssertionError("a changed shape was not noticed")


def test_objects_of_the_kernel_cannot_enter_a_program():
    source = SOURCE.replace("op=np.exp", "op=lambda v: v")
    try:
        _record(source)
    except program.ProgramError as exc:
        assert "function" in str(exc) and exc.line is not None
        return
    raise AssertionError("a Python function entered a program")


BLOCKS = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    out = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((2, nl.par_dim(128), 64), dtype=x.dtype, buffer=nl.sbuf)
    for i0 in nl.affine_range(2):
        buf[i0, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.load(x[i0 * 128 + nl.arange(128)[:, None], nl.arange(64)[None, :]])
        nl.store(out[i0 * 128 + nl.arange(128)[:, None], nl.arange(64)[None, :]], value=buf[i0, nl.arange(128)[:, None], nl.arange(64)[None, :]])
    return out
"""


def test_block_releases_are_recorded_for_the_replay():
    # each block of `buf` is dead after its iteration (nki_emu.liveness): the trace records
    # the release, and the replay frees it at the same point
    recorded = program.record(_loader(BLOCKS, "/virtual/blocks.py"), [np.zeros((256, 64), np.float32)],
                              "/virtual/blocks.py")
    releases = [op for op in recorded["ops"] if op[0] == "r"]
    assert [op[2] for op in releases] == [[0], [1]], releases
    x = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
    assert np.array_equal(nki_emu.run(program.kernel_from(program.dumps(recorded)), [x]).outputs, x)

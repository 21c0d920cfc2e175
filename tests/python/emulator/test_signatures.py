"""No silent keywords (issue 20): every emulated nl/nisa API checks its arguments against
its neuronxcc signature; an unknown keyword or a wrong arity is a compile error naming the
API and the keyword, located at the kernel's source line (nki_emu.signatures)."""
import inspect
import types

import numpy as np

from emulator.emu_helpers import expect_error, rand
import nki_emu
import nki.isa as nisa
import nki.language as nl
import neuronxcc.nki.language as legacy_nl


def _run(body, *args, target="trn1"):
    return nki_emu.run(body, list(args), trace=False, target=target)


def _apis(module):
    return [(name, value) for name, value in sorted(vars(module).items())
            if not name.startswith("_") and isinstance(value, types.FunctionType)]


def test_every_api_refuses_an_unknown_keyword_at_the_kernel_line():
    checked = 0
    for prefix, module in (("nki.language", nl), ("nki.isa", nisa)):
        for name, fn in _apis(module):
            def k(x, fn=fn):
                fn(bogus_keyword=1)
            line = k.__code__.co_firstlineno + 1
            try:
                _run(k, rand(4, 4))
            except nki_emu.NKICompileError as err:
                if err.code == "err_api_not_emulated":
                    assert name in err.message, err.message
                    continue
                assert err.code == "err_unexpected_keyword_argument", (name, err.code, err.message)
                assert f"'{prefix}.{name}'" in err.message and "'bogus_keyword'" in err.message, err.message
                assert err.filename.endswith("test_signatures.py") and err.lineno == line, (err.filename, err.lineno)
                checked += 1
            else:
                raise AssertionError(f"{prefix}.{name}(bogus_keyword=1) was accepted")
    assert checked > 100, checked  # the whole surface, not a sample


def test_beta2_keyword_on_a_legacy_only_api_is_refused():
    def k(x):
        t = nl.load(x)
        nl.exp(t, dst=t)  # nl.exp has no dst (it returns a tile)
    err = expect_error("err_unexpected_keyword_argument", _run, k, rand(4, 4))
    assert "'nki.language.exp'" in err.message and "'dst'" in err.message


def test_wrong_arity_is_refused_with_the_signature():
    def k(x):
        nisa.tensor_tensor(nl.load(x))  # legacy form: data1, data2, op
    err = expect_error("err_invalid_number_of_arguments", _run, k, rand(4, 4))
    assert "nki.isa.tensor_tensor" in err.message and "data2" in err.message
    def k2(x):
        t = nl.load(x)
        nl.add(t, t, None, None, 5)  # x, y, dtype, mask: one too many
    err = expect_error("err_invalid_number_of_arguments", _run, k2, rand(4, 4))
    assert "nki.language.add" in err.message


def test_nkibench_keywords_still_accepted():
    def k(x):
        out = nl.ndarray(x.shape, dtype=np.float32, buffer=nl.shared_hbm)
        z = nl.zeros((4, 4), np.float32, buffer=nl.sbuf, name="z", lazy_initialization=True)
        t = nl.load(x, mask=None, dtype=np.float32)
        nl.store(out, nl.add(t, z, mask=None, dtype=np.float32), mask=None)
        return out
    x = rand(4, 4)
    assert np.array_equal(_run(k, x).outputs, x)


def test_checked_wrappers_keep_signature_and_op_name():
    assert inspect.signature(nl.add).parameters.keys() >= {"x", "y", "dtype", "mask"}
    assert nl.add.op_name == "add" and legacy_nl.max.op_name == "max"
    assert "dst" in nisa.nc_matmul.__doc__ and "stationary" in nisa.nc_matmul.__doc__


def test_issue_reproduction_nc_matmul_dst_keywords_compute():
    """The issue's report: nc_matmul(dst=p, stationary=s, moving=a) left p untouched (nan_inf)."""
    def k(s_hbm, a_hbm):
        out = nl.ndarray((32, 64), dtype=np.float32, buffer=nl.shared_hbm)
        s, a = nl.load(s_hbm), nl.load(a_hbm)
        p = nl.ndarray((32, 64), dtype=np.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=s, moving=a)
        nl.store(out, nl.copy(p))
        return out
    s, a = rand(16, 32), rand(16, 64, seed=1)
    got = _run(k, s, a, target="trn2").outputs
    assert np.allclose(got, s.T @ a, rtol=1e-5, atol=1e-5)

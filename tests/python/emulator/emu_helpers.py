"""Helpers for the emulator tests (not a test module)."""
import numpy as np

import nki_emu
from nki_emu.errors import NKICompileError

nki_emu.install()


def rel_l2(kernel_out, reference):
    """Relative L2 error in float64, as the NKIBench harness computes it."""
    k = np.asarray(kernel_out, np.float64).reshape(np.shape(reference))
    r = np.asarray(reference, np.float64)
    return float(np.linalg.norm(k - r) / np.linalg.norm(r))


def expect_error(code, fn, *args):
    """Runs fn(*args) and returns the NKICompileError with ``code``; fails otherwise."""
    try:
        fn(*args)
    except NKICompileError as err:
        assert err.code == code, f"expected {code}, got {err.code}: {err}"
        return err
    raise AssertionError(f"expected NKICompileError {code}")


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)

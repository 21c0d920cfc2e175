"""The per-target prompt partials (prompts/targets/<target>/, docs/prompts.md "Prompts per
target") teach what the emulator accepts on that target: the trn2 prompts' complete kernel
(SDK 2.28 `nki` forms) profiles correct through the harness on trn2, the forms they call
refused fail there with the validator's code, and neither target's partials contain the
other API's forms (trn2: none of the legacy-only `neuronxcc` forms SDK 2.28 has no more,
docs/nki-facts.md §1.2 and §2.9; trn1: none of the 2.28 `dst=` forms).
"""
import os
import re
import tempfile

import numpy as np

import nki_emu
from accelopt.profile import profile_kernel
from nki_emu.errors import NKICompileError

nki_emu.install()
import nki.isa as nisa  # noqa: E402 - registered by install()
import nki.language as nl  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TARGETS = os.path.join(REPO, "prompts", "targets")
X = np.random.default_rng(0).normal(size=(256, 1024)).astype(np.float32)


def _partials(target):
    """{file name: text} of prompts/targets/<target>/."""
    folder = os.path.join(TARGETS, target)
    return {name: open(os.path.join(folder, name), encoding="utf-8").read() for name in sorted(os.listdir(folder))}


def _code(kernel, target):
    """The NKICompileError code of running ``kernel`` on X, or None when it runs."""
    try:
        nki_emu.run(kernel, [X], target=target)
    except NKICompileError as error:
        return error.code
    return None


def test_both_targets_have_the_same_partials():
    assert set(_partials("trn1")) == set(_partials("trn2")) == {"api_guide.mustache", "api_name.mustache",
                                                                  "nki_facts.mustache"}


def test_the_trn2_example_kernel_profiles_correct_on_trn2_through_the_harness():
    blocks = re.findall(r"```python\n(.*?)```", _partials("trn2")["nki_facts.mustache"], re.S)
    assert len(blocks) == 1, blocks
    assert "import nki\n" in blocks[0] and "neuronxcc" not in blocks[0]
    with tempfile.TemporaryDirectory() as tmp:
        kernel = os.path.join(tmp, "kernel.py")
        with open(kernel, "w", encoding="utf-8") as f:
            f.write(blocks[0])
        reference = os.path.join(REPO, "nkibench", "reference", "silu_M256_N1024_numpy.py")
        result = profile_kernel({"kernel": kernel, "reference": reference, "backend": "emulator", "target": "trn2",
                                 "seeds": [0]})
    assert result["error"] is None, result["error"]
    assert result["correct"] and result["target"] == "trn2" and result["latency_ms"] > 0, result


def _allocate_and_copy(shape, buffer=None):
    def kernel(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray(shape, dtype=nl.float32, buffer=buffer or nl.sbuf)
        nisa.dma_copy(dst=t, src=x[0:shape[0], 0:shape[1]])
        nisa.dma_copy(dst=out, src=t[0:128, 0:512])
        return out
    return kernel


def test_the_trn2_refused_forms_fail_with_their_codes_and_the_fixes_run():
    assert _code(_allocate_and_copy((256, 512)), "trn2") == "err_num_partition_exceed_arch_limit"
    assert _code(_allocate_and_copy((128, 512)), "trn2") is None

    def wide_psum(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
        a = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x[0:128, 0:128])
        nisa.dma_copy(dst=b, src=x[0:128, 0:1024])
        nisa.nc_matmul(dst=acc, stationary=a, moving=b)
        s = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=acc[0:128, 0:512])
        nisa.dma_copy(dst=out, src=s)
        return out

    def mixed_allocation(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        u = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[0:128, 0:512])
        nisa.tensor_copy(dst=u, src=t)
        nisa.dma_copy(dst=out, src=u)
        return out

    assert _code(wide_psum, "trn2") == "err_psum_tile_exceed_bank_size"
    assert _code(mixed_allocation, "trn2") == "err_mixed_allocation"


def test_a_number_as_activation_bias_runs_on_trn2_only_as_each_targets_prompts_say():
    def number_bias(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        y = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[0:128, 0:512])
        nisa.activation(dst=y, op=nl.exp, data=t, bias=1.0, scale=-1.0)
        nisa.dma_copy(dst=out, src=y)
        return out

    assert _code(number_bias, "trn2") is None
    assert _code(number_bias, "trn1") == "err_activation_bias_invalid_type"
    assert "`bias=1.0` does\n  not compile" in _partials("trn1")["nki_facts.mustache"]
    assert "`bias` a Python number or a (P, 1) tile" in _partials("trn2")["nki_facts.mustache"]


# Forms SDK 2.28's `nki` namespace no longer has (docs/nki-facts.md §1.2: no nl.load/store/
# copy/matmul/sum/arange; §2.9: every nki.isa call takes `dst`, no dtype/mask).
LEGACY_ONLY = [r"neuronxcc", r"\bnl\.(load|store|copy|matmul|sum|arange|mgrid|zeros|full)\(", r"par_dim",
               r"\+= *nisa\.", r"= *nisa\.\w+\(", r"\bmask=[^`]"]
# Forms of SDK 2.28 the legacy API of the trn1 prompts does not have.
BETA2_ONLY = [r"\bdst=", r"dma_copy", r"dma_transpose", r"^import nki$", r"address=", r"NeuronCore-v3"]


def test_each_targets_partials_hold_only_its_own_api_forms():
    for name, text in _partials("trn2").items():
        # The one line that names the older forms as mistakes is the exception.
        lines = [line for line in text.splitlines()
                 if "Older API forms" not in line and "`nl.store(out[...], value=y)`" not in line
                 and "nki.language` has no" not in line and "Do not import `neuronxcc`" not in line
                 and "currently imports `neuronxcc.nki`" not in line and "current kernel imports `neuronxcc.nki`" not in line]
        for pattern in LEGACY_ONLY:
            hits = [line for line in lines if re.search(pattern, line)]
            assert not hits, (name, pattern, hits)
    for name, text in _partials("trn1").items():
        for pattern in BETA2_ONLY:
            hits = [line for line in text.splitlines() if re.search(pattern, line)]
            assert not hits, (name, pattern, hits)

"""The examples the trn1 prompts give (prompts/targets/trn1/nki_facts.mustache, api_guide.mustache)
behave in the emulator as the prompts say: every "refused" form fails with the
validator's error code, every suggested fix runs. docs/prompts.md lists the facts;
the two it marks "not checked" are pinned here as accepted, so that a new emulator
rule shows up as a failing test and the table gets updated.
"""
import numpy as np

import nki_emu
from nki_emu.errors import NKICompileError, UnwrittenOutputError

nki_emu.install()
import neuronxcc.nki.isa as nisa  # noqa: E402 - registered by install()
import neuronxcc.nki.language as nl  # noqa: E402

X = np.random.default_rng(0).normal(size=(256, 1024)).astype(np.float32)


def _code(kernel, target="trn1"):
    """The NKICompileError code of running ``kernel`` on X, "unwritten_output", or None when it runs."""
    try:
        nki_emu.run(kernel, [X], target=target)
    except NKICompileError as error:
        return error.code
    except UnwrittenOutputError:
        return "unwritten_output"
    return None


def _out(shape=(128, 512)):
    return nl.ndarray(shape, dtype=nl.float32, buffer=nl.shared_hbm)


def _store_all(out, tile):
    nl.store(out[0:128, 0:512], value=tile)


def test_activation_bias_is_a_tile_never_a_number():
    def number_bias(x):
        out = _out()
        t = nl.load(x[0:128, 0:512])
        _store_all(out, nisa.activation(op=nl.exp, data=t, bias=1.0))
        return out

    def tile_bias(x):  # the fix the prompts give
        out = _out()
        one = nl.full((128, 1), 1.0, dtype=nl.float32)
        t = nl.load(x[0:128, 0:512])
        _store_all(out, nisa.activation(op=nl.exp, data=t, bias=one))
        return out

    assert _code(number_bias) == "err_activation_bias_invalid_type"
    assert _code(tile_bias) is None


def test_activation_reciprocal_takes_no_bias_and_reduce_only_adds_on_trn1():
    def reciprocal_bias(x):
        out = _out()
        zero = nl.zeros((128, 1), dtype=nl.float32)
        t = nl.load(x[0:128, 0:512])
        _store_all(out, nisa.activation(op=nl.reciprocal, data=t, bias=zero))
        return out

    def reduce_max(x):
        out = _out()
        red = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        t = nl.load(x[0:128, 0:512])
        _store_all(out, nisa.activation(op=nl.exp, data=t, reduce_op=nl.max, reduce_res=red))
        return out

    assert _code(reciprocal_bias) == "err_activation_reciprocal_bias_unsupported"
    assert _code(reduce_max) == "err_activation_reduce_op_unsupported"


def test_mixed_indexing_is_refused_and_either_style_alone_runs():
    def mixed(x):
        out = _out()
        i_p = nl.arange(128)[:, None]
        _store_all(out, nl.load(x[i_p, 0:512]))
        return out

    def advanced(x):
        out = _out()
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(512)[None, :]
        _store_all(out, nl.load(x[i_p, i_f]))
        return out

    def one_d_arange(x):
        out = _out()
        _store_all(out, nl.load(x[nl.arange(128), 0]))
        return out

    assert _code(mixed) == "err_unsupported_mixing_basic_advanced_tensor_indexing"
    assert _code(advanced) is None
    assert _code(one_d_arange) == "err_1d_arange_not_supported"


def test_tile_and_psum_limits():
    def too_tall(x):
        out = _out()
        _store_all(out, nl.load(x[0:256, 0:512]))
        return out

    def psum_too_wide(x):
        out = _out()
        acc = nl.zeros((128, 1024), nl.float32, buffer=nl.psum)
        t = nl.load(x[0:128, 0:1024])
        acc[...] = nl.multiply(t, 2.0)
        _store_all(out, nl.load(x[0:128, 0:512]))
        return out

    assert _code(too_tall) == "err_num_partition_exceed_arch_limit"
    assert _code(psum_too_wide) == "err_psum_tile_exceed_bank_size"


def test_nc_matmul_operands_live_in_sbuf_within_the_size_limits():
    def psum_operand(x):
        out = _out()
        a = nl.load(x[0:128, 0:128])
        b = nl.load(x[0:128, 0:512])
        p = nisa.nc_matmul(a, b)  # (128, 512) in PSUM
        _store_all(out, nisa.nc_matmul(a, p))
        return out

    def moving_too_wide(x):
        out = _out()
        a = nl.load(x[0:128, 0:128])
        b = nl.load(x[0:128, 0:1024])
        _store_all(out, nisa.nc_matmul(a, b))
        return out

    def copied_to_sbuf(x):  # the fix the executor prompt gives
        out = _out()
        a = nl.load(x[0:128, 0:128])
        b = nl.load(x[0:128, 0:512])
        p = nl.copy(nisa.nc_matmul(a, b))
        _store_all(out, nisa.nc_matmul(a, p, is_stationary_onezero=False))
        return out

    assert _code(psum_operand) == "err_unsupported_memory"
    assert _code(moving_too_wide) == "err_moving_free_size_exceed_limit"
    assert _code(copied_to_sbuf) is None


def test_tensor_scalar_cannot_run_on_the_scalar_engine_on_trn1():
    def on_scalar(x):
        out = _out()
        t = nl.load(x[0:128, 0:512])
        _store_all(out, nisa.tensor_scalar(t, nl.multiply, 2.0, engine=nisa.scalar_engine))
        return out

    assert _code(on_scalar) == "err_tensor_scalar_engine_unsupported"


def test_reductions_stay_on_free_axes():
    def partition_sum(x):
        out = _out()
        t = nl.load(x[0:128, 0:512])
        _store_all(out, nl.sum(t, axis=0))
        return out

    assert _code(partition_sum) == "err_reduce_on_partition_axis"


def test_not_checked_by_the_emulator_store_by_assignment_and_list_indexing():
    # docs/prompts.md marks these two prompt rules "not checked": the emulator accepts them.
    def assign_output(x):
        out = _out((256, 1024))
        for i in nl.affine_range(2):
            for j in nl.affine_range(2):
                t = nl.load(x[i * 128:(i + 1) * 128, j * 512:(j + 1) * 512])
                out[i * 128:(i + 1) * 128, j * 512:(j + 1) * 512] = nisa.activation(op=nl.exp, data=t)
        return out

    def list_of_tiles(x):
        out = _out((256, 512))
        tiles = [nl.load(x[0:128, 0:512]), nl.load(x[128:256, 0:512])]
        for i in nl.affine_range(2):
            nl.store(out[i * 128:(i + 1) * 128, 0:512], value=tiles[i])
        return out

    assert _code(assign_output) is None
    assert _code(list_of_tiles) is None

"""accelopt.batched_runs: a candidate's input sets in as few emulator calls as memory
allows, each set's results exactly those of its own run."""
import numpy as np

import nki_emu
from accelopt import batched_runs

nki_emu.install()
import neuronxcc.nki.language as nl  # noqa: E402 - after install()


def _double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x), 2.0))
    return out


def _gather(table, idx):
    out = nl.ndarray((4, 8), dtype=table.dtype, buffer=nl.shared_hbm)
    ids = nl.load(idx)
    nl.store(out, value=nl.load(table[ids[nl.arange(4)[:, None], 0], nl.arange(8)[None, :]]))
    return out


def _refused(x):
    tile = nl.load(x)
    return nl.transpose(nl.ndarray((200, 4), dtype=np.float32, buffer=nl.sbuf))  # 200 partitions


def _sets(count=4):
    rng = np.random.default_rng(5)
    sets = [[rng.normal(size=(16, 8)).astype(np.float32)] for _ in range(count)]
    for (x,) in sets:
        x.flags.writeable = False  # what a worker decodes
    return sets


def _check_outputs(done, sets, kernel):
    for args, out in zip(sets, done.outputs):
        assert np.array_equal(out, nki_emu.run(kernel, args, trace=False).outputs)


def test_small_input_sets_run_in_one_traced_call():
    sets = _sets()
    done = batched_runs.run(nki_emu, _double, sets, 2, "trn1", cap_bytes=1 << 40)
    assert [p["sets"] for p in done.passes] == [[0, 1, 2, 3]] and done.passes[0]["traced"]
    assert done.member_bytes is None and done.profile["latency_ms"] > 0
    assert done.profile == nki_emu.run(_double, sets[2]).profile
    _check_outputs(done, sets, _double)


def test_otherwise_the_timed_set_runs_alone_first_then_the_rest_as_they_fit():
    sets = _sets()
    done = batched_runs.run(nki_emu, _double, sets, 1, "trn1", cap_bytes=1 << 40, max_batch=3)
    assert [p["sets"] for p in done.passes] == [[1], [0, 2, 3]]
    assert [p["traced"] for p in done.passes] == [True, False]
    assert done.member_bytes >= batched_runs.MIN_MEMBER_BYTES
    _check_outputs(done, sets, _double)
    tight = batched_runs.run(nki_emu, _double, sets, 3, "trn1", cap_bytes=0)  # nothing fits: one at a time
    assert [p["sets"] for p in tight.passes] == [[3], [0], [1], [2]]
    _check_outputs(tight, sets, _double)
    big = batched_runs.run(nki_emu, _double, sets, 0, "trn1",  # inputs x INPUT_FACTOR over the cap: probe
                           cap_bytes=batched_runs._max_rss_bytes() + 2 * batched_runs.INPUT_FACTOR * sets[0][0].nbytes)
    assert [p["sets"] for p in big.passes][0] == [0] and len(big.passes) > 1
    untimed = batched_runs.run(nki_emu, _double, sets, -1, "trn1", cap_bytes=1 << 40)
    assert untimed.profile is None and not untimed.passes[0]["traced"]


def test_refusals_every_set_shares_are_uniform_others_fall_back():
    try:
        batched_runs.run(nki_emu, _refused, _sets(), 0, "trn1", cap_bytes=1 << 40)
    except batched_runs.UniformFailure as failure:
        assert isinstance(failure.error, nki_emu.NKICompileError)
    else:
        raise AssertionError("expected UniformFailure")
    table = [np.arange(128, dtype=np.float32).reshape(16, 8) + s for s in range(3)]
    idx = [np.array([[1], [0], [3], [2]], np.int32) for _ in range(3)]
    idx[2] = np.array([[1], [0], [99], [2]], np.int32)  # out of bounds in one set only
    for kernel, sets, reason in ((_gather, [[t, i] for t, i in zip(table, idx)], "may differ"),
                                 (_double, [[np.ones((4, 4), np.float32)], [np.ones((4, 5), np.float32)]],
                                  "not batchable")):
        try:
            batched_runs.run(nki_emu, kernel, sets, 0, "trn1", cap_bytes=1 << 40)
        except batched_runs.Fallback as fallback:
            assert reason in fallback.reason, fallback.reason
        else:
            raise AssertionError(f"expected Fallback ({reason})")


def test_memory_cap_is_below_the_address_space_limit_and_the_per_core_share():
    import os
    import resource
    cap = batched_runs.memory_cap_bytes()
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert 0 < cap <= physical // (os.cpu_count() or 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (16 << 30, hard))
        assert batched_runs.memory_cap_bytes() <= int((16 << 30) * batched_runs.HEADROOM)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_one_set_is_one_traced_call_on_the_caller_s_arrays():
    sets = _sets(1)
    done = batched_runs.run(nki_emu, _double, sets, 0, "trn1", cap_bytes=1 << 40)
    assert [p["sets"] for p in done.passes] == [[0]] and done.passes[0]["traced"]
    assert done.profile == nki_emu.run(_double, sets[0]).profile
    _check_outputs(done, sets, _double)
    assert done.arguments[0][0] is sets[0][0]  # held as is: no copy of the inputs


def test_a_kernel_with_large_intermediates_runs_in_small_groups():
    mib = 1 << 20
    rest = [0, 1, 2, 4, 5]
    # a set that grows the process by 300 MiB (mamba before its dead tiles were freed: ~540)
    # runs alone although the cap (2.8 GB of a 4 GiB worker) would hold several
    assert batched_runs._groups_after_probe(rest, 300 * mib, 2800 * mib, 6, peak=400 * mib) == \
        [[0], [1], [2], [4], [5]]
    # 47 MiB per set (mamba now): the five share one call
    assert batched_runs._groups_after_probe(rest, 47 * mib, 2800 * mib, 6, peak=400 * mib) == [rest]
    # 150 MiB per set: two per call (2 x 150 x SAFETY <= 512 MiB < 3 x 150 x SAFETY)
    assert batched_runs._groups_after_probe(rest, 150 * mib, 2800 * mib, 6, peak=400 * mib) == \
        [[0, 1], [2, 4], [5]]
    # the cap still bounds it, and a set never waits for room
    assert batched_runs._groups_after_probe(rest, 47 * mib, 500 * mib, 6, peak=400 * mib) == \
        [[0], [1], [2], [4], [5]]
    assert batched_runs._groups_after_probe(rest, 47 * mib, 2800 * mib, 2, growth=1 << 40, peak=0) == \
        [[0, 1], [2, 4], [5]]


def test_small_inputs_skip_the_probe_only_within_the_growth_budget():
    sets = _sets()
    inputs = sum(x.nbytes for (x,) in sets)
    tight = batched_runs.run(nki_emu, _double, sets, 0, "trn1", cap_bytes=1 << 40,
                             growth_bytes=inputs * batched_runs.INPUT_FACTOR - 1)
    assert tight.passes[0]["sets"] == [0] and tight.member_bytes is not None  # probed
    _check_outputs(tight, sets, _double)
    roomy = batched_runs.run(nki_emu, _double, sets, 0, "trn1", cap_bytes=1 << 40,
                             growth_bytes=inputs * batched_runs.INPUT_FACTOR)
    assert [p["sets"] for p in roomy.passes] == [[0, 1, 2, 3]] and roomy.member_bytes is None

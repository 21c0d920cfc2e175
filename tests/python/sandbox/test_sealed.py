"""Sealed memfds for a call's inputs and a candidate's reply (accelopt.sandbox.sealed) and the trusted
flow that uses them: the same judgement as piped attachments, and bytes nobody can change."""
import fcntl
import json
import mmap
import os
import sys

import numpy as np

from sandbox.tracing import traced
from accelopt.sandbox import codec, sealed, trusted, untrusted

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_trusted_split import HARNESS, _request  # noqa: E402 - the split's request builder


def _is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def test_buffers_are_copied_once_aligned_and_sealed():
    a = np.arange(10, dtype=np.float32)
    b = np.ones((3, 5))
    shared = sealed.SealedBuffers([a, b, b""])
    assert shared.ranges == [[0, 0, 40], [0, 64, 120], [0, 192, 0]]
    seals = fcntl.fcntl(shared.fd, fcntl.F_GET_SEALS)
    assert seals & sealed.INPUT_SEALS == sealed.INPUT_SEALS
    for attempt in (lambda: os.pwrite(shared.fd, b"x", 0), lambda: os.ftruncate(shared.fd, 0),
                    lambda: mmap.mmap(shared.fd, 64, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)):
        try:
            attempt()
            raise AssertionError("a sealed memfd accepted a change")
        except PermissionError:
            pass
    views = sealed.map_ranges([os.dup(shared.fd)], shared.ranges)
    assert np.array_equal(np.frombuffer(views[0], np.float32), a)
    assert np.array_equal(np.frombuffer(views[1]).reshape(3, 5), b) and views[2].nbytes == 0
    assert views[0].readonly
    fd = shared.fd
    shared.close()
    shared.close()
    assert not _is_open(fd)


def test_ranges_outside_their_memfd_are_refused_and_descriptors_closed():
    shared = sealed.SealedBuffers([np.zeros(16, np.uint8)])
    for bad in ([[0, 0, 65]], [[1, 0, 1]], [[0, -1, 1]], [["x", 0, 1]], [[0, 0]]):
        fd = os.dup(shared.fd)
        try:
            sealed.map_ranges([fd], bad)
            raise AssertionError(f"{bad} was accepted")
        except codec.CodecError:
            pass
        assert not _is_open(fd)


def _reply_memfd(blobs, header=b'{"ok": true}\n'):
    """A sealed memfd laid out as a candidate's reply: header line, then the attachments."""
    fd = os.memfd_create("reply", os.MFD_ALLOW_SEALING)
    os.write(fd, header)
    for blob in blobs:
        os.write(fd, bytes(blob))
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK)
    return fd, len(header)


def test_reply_views_and_their_bounds():
    fd, at = _reply_memfd([b"abc", b"", b"defg"])
    try:
        views = sealed.map_reply(fd, at, [3, 0, 4])
        assert [bytes(v) for v in views] == [b"abc", b"", b"defg"]
        try:
            sealed.map_reply(fd, at, [3, 0, 5])
            raise AssertionError("a reply larger than its memfd was accepted")
        except codec.CodecError:
            pass
    finally:
        os.close(fd)


def _shared_round_trip(request, reply_memfd=True, inodes=None):
    """prepare -> (the worker: mapped memfd ranges) -> run_kernel -> finish; returns (result, first job).
    ``inodes`` (list, optional) receives the inode of every memfd sent."""
    prepared, blobs = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel", "arg": request,
                                       "options": {"shared_inputs": True, "shared_min_bytes": 0}})
    prepared, blobs = traced(prepared, blobs)
    first = None
    while True:
        job = json.loads(json.dumps(prepared["worker"]))
        first = first or job
        assert blobs == [] and "shared" in job
        shared = job["shared"]
        if inodes is not None:
            inodes.extend(os.fstat(fd).st_ino for fd in shared["memfds"])
        inputs = sealed.map_ranges([os.dup(fd) for fd in shared["memfds"]], shared["blobs"])
        value, out_blobs = getattr(untrusted, job["function"])(job["arg"], inputs)
        outcome = {"ok": True, "result": json.loads(json.dumps(value)), "integrity": []}
        fd = None
        if reply_memfd:
            fd, at = _reply_memfd(out_blobs)
            outcome["reply_memfd"] = {"fd": fd, "at": at, "sizes": [memoryview(b).nbytes for b in out_blobs]}
            out_blobs = []
        try:
            result, blobs = trusted.finish({"token": prepared["token"], "outcome": outcome},
                                           [bytes(b) for b in out_blobs])
        finally:
            if fd is not None:
                os.close(fd)
        if not result.get("next_pass"):
            return result, first
        prepared = result


def test_shared_inputs_and_reply_judge_like_piped_ones():
    from test_trusted_split import _isolated
    piped, _ = _isolated(_request("kernel_good.py"))
    for reply_memfd in (True, False):
        result, job = _shared_round_trip(_request("kernel_good.py"), reply_memfd)
        assert result["error"] is None and result["correct"], result["error"]
        assert result["latency_ms"] == piped["latency_ms"] and result["rel_errors"] == piped["rel_errors"]
        assert "share_ms" in result["timings"]
        assert result["timings"]["reply_shared"] is reply_memfd
        assert not _is_open(job["shared"]["memfds"][0])  # the host closed its memfd with the call
    wrong, _ = _shared_round_trip(_request("kernel_wrong.py", "ref_double.py", HARNESS))
    assert wrong["error"]["kind"] == "wrong_result"
    assert trusted.pending() == 0


def test_an_unmappable_reply_is_a_worker_error():
    prepared, _ = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel",
                                   "arg": _request("kernel_good.py"), "options": {"shared_inputs": True, "shared_min_bytes": 0}})
    prepared, _ = traced(prepared, [])
    outcome = {"ok": True, "result": {"runs": []}, "integrity": [], "reply_memfd": {"fd": 10**6, "at": 0, "sizes": [4]}}
    result, blobs = trusted.finish({"token": prepared["token"], "outcome": outcome}, [])
    assert result["error"]["kind"] == "worker_error" and "reply memfd" in result["error"]["message"]
    assert blobs == [] and trusted.pending() == 0


def test_a_reused_hidden_set_keeps_one_memfd_for_its_screens():
    from accelopt.sandbox import draws
    trusted.HIDDEN.clear()
    request = _request("kernel_good.py", seeds=[], hidden_only=True, hidden_reuse=2)
    reused, inodes = [], []
    for _ in range(3):  # two screens share a set, the third draws a new one
        result, job = _shared_round_trip(request, inodes=inodes)
        assert result["error"] is None and result["correct"], result["error"]
        reused.append(result["timings"]["hidden_reused"])
    assert reused == [False, True, False]
    # each pass sends the set's inputs memfd and its own program's memfd
    assert len(inodes) == 6
    inputs = inodes[0::2]
    assert inputs[0] == inputs[1] != inputs[2]  # the second screen sent the first one's inputs memfd again
    assert len(set(inodes[1::2]) | set(inputs)) == 5  # a program memfd is never the set's, nor shared
    kept = [d for d, _ in trusted.HIDDEN._kept.values()]
    assert len(kept) == 1 and kept[0].sealed_inputs is not None
    assert kept[0].nbytes >= kept[0].sealed_inputs.nbytes + draws._nbytes(kept[0].nki_inputs)
    fd = kept[0].sealed_inputs.fd
    assert _is_open(fd)  # the set's memfd outlives the calls it served
    trusted.HIDDEN.clear()


def test_a_hidden_sets_memfd_is_made_once_for_concurrent_screens():
    # The regression of a CI hang: two screens racing to make a shared hidden set's memfd
    # each made one, and the loser's was collected (its descriptor closed) while its call
    # was about to send the number.
    import threading
    from accelopt.sandbox import draws
    drawn = draws.Draw(7, None, [np.zeros(4, np.float32)], 0.0)
    start, got = threading.Barrier(8), []

    def make():
        start.wait()
        got.append(drawn.sealed([b"x" * 4096]))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 8 and all(buffers is drawn.sealed_inputs for buffers in got)
    assert _is_open(drawn.sealed_inputs.fd)


def test_a_pass_holds_its_memfd_until_it_is_judged_or_the_end():
    state = {"shared_inputs": 0, "order": {0: 0, 1: 1}, "passes": [[0], [1]], "pass": 0, "timings": {}}
    job, blobs = trusted._shared_job(state, {"module": "m"}, [b"y" * 1024])
    ahead, _ = trusted._shared_job(state, {"module": "m"}, [b"z" * 1024], pass_index=1)
    assert blobs == [] and job["shared"]["memfds"] == [state["sealed"][0][0].fd]
    fd, fd_ahead = job["shared"]["memfds"][0], ahead["shared"]["memfds"][0]
    import gc
    gc.collect()
    assert _is_open(fd) and _is_open(fd_ahead)  # only numbers travel on: the state keeps the buffers
    trusted._close_shared(state, before=1)  # pass 0 judged: its memfd goes, the one sent ahead stays
    assert not _is_open(fd) and _is_open(fd_ahead)
    trusted._close_shared(state)
    assert not _is_open(fd_ahead)


def test_small_inputs_go_by_pipe_unless_asked_otherwise():
    assert sealed.enabled({}) is None and sealed.enabled({"shared_inputs": True}) == sealed.MIN_BYTES
    prepared, blobs = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel",
                                       "arg": _request("kernel_good.py"), "options": {"shared_inputs": True}})
    prepared, blobs = traced(prepared, blobs)
    # 3 seeds + 1 hidden set, 32 KiB each, and the traced program
    assert "shared" not in prepared["worker"] and len(blobs) == 5
    trusted.discard({"token": prepared["token"]})


def test_screens_sharing_a_hidden_set_each_run_their_own_program():
    # Regression: the first screen's program went into the hidden set's shared memfd, and
    # every later screen of the problem replayed it (all screens had one latency).
    trusted.HIDDEN.clear()
    trusted.PROGRAMS.clear()
    good = _request("kernel_good.py", seeds=[], hidden_only=True, hidden_reuse=4)
    other = dict(good, kernel=os.path.join(os.path.dirname(good["kernel"]), "adv_unwritten.py"))
    first, _ = _shared_round_trip(good)
    assert first["error"] is None and first["correct"], first["error"]
    second, job = _shared_round_trip(other)
    assert second["timings"]["hidden_reused"] is True
    assert second["error"] is not None and second["error"]["kind"] == "unwritten_output", second["error"]
    trusted.HIDDEN.clear()

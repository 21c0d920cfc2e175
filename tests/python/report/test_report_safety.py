"""The report and compare read only regular files inside the run, size-capped (issue 34).

A run's JSON names kernel paths; a run directory can come from elsewhere. A
path outside the run, a link leading out of it, a FIFO or a huge file must
not be inlined into report.html, hang it or exhaust memory.
"""
import json
import os
import threading

from accelopt import report
from accelopt.report import run_files
from report import report_fixtures as fx

WINNER = "silu_M256-i0-b0p1-s0"


def _retarget(run_dir, old, new):
    """Replaces the path ``old`` by ``new`` in every JSON file of the run (what a planted run would name)."""
    for folder, _, names in os.walk(run_dir):
        for name in names:
            if not name.endswith((".json", ".jsonl")):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            if json.dumps(old)[1:-1] in text:
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1]))


def _winner_kernel(run_dir):
    return os.path.join(run_dir, "stages", "06-optimize", "iter-0", "02-execute", "kernels", WINNER + ".py")


def _html(result):
    with open(result["path"], encoding="utf-8") as handle:
        return handle.read()


def _bounded(fn, release=None, seconds=20):
    """Runs fn() on a thread; fails (after calling ``release``) when it is still running after ``seconds``."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as error:  # reported below
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if release:
            release()
        thread.join(5)
        raise AssertionError(f"still running after {seconds} s (a FIFO or device was opened for reading)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _release_fifo(path):
    def release():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
    return release


def test_kernel_paths_outside_the_run_are_not_inlined():
    root = fx.temp_root()
    try:
        run_dir = fx.beam_run(root)
        secret = os.path.join(root, "secret.py")
        with open(secret, "w", encoding="utf-8") as handle:
            handle.write("API_KEY = 'WINNER-SECRET-4711'\n")
        _retarget(run_dir, _winner_kernel(run_dir), secret)
        # The baseline named by the run lies outside it (NKIBench's file): never read either.
        with open(os.path.join(root, "nkibench", "silu_0.py"), "w", encoding="utf-8") as handle:
            handle.write("PASSWORD = 'BASELINE-SECRET-0815'\n")
        html = _html(report.write_report({"run_dir": run_dir}))
        assert "WINNER-SECRET-4711" not in html
        assert "BASELINE-SECRET-0815" not in html
        fx.check_page(html)
    finally:
        fx.remove(root)


def test_links_inside_the_run_are_not_followed():
    root = fx.temp_root()
    try:
        run_dir = fx.beam_run(root)
        secret = os.path.join(root, "secret.txt")
        with open(secret, "w", encoding="utf-8") as handle:
            handle.write("LINKED-SECRET-1234\n")
        winner = _winner_kernel(run_dir)
        os.unlink(winner)
        os.symlink(secret, winner)
        # run.json too: a link to a JSON file elsewhere is not read.
        other = os.path.join(root, "other-run.json")
        with open(other, "w", encoding="utf-8") as handle:
            json.dump({"name": "OTHER-RUN-NAME", "status": "succeeded"}, handle)
        os.unlink(os.path.join(run_dir, "run.json"))
        os.symlink(other, os.path.join(run_dir, "run.json"))
        html = _html(report.write_report({"run_dir": run_dir}))
        assert "LINKED-SECRET-1234" not in html
        assert "OTHER-RUN-NAME" not in html
        # A folder of the run that is a link to a folder elsewhere.
        kernels = os.path.dirname(winner)
        moved = os.path.join(root, "elsewhere")
        os.rename(kernels, moved)
        with open(os.path.join(moved, WINNER + ".py"), "w", encoding="utf-8") as handle:
            handle.write("DIR-LINK-SECRET-99\n")
        os.symlink(moved, kernels)
        html = _html(report.write_report({"run_dir": run_dir}))
        assert "DIR-LINK-SECRET-99" not in html
    finally:
        fx.remove(root)


def test_a_fifo_named_by_the_run_does_not_hang_report_or_compare():
    root = fx.temp_root()
    try:
        run_dir = fx.beam_run(root)
        winner = _winner_kernel(run_dir)
        os.unlink(winner)
        os.mkfifo(winner)
        result = _bounded(lambda: report.write_report({"run_dir": run_dir}), _release_fifo(winner))
        assert result["kind"] == "optimize-beam"
        # run.json a FIFO: the summary (runs, compare) goes on without it.
        other = fx.beam_run(root, name="run-b")
        fifo = os.path.join(other, "run.json")
        os.unlink(fifo)
        os.mkfifo(fifo)
        compared = _bounded(lambda: report.compare_runs({"a": run_dir, "b": other}), _release_fifo(fifo))
        assert compared["rows"]
    finally:
        fx.remove(root)


def test_files_over_the_cap_are_not_read_whole():
    root = fx.temp_root()
    try:
        run_dir = fx.beam_run(root)
        files = run_files.RunFiles(run_dir)
        big = os.path.join(run_dir, "big.txt")
        with open(big, "wb") as handle:
            handle.truncate(run_files.MAX_TEXT_BYTES + 1)  # sparse: costs no disk
        assert files.text("big.txt", "default") == "default"
        assert files.text(big, "default") == "default"
        assert run_files.MAX_TEXT_BYTES <= 8 << 20 and run_files.MAX_JSON_BYTES <= 256 << 20
        # inside the run, regular, under the cap: read, by relative or absolute path
        assert files.text(_winner_kernel(run_dir)).startswith("import neuronxcc")
        assert files.text(os.path.relpath(_winner_kernel(run_dir), run_dir)).startswith("import neuronxcc")
        assert files.text("../" + os.path.basename(run_dir) + "/run.json", "no") == "no"   # no '..'
        assert files.json("run.json")["name"] == "nkibench-optimize"
    finally:
        fx.remove(root)

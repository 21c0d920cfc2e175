"""A candidate's input sets in as few emulator calls as memory allows (issue 14).

An NKI kernel's instruction stream does not depend on its data, so the
emulator runs it once for several input sets (``nki_emu.run_batched``): the
published seeds and the hidden set share one call and one cost trace. Each
set's results are exactly those of its own run (docs/nki-emulator.md,
"Batched execution"). A batch needs its members' storage at once, S times a
single run's, so the sets are grouped to fit the process's memory:

* when the sets' inputs are small enough that even INPUT_FACTOR times their
  bytes fits (under the cap and within BATCH_GROWTH_BYTES), one traced call
  runs every set;
* otherwise the timed set runs alone first (traced), its footprint is
  measured (peak resident memory, ``ru_maxrss``), and the other sets run in
  groups of as many as fit both the cap and BATCH_GROWTH_BYTES.

Nothing a candidate reports steers the plan of another candidate: the
footprint is measured in the candidate's own process, for its own batch
(docs/isolation.md, "nothing a candidate leaves reaches the next one").

What cannot be batched, or fails in a way that may differ between sets, is
refused with :class:`Fallback`: the caller then runs the sets one by one as
before (exact per-set semantics). A refusal that every set gets the same
(``uniform``: an NKI compile error or unwritten output raised before the sets'
data diverged) is reported as the first set's failure, as a run of the sets in
order would report it.
"""
import os
import resource
import time

# Share of the memory cap that batches may fill: the cap limits address space
# (RLIMIT_AS) while a member's footprint is measured in resident bytes.
HEADROOM = 0.7
# Margin on a member's measured footprint.
SAFETY = 1.25
# A footprint below this is measured as this (ru_maxrss has page granularity and
# counts memory freed and reused within the probe once).
MIN_MEMBER_BYTES = 1 << 20
# Peak memory of one run over its input bytes, bound for a single call without a probe:
# the largest of our full-size baselines is about 33 (gqa_full: 3.3 GB for 100 MB of
# inputs and outputs, docs/benchmarks/emulator-speed.txt), doubled.
INPUT_FACTOR = 64
# Most bytes one batched call may add to the process's resident memory (all its sets
# together; one set that needs more runs alone), so that a kernel with large
# intermediates runs one or a few sets per call instead of filling the cap (issue 14:
# the worker's peak stays near one set's, docs/benchmarks/candidate-memory.txt; mamba,
# 47 MB a set, still runs five sets in one call).
BATCH_GROWTH_BYTES = 512 << 20


class Fallback(Exception):
    """The sets must run one by one; ``reason`` (str) says why (reported in timings)."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class UniformFailure(Exception):
    """The kernel fails the same way on every set; ``error`` is the exception (attribute
    it to the first set in order)."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


class BatchedRuns:
    """What :func:`run` produced.

    ``outputs``/``arguments``: per set, in the caller's order: what the kernel returned
    (arrays or tuples; views of batched storage, no copy) and the arrays its arguments
    held (see ``nki_emu.BatchResult``); ``profile``: the timed set's estimated profile
    (None when ``timed`` < 0); ``passes``: [{"sets": [indices], "traced": bool, "ms":
    float}] in execution order; ``run_ms``/``replay_ms``: kernel calls and cost-model
    replay, summed (ms); ``member_bytes``: the measured footprint of one set (bytes;
    None when not measured: the inputs were small); ``cap_bytes``: the
    resident-memory cap the plan kept to.
    """

    def __init__(self, count, cap_bytes):
        self.outputs, self.arguments = [None] * count, [None] * count
        self.profile, self.passes, self.run_ms, self.replay_ms, self.member_bytes = None, [], 0.0, 0.0, None
        self.cap_bytes = cap_bytes


def _max_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def memory_cap_bytes():
    """Resident bytes batches may bring this process to: HEADROOM of the smaller of
    its address-space limit (RLIMIT_AS, a worker's memory_bytes) and its share of
    physical memory (one worker per core)."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        physical = 8 << 30
    try:
        cores = max(os.cpu_count() or 1, len(os.sched_getaffinity(0)))
    except OSError:  # a sandbox that refuses the query: the machine's count, or one
        cores = os.cpu_count() or 1
    cap = physical // cores
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft > 0:
        cap = min(cap, soft)
    return int(cap * HEADROOM)


def _groups_after_probe(rest, member_bytes, cap, limit, growth=BATCH_GROWTH_BYTES, peak=None):
    """Consecutive groups of ``rest`` (positions; at most ``limit`` each, at least one)
    whose measured footprint (``member_bytes`` per set, times SAFETY) fits both what is
    left under ``cap`` above ``peak`` (default: this process's peak so far) and
    ``growth`` bytes (all in bytes)."""
    room = min(cap - (_max_rss_bytes() if peak is None else peak), growth)
    size = max(1, min(limit, int(room // (member_bytes * SAFETY))))
    return [rest[i:i + size] for i in range(0, len(rest), size)]


def _call(emu, kernel, input_sets, sets, target, trace_member, first):
    """One nki_emu.run_batched call on ``sets``; classifies its failure."""
    try:
        return emu.run_batched(kernel, [input_sets[i] for i in sets], target=target, trace_member=trace_member)
    except emu.NotBatchable as exc:
        raise Fallback(f"not batchable: {exc}") from exc
    except MemoryError as exc:
        raise Fallback("a batch ran out of memory") from exc
    except (emu.NKICompileError, emu.UnwrittenOutputError) as exc:
        if first and getattr(exc, "uniform", False):
            raise UniformFailure(exc) from exc
        raise Fallback(f"{type(exc).__name__} that may differ between input sets") from exc
    except Exception as exc:  # noqa: BLE001 - attributed by the one-by-one runs
        raise Fallback(f"{type(exc).__name__} in a batched call") from exc


def _input_bytes(values):
    total = 0
    for value in values:
        if isinstance(value, (tuple, list)):
            total += _input_bytes(value)
        elif hasattr(value, "nbytes"):
            total += int(value.nbytes)
    return total


def run(emu, kernel, input_sets, timed, target, cap_bytes=None, max_batch=None, growth_bytes=BATCH_GROWTH_BYTES):
    """Runs ``kernel`` on every set of ``input_sets`` in batched emulator calls.

    ``emu``: the ``nki_emu`` module; ``input_sets``: list of one or more argument lists
    (arrays read-only is fine: the caller's arrays are never written; one set is one
    traced call, never a second run for the timing); ``timed``: index of
    the set whose run is traced by the cost model (-1: none); ``cap_bytes``:
    resident-memory cap (default :func:`memory_cap_bytes`); ``max_batch``: most sets
    per call (default: no limit); ``growth_bytes``: most resident bytes one call may add
    (BATCH_GROWTH_BYTES). Returns BatchedRuns. Raises UniformFailure
    (the first call failed the same way for every set), Fallback (run the sets one by
    one instead) or BaseException subclasses (a host timeout).
    """
    count = len(input_sets)
    if count < 1:
        raise ValueError("batched_runs.run needs at least one input set")
    cap = memory_cap_bytes() if cap_bytes is None else cap_bytes
    out = BatchedRuns(count, cap)
    order = list(range(count))
    limit = max(1, max_batch or count)
    small = _input_bytes(input_sets) * INPUT_FACTOR <= min(cap - _max_rss_bytes(), growth_bytes)
    if small and limit >= count:
        plan, probe = [order], False
    else:
        first = timed if timed >= 0 else 0
        plan, probe = [[first]], True
    done = []
    while plan:
        sets = plan.pop(0)
        traced = timed in sets
        before = _max_rss_bytes()
        start = time.perf_counter()
        result = _call(emu, kernel, input_sets, sets, target, sets.index(timed) if traced else None, not done)
        out.passes.append({"sets": sets, "traced": traced, "ms": (time.perf_counter() - start) * 1e3})
        out.run_ms += result.timings["run_ms"]
        out.replay_ms += result.timings["replay_ms"]
        if traced:
            out.profile = result.profile
        for position, index in enumerate(sets):
            out.outputs[index], out.arguments[index] = result.outputs[position], result.arguments[position]
        done.extend(sets)
        if probe:
            probe = False
            out.member_bytes = max(MIN_MEMBER_BYTES, (_max_rss_bytes() - before) // len(sets))
            rest = [i for i in order if i not in done]
            plan = _groups_after_probe(rest, out.member_bytes, cap, limit, growth_bytes) if rest else []
    return out

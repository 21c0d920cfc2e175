"""Per-run state of the emulator: loop stack, tracer, output-dependency check.

One :class:`Run` is active while a kernel executes (``current()``); API calls
made outside a run still work (eager NumPy semantics) but are not traced.
"""
import sys

from . import liveness
from .errors import fail
from .runstack import computing, current, pop, push  # noqa: F401 - runtime's public run-stack API


class Loop:
    """One instantiation of an ``affine_range``/``sequential_range``/``static_range`` loop."""

    _next = 0

    def __init__(self, kind):
        Loop._next += 1
        self.uid = Loop._next
        self.kind = kind
        self.iteration = 0
        self.done = False  # set when the loop has exited (scope check, nki-facts §2.4)


class LoopIndex(int):
    """Loop variable: an int that knows its loop and whether it is the first iteration."""



def make_index(value, loop, first):
    idx = LoopIndex(value)
    idx.loop = loop
    idx.first = first
    return idx


class Run:
    """State of one kernel execution.

    ``target``: "trn1"/"trn2"; ``tracer``: cost tracer or None (trace=False);
    ``batch``: number of input sets run at once (docs/nki-emulator.md, "Batched
    execution"); ``trace_member``: the input set whose data-dependent addresses
    (indirect DMA) the cost trace describes. ``data_dependent`` becomes True once
    the members of a batch diverge (an indirect access whose bounds or written
    elements differ between members): an error raised after that may not be
    the same for every member.
    """

    def __init__(self, target="trn1", tracer=None, compute=True, batch=1, trace_member=0):
        self.target = target
        self.tracer = tracer
        self.compute = compute
        self.batch = batch
        self.trace_member = trace_member
        self.data_dependent = False
        self.loops = []
        self.writes = {}
        self.error = None  # the first NKICompileError raised in this run (errors.fail)
        self.psum_groups = set()  # PSUM views a 2.28 nc_matmul(dst=...) has started accumulating into
        self.registers = {}  # engine accumulation registers of the 2.28 reduce_cmd APIs (nki_emu.isa_dst)
        self.allocation = None  # "automatic" or "direct" once the kernel allocated an on-chip tensor
        self.random_calls = 0  # nisa.dropout calls so far (their masks are seeded by this count)

    def check_output_dependency(self, root, layout):
        """err_unexpected_output_dependencies: two iterations of an enclosing
        affine loop (entered after ``root`` was created) write the same region."""
        relevant = self.loops[root.depth:]
        if not any(loop.kind == "affine" for loop in relevant):
            return
        key = (root.uid, layout.offset, layout.shape, layout.strides)
        state = tuple((loop.uid, loop.iteration) for loop in relevant)
        prev = self.writes.get(key)
        self.writes[key] = state
        if prev is None or prev == state:
            return
        for (uid_a, it_a), (uid_b, it_b), loop in zip(prev, state, relevant):
            if uid_a != uid_b:
                return
            if it_a != it_b:
                if loop.kind == "affine":
                    fail("err_unexpected_output_dependencies",
                         f"Unexpected output dependencies, different iterations of {_loop_name(loop)} "
                         f"loop write to `{root.name}`")
                return


def _loop_name(loop):
    frame = sys._getframe(1)
    while frame is not None:
        for name, value in frame.f_locals.items():
            if isinstance(value, LoopIndex) and value.loop is loop:
                return name
        frame = frame.f_back
    return "affine"


def loop_range(kind, args, frame=None):
    """Generator behind the nl.*_range functions; yields LoopIndex values.

    ``frame``: the calling kernel's frame; when the liveness analysis proves
    blocks dead after each iteration of this loop, they are freed then
    (nki_emu.liveness)."""
    rng = range(*[int(a) for a in args])
    run = current()
    loop = Loop(kind)
    releases = None
    if run is not None and frame is not None:
        releases = liveness.plan_for(frame.f_code, frame.f_lineno)
    tracer = run.tracer if run is not None else None
    if run is not None:
        run.loops.append(loop)
    if tracer is not None:
        tracer.loop_event("enter", kind)  # software-pipelining steps (cost.tracer.Tracer.loop_event)
    try:
        first = True
        bound = None
        for value in rng:
            loop.iteration = value
            if tracer is not None:
                tracer.loop_event("iteration", kind)
            if releases and bound is None:
                bound = liveness.bind(frame, releases)
            yield make_index(value, loop, first)
            first = False
            if bound:
                liveness.release(bound, value)
    finally:
        loop.done = True
        if tracer is not None:
            tracer.loop_event("exit", kind)
        if run is not None and run.loops and run.loops[-1] is loop:
            run.loops.pop()

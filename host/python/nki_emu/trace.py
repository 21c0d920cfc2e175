"""Bridge from API calls to the cost tracer of the active run.

Every emulated instruction calls one of these functions after computing its
values; they do nothing when no run is active or the run has trace=False.
The tracer itself lives in ``nki_emu.cost.tracer``.
"""
from . import runstack


def _tracer():
    run = runstack.current()
    return None if run is None else run.tracer


def active():
    """True while a run with cost tracing is executing."""
    return _tracer() is not None


def compute(op, engine, reads, out, n, **info):
    """Records a compute instruction.

    ``op``: ISA name (e.g. "tensor_tensor"); ``engine``: "tensor", "vector",
    "scalar" or "gpsimd"; ``reads``: input tiles; ``out``: the result tile
    (a fresh root, retargeted later by :func:`assigned`) or a destination
    view; ``n``: elements per partition that sets the cost (nki-facts §3.3);
    ``info``: formula inputs (e.g. ``n_stationary``, ``fp32``, ``onezero``).
    Returns the record or None.
    """
    tracer = _tracer()
    if tracer is None:
        return None
    instr = tracer.compute(op, engine, [r for r in reads if r is not None], out, n, info)
    if out is not None and out.is_root and out.producer is None:
        out.producer = instr
    return instr


def dma(op, src, dst, out=None, **info):
    """Records a DMA (``nl.load``/``nl.store``) moving ``src`` to ``dst`` (tiles or views).
    ``info``: ``transpose`` ("hbm"/"sbuf": a DMA transpose from HBM or SBUF), ``dge``
    ("hwdge": hardware descriptor generation) and ``onchip`` (SBUF -> SBUF: no HBM bytes)
    for the cost model (nki-facts §3.1, §3.4)."""
    tracer = _tracer()
    if tracer is None:
        return None
    instr = tracer.dma(op, src, dst, info)
    if out is not None and out.is_root and out.producer is None:
        out.producer = instr
    return instr


def assigned(value, dest):
    """``dest[...] = value``: retargets value's producer to dest, or records a copy."""
    tracer = _tracer()
    if tracer is not None:
        tracer.assigned(value, dest)


def accumulated(dest, value, engine_op):
    """``dest += value``: PSUM accumulation of a matmul, or an element-wise update."""
    tracer = _tracer()
    if tracer is not None:
        tracer.accumulated(dest, value, engine_op)

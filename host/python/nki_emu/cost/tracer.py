"""Instruction trace of one run (nki-facts §3): recording, then target-specific replay.

Recording (:class:`Tracer`) is target independent: API calls report
instructions through ``nki_emu.trace``; the newest one is kept *pending*
until the next event so that an assignment (``dst[...] = r``, ``psum += r``)
can retarget its output to the real destination. On flush it becomes a
compact record tuple (regions, blocks, sizes; see :func:`replay`).

Replay (:func:`replay`) runs SBUF residency (``residency``: hoisting,
re-issue, spills), the list scheduler (``scheduler``) and the cycle formulas
(``formulas``) for one ``targets.Target`` and returns the profile dict
(``metrics``). Records can be replayed with other knob values without
re-running the kernel (bench/calibrate.py does that).

Record kinds:
* ``("C", engine, op, n, info, reads, writes, psum_blocks, sbuf_reads, sbuf_writes, place)``
* ``("L", partitions, nbytes, n_desc, src_key, dst_block, bytes_pp, src_region, dst_region, place)``
* ``("S", partitions, nbytes, n_desc, sbuf_reads, src_region, writes, hbm_scratch)``

Every record carries its software-pipelining tag ``pipe`` = (step, stages) (in
``info`` for "C", in the last element's dict for "L"/"S"; Tracer.pipe_stages).

``engine`` is "tensor"/"vector"/"scalar"/"gpsimd" or "auto" (engine=unknown:
VectorE or ScalarE, chosen at replay by ``Target.auto_engine``).
"""
import bisect
import math

import numpy as np

from . import formulas, metrics, targets
from ..dtypes import name as name_of
from ..layout import gather_flat, gather_inb, gather_signature
from .residency import Residency
from .scheduler import HBM_CHUNK, Rings, Scheduler, dma_engines

ON_CHIP = ("sbuf", "psum")
PIPE_DEPTHS = 6  # pipeline depths 1..6 whose stages every record keeps (Tracer.pipe_stages)
_DT16 = ("bfloat16", "float16")
_DT16_OF = {}  # dtype -> is it BF16/FP16 (cached: checked for every tensor_copy/tensor_scalar/tensor_tensor)


def _is_dt16(dtype):
    known = _DT16_OF.get(dtype)
    if known is None:
        known = _DT16_OF[dtype] = name_of(dtype) in _DT16
    return known


class Instr:
    """One pending traced instruction (compute or DMA); ``reads``/``out`` are None
    once it is recorded (:meth:`Tracer.flush`)."""

    __slots__ = ("op", "engine", "reads", "out", "n", "info")

    def __init__(self, op, engine, reads, out, n, info):
        self.op, self.engine, self.reads, self.out, self.n, self.info = op, engine, reads, out, n, info


def _span(t):
    if t.layout is not None:
        return t.layout.span()
    flat = gather_flat(t.gather)
    return int(flat.min()), int(flat.max())


def _count(t):
    """Elements actually moved: masked-off elements do not count (nki-facts §3.5)."""
    if t.valid is not None:
        return int(np.count_nonzero(np.broadcast_to(t.valid, t.shape)))
    inb = gather_inb(t.gather) if t.gather is not None else None
    if inb is not None:
        return int(np.count_nonzero(inb))
    return t.size


def _descriptors(t, count):
    """Contiguous chunks of an HBM access (one descriptor each, nki-facts §3.4)."""
    if t.layout is None:
        return max(1, count // max(1, t.shape[-1]))
    run = 1
    for n, s in zip(reversed(t.layout.shape), reversed(t.layout.strides)):
        if n == 1:
            continue
        if s != run:
            break
        run *= n
    return max(1, -(-count // run))


def _free(t):
    shape = t.shape
    return math.prod(shape[1:]) if len(shape) > 1 else 1


class Tracer:
    """Records the instructions of one run; ``profile()`` replays them for ``target``."""

    def __init__(self, target="trn1"):
        self.target = targets.get(target)
        self.records = []
        self.pending = None
        self.m = metrics.Counters()
        self._geo = {}  # root uid -> (block elems, bytes per partition, site, kind)
        # software-pipelining steps (``loop_event``; scheduler docstring "Pipelined order")
        self.step = 0
        self._advance = False
        self._loops = []  # kinds of the enclosing nl.*_range loops, innermost last
        # per block key the (step, depth, stages) of its last writer and {(step, stages): depth}
        # of its accesses since; the buffer rings as replay assigns them (pipe_stages)
        self._p_wr, self._p_acc, self._rings = {}, {}, Rings()

    # --- loops (software pipelining, docs/nki-emulator.md "Pipelined order") ---------
    def loop_event(self, event, kind):
        """``event`` "enter"/"iteration"/"exit" of an nl.*_range loop of ``kind``.

        Each record is tagged (step, pipelined). A new iteration of an affine loop
        starts a new step (lazily, at the next compute instruction, so that the
        loads an outer affine body issues before an inner affine loop share the
        step of the work before them); entering or leaving an affine loop nested
        directly in an affine loop changes nothing (the nest is one flat space of
        independent iterations, nki-facts §2.4). Every other loop event (a
        sequential or static loop's iterations, entering or leaving a loop nest)
        drains: the step advances by 2, so nothing before it can be overlapped
        with anything after it. ``pipelined``: the innermost loop is affine."""
        self.flush()
        loops = self._loops
        if event == "enter":
            parent = loops[-1] if loops else None
            loops.append(kind)
            nested = kind == "affine" and parent == "affine"
        elif event == "exit":
            if loops:
                loops.pop()
            parent = loops[-1] if loops else None
            nested = kind == "affine" and parent == "affine"
        else:
            if kind == "affine":
                self._advance = True
                return
            nested = False
        if not nested:
            self.step += 2
            self._advance = False

    def _pipe(self, compute, reads, writes, place=(), psum_blocks=()):
        """The record's tag (step, stages) (``pipe_stages``)."""
        if compute and self._advance:
            self.step += 1
            self._advance = False
        return (self.step, self.pipe_stages(bool(self._loops) and self._loops[-1] == "affine",
                                            reads, writes, place, psum_blocks))

    def pipe_stages(self, pipelined, reads, writes, place, psum_blocks=()):
        """Stages of the record for ``Target.pipeline_depth`` 1..PIPE_DEPTHS (a tuple).

        The record is in stage 1 (overlapped with the next step's stage 0, scheduler
        docstring "Pipelined order") when its innermost loop is affine and its dependency
        depth within its step reaches the pipeline depth. Dependencies: the writers of
        what it reads or writes, the accesses since the last write of what it writes
        (write-after-read), and the accesses of the tile whose buffer a new tile reuses (the
        tile ``Target.buffers`` allocations earlier at the same site). A record that depends
        on a stage-1 record of its own or the previous step is in stage 1 too, so that it is
        handed over after it: only independent work moves. Computed here, once, from the
        recorded structure (steps, regions, sites) and kept in the record: the order never
        depends on a duration nor on another record's replay, so deleting or shrinking a
        record leaves every other record's place unchanged and the estimate monotone."""
        step = self.step
        wr, acc = self._p_wr, self._p_acc
        deps = []
        read_blocks = [(uid, b) for uid, b0, b1, _, _ in reads for b in range(b0, b1 + 1)]
        write_blocks = [(uid, b) for uid, b0, b1, _, _ in writes for b in range(b0, b1 + 1)]
        for blk in read_blocks:
            w = wr.get(blk)
            if w is not None:
                deps.append(w)
        t = self.target
        reused = self._rings.place([(k, site, t.buffers(kind, bpp)) for k, site, kind, bpp in place]
                                   + [(k, ("psum",), t.psum_banks) for k in psum_blocks])
        for blk in write_blocks + reused:
            w = wr.get(blk)
            if w is not None:
                deps.append(w)
            a = acc.get(blk)
            if a:
                deps.extend((s, d, st) for (s, st), d in a.items())
        depth = 0
        forced = [False] * PIPE_DEPTHS
        for s, d, st in deps:
            if s == step and d + 1 > depth:
                depth = d + 1
            if s >= step - 1:
                forced = [f or x == 1 for f, x in zip(forced, st)]
        stages = tuple(1 if forced[k] or (pipelined and depth >= k + 1) else 0 for k in range(PIPE_DEPTHS))
        tag = (step, depth, stages)
        for blk in write_blocks:
            wr[blk] = tag
            acc[blk] = {(step, stages): depth}
        for blk in read_blocks:
            a = acc.get(blk)
            if a is None:
                acc[blk] = {(step, stages): depth}
                continue
            for k in [k for k in a if k[0] < step - 1]:
                del a[k]
            if a.get((step, stages), -1) < depth:
                a[(step, stages)] = depth
        return stages

    # --- geometry -------------------------------------------------------------------
    def _root_geo(self, root):
        g = self._geo.get(root.uid)
        if g is None:
            shape = root.layout.shape
            if root.buffer in ON_CHIP:
                be = math.prod(shape[root.par_axis:]) or 1
                bpp = math.prod(shape[root.par_axis + 1:]) * root.itemsize
            else:
                be, bpp = HBM_CHUNK, 0
            site = getattr(root, "site", None)
            if root.par_axis > 0:
                site, kind = ("blocks", root.uid), "affine"
            elif site is None:
                site, kind = ("root", root.uid), "affine"
            else:
                site, kind = site[:2], site[2]
            g = self._geo[root.uid] = (be, bpp, site, kind)
        return g

    def _region(self, t):
        lo, hi = _span(t)
        be = self._root_geo(t.root)[0]
        return (t.root.uid, lo // be, hi // be, lo, hi)

    def _tiles(self, t):
        """[(tile key, nbytes read/written)] of an SBUF view."""
        uid, b0, b1, _, _ = self._region(t)
        return [(uid, b) for b in range(b0, b1 + 1)]

    def _place(self, t):
        """Ring placement entries [(tile key, site, kind, bytes_pp)] for writes to SBUF tile ``t``."""
        if t.buffer != "sbuf":
            return ()
        _, bpp, site, kind = self._root_geo(t.root)
        return [(key, site, kind, bpp) for key in self._tiles(t)]

    # --- events from nki_emu.trace --------------------------------------------------
    def compute(self, op, engine, reads, out, n, info):
        self.flush()
        self.pending = Instr(op, engine, reads, out, n, info)
        return self.pending

    def dma(self, op, src, dst, info=None):
        self.flush()
        self.pending = Instr(op, "dma", [src], dst, 0, info or {})
        if op == "store":
            self.flush()
        return self.pending

    def assigned(self, value, dest):
        p = self.pending
        if p is not None and value.producer is p and value.is_root and not value.placed:
            p.out = dest
            value.placed = True
            self.flush()
            return
        self.flush()
        if dest.buffer not in ON_CHIP:
            self.pending = Instr("store", "dma", [value], dest, 0, {})
        else:
            engine = "scalar" if value.buffer == "psum" else "vector"
            self.pending = Instr("tensor_copy", engine, [value], dest, _free(dest), {})
        self.flush()

    def accumulated(self, dest, value, is_matmul):
        p = self.pending
        if is_matmul and value is not None and value.producer is p and p is not None:
            p.out = dest
            p.info["accumulate"] = True
            value.placed = True
            self.flush()
            return
        self.flush()
        reads = [dest] + ([value] if value is not None else [])
        in_psum = any(r.buffer == "psum" for r in reads)
        self.pending = Instr("tensor_tensor", "vector", reads, dest, _free(dest), {"in_psum": in_psum})
        self.flush()

    # --- recording ------------------------------------------------------------------
    def flush(self):
        """Records the pending instruction, then drops its tensors (``reads``/``out``):
        a result tile's ``producer`` is its Instr, whose ``out`` is the tile, a
        reference cycle that kept every traced tile resident until the cyclic garbage
        collector ran (mamba: +0.5 GB per input set, docs/benchmarks/candidate-memory.txt).
        Only ``op``/``info`` are read after the flush (nki_emu.assign)."""
        p, self.pending = self.pending, None
        if p is None:
            return
        try:
            if p.engine == "dma":
                self._record_dma(p)
            else:
                self._record_compute(p)
        finally:
            p.reads = p.out = None

    def _sbuf_reads(self, tiles):
        out = []
        for t in tiles:
            if t.buffer == "sbuf":
                nbytes = t.size * t.itemsize
                out.extend((key, nbytes, t.shape[0]) for key in self._tiles(t))
        return out

    def _record_compute(self, p):
        # each tile's region is computed once; the lists below are derived from it
        m, out, region = self.m, p.out, self._region
        read_regions = [region(r) for r in p.reads]
        out_region = region(out) if out is not None else None
        reads = read_regions + [out_region] if (out is not None and p.info.get("accumulate")) else read_regions
        writes = [out_region] if out is not None else []
        psum_blocks, sbuf_reads, any_sbuf = [], [], False
        add_access = m.add_access
        for r, (uid, b0, b1, _, _) in zip(p.reads, read_regions):
            nbytes = r.size * r.itemsize
            add_access(r.buffer, "read", nbytes)
            if r.buffer == "psum":
                psum_blocks.extend((uid, b) for b in range(b0, b1 + 1))
            elif r.buffer == "sbuf":
                any_sbuf = True
                parts = r.shape[0]
                sbuf_reads.extend(((uid, b), nbytes, parts) for b in range(b0, b1 + 1))
        sbuf_writes = place = ()
        if out is not None:
            uid, b0, b1, _, _ = out_region
            add_access(out.buffer, "write", out.size * out.itemsize)
            if out.buffer == "psum":
                psum_blocks.extend((uid, b) for b in range(b0, b1 + 1))
            elif out.buffer == "sbuf":
                any_sbuf = True
                _, bpp, site, kind = self._root_geo(out.root)
                keys = [(uid, b) for b in range(b0, b1 + 1)]
                sbuf_writes = [(key, bpp) for key in keys]
                place = [(key, site, kind, bpp) for key in keys]
        info = {k: v for k, v in p.info.items() if k in formulas.INFO_KEYS}
        info["sbuf"] = any_sbuf
        info["pipe"] = self._pipe(True, reads, writes, place, psum_blocks)
        if p.op in formulas.PERF_MODE_OPS:
            tiles = list(p.reads) + ([out] if out is not None else [])
            if tiles and all(_is_dt16(t.dtype) for t in tiles):
                # trn2 VectorE performance mode [D nki-facts §3.3]; only set when true, so fp32
                # records (all of NKIBench) are unchanged
                info["dt16"] = "sbuf" if all(t.buffer == "sbuf" for t in tiles) else "psum"
        self.records.append(("C", p.engine, p.op, p.n, info, reads, writes, psum_blocks,
                             sbuf_reads, sbuf_writes, place))
        m.instructions += 1
        flops = p.info.get("flops", 0)
        if p.engine == "tensor" and flops:
            scale = 2 if p.info.get("fp32", True) else 1  # profiler counts fp32 twice [M nki-facts §3.8]
            m.flops += flops * scale
            if p.info.get("transpose"):
                m.transpose_flops += flops * scale

    def _record_dma(self, p):
        src, dst = p.reads[0], p.out
        if src.buffer == "psum":
            # PSUM -> HBM is lowered to a PSUM->SBUF copy plus a DMA [I nki-facts §3.4]
            self.pending = Instr("tensor_copy", "scalar", [src], src, _free(src), {})
            self.flush()
        count = _count(dst if p.op == "load" else src)
        inb = gather_inb(dst.gather) if (p.op == "store" and dst.gather is not None) else None
        if inb is not None:
            count = min(count, int(np.count_nonzero(inb)))
        nbytes = count * dst.itemsize
        hbm = src if p.op == "load" else dst
        n_desc = _descriptors(hbm, count)
        partitions = (dst if p.op == "load" else src).shape[0]
        if p.op == "load":
            key = (src.root.uid, src.root.version) + ((src.layout.offset, src.layout.shape, src.layout.strides)
                                                       if src.layout is not None else (gather_signature(src.gather),))
            block = bpp = None
            if dst.buffer == "sbuf" and not p.info.get("onchip"):  # an on-chip copy is never hoisted
                block = self._tiles(dst)[0]
                bpp = self._root_geo(dst.root)[1]
            src_region, dst_region, place = self._region(src), self._region(dst), self._place(dst)
            self.records.append(("L", partitions, nbytes, n_desc, key, block, bpp, src_region, dst_region, place)
                                + _dma_extra(p.info, self._pipe(False, [src_region], [dst_region], place)))
            self.m.add_access("sbuf", "write", nbytes)
        else:
            # outputs (shared_hbm) are not read back by NKIBench kernels: skip their
            # writer bookkeeping; private/`nl.hbm` scratch (spills) is tracked.
            writes = [] if dst.buffer == "shared_hbm" else [self._region(dst)]
            src_region = self._region(src)
            self.records.append(("S", partitions, nbytes, n_desc, self._sbuf_reads([src]),
                                 src_region, writes, dst.buffer != "shared_hbm")
                                + _dma_extra(p.info, self._pipe(False, [src_region], writes)))
            self.m.add_access("sbuf", "read", nbytes)

    def finish(self):
        """Flushes the pending instruction; returns (records, counters)."""
        self.flush()
        return self.records, self.m

    def profile(self, target=None):
        """Finishes the trace and returns the profile dict for ``target`` (default: the run's)."""
        records, counters = self.finish()
        return replay(records, counters, target or self.target)


class _Replay:
    """One replay of a trace: a planning pass, then a timing pass.

    Planning (program order, no times): SBUF residency (hoisted loads, re-issues,
    spills, with a live block's save at its eviction), the physical buffer each new
    tile takes and the PSUM bank of each accumulation group (``scheduler.Rings``),
    the DMA engines of narrow transfers (round-robin) and the engine of engine=unknown
    instructions. Timing hands the resulting jobs to the scheduler in the pipelined
    order (scheduler docstring; program order with ``Target.pipeline_depth`` 0):
    every resource (each compute engine, each DMA engine's load queue and store
    queue) serves its work in that fixed order, and no choice depends on a duration,
    which makes the estimate monotone.
    """

    def __init__(self, target, counters):
        self.t = target
        self.sched = Scheduler(target)
        self.res = Residency(target.sbuf_capacity, target.hoist_share)
        self.rings = Rings()
        self.m = counters
        self.hbm_read = self.hbm_write = self.spill_save = self.spill_reload = 0
        self.dma_count = self.hoisted = 0
        self.load_end = {}
        self.jobs = []
        self.rr = {"load": 0, "store": 0}
        self.alias = {}  # tile key of a hoisted load -> the tile (physical buffer) holding its data
        self.src_tile = {}  # HBM source key -> tile its last real load wrote
        self.keys = []  # per job its place in the pipelined order (_add)
        self.wkey = {}  # block -> place of the job that last wrote it
        self.pipe = (0, 0)

    # --- planning -------------------------------------------------------------------
    def place(self, entries):
        if not entries:
            return ()
        t = self.t
        return self.rings.place([(key, site, t.buffers(kind, bpp)) for key, site, kind, bpp in entries])

    def _add(self, job, reads=(), writes=(), waits=(), uses=()):
        """Appends ``job``; the timing pass hands the jobs over sorted by (step + stage,
        stage, index), ``self.pipe`` being the (step, stage) of the record being planned
        (``Tracer.pipe_stages``; the program order when ``Target.pipeline_depth`` is 0)."""
        step, stage = self.pipe
        if stage == 0 and self.wkey:
            # a writer that replay put later than its tags say (a record moved to stage 1 for
            # a spill save, below) moves its readers with it
            wkey = self.wkey
            for uid, b0, b1, _, _ in list(reads) + list(writes):
                if any(wkey.get((uid, b), (0, 0))[:2] > (step, 0) for b in range(b0, b1 + 1)):
                    stage = 1
                    self.pipe = (step, 1)
                    break
        key = (step + stage, stage, len(self.jobs))
        self.keys.append(key)
        self.jobs.append(job)
        for uid, b0, b1, _, _ in writes:
            for b in range(b0, b1 + 1):
                self.wkey[(uid, b)] = key

    def _first(self, direction, partitions):
        n_q = dma_engines(self.t, partitions)
        if n_q >= self.t.dma_queues:
            return 0
        first = self.rr[direction]
        self.rr[direction] = (first + n_q) % self.t.dma_queues
        return first

    def _dma_job(self, direction, partitions, nbytes, n_desc, reads, writes, waits, uses, extra=None,
                 load_key=None):
        efficiency, delay = self.dma_modes(extra)
        hbm = not (extra and extra.get("onchip"))
        job = ("D", direction, partitions, nbytes, n_desc, reads, writes, waits, uses, efficiency, delay,
               self._first(direction, partitions), hbm, load_key)
        self._add(job, reads, writes, waits, uses)
        self.dma_count += 1

    def reloads(self, sbuf_reads):
        for key, nbytes, partitions in sbuf_reads:
            act = self.res.read(key, nbytes)
            if act is None:
                continue
            kind, save, reload = act
            region = (key[0], key[1], key[1], 0, 1 << 62)
            if save:  # the save is costed here, at the read (residency emits it lazily)
                self.spill_save += save
                self.hbm_write += save
                self._dma_job("store", partitions, save, partitions, [region], [], (), ())
            if kind == "spill":
                self.spill_reload += reload
            self.hbm_read += reload
            self._dma_job("load", partitions, reload, partitions, [], [region], (), ())

    def spill_saves(self):
        """Save jobs for the computed blocks the last residency calls evicted that a later
        instruction still reads (their data must reach HBM before the buffer is reused);
        returns the tile keys the evicting instruction waits for (nki-facts §3.4)."""
        evicted, self.res.evicted = self.res.evicted, []
        waits = []
        for old in evicted:
            key = old.block
            if old.kind != "compute" or old.saved or key is None or self.next_read(key) is None:
                continue
            old.saved = True
            w = self.wkey.get(key)
            step, stage = self.pipe
            if w is not None and (w[0], w[1]) > (step + stage, stage):
                # the save (and the instruction that waits for it) is handed over after the
                # block's writer: a stage-1 writer puts this record in stage 1
                self.pipe = (step, 1)
            save = old.bytes_pp * 128
            self.spill_save += save
            self.hbm_write += save
            token = ("spill save", key)
            self._dma_job("store", 128, save, 128, [(key[0], key[1], key[1], 0, 1 << 62)], [], (), [token])
            waits.append(token)
        return waits

    def next_read(self, key):
        """Index of the next record after the current one that accesses block ``key`` if
        that access reads it (its data is live), else None (dead, or overwritten first)."""
        acc = self.reads_of.get(key)
        if not acc:
            return None
        i = bisect.bisect_right(acc, (self.current, 2))
        return acc[i][0] if i < len(acc) and acc[i][1] else None

    def plan_compute(self, rec):
        _, engine, op, n, info, reads, writes, psum_blocks, sbuf_reads, sbuf_writes, place = rec
        if sbuf_reads:
            self.reloads(sbuf_reads)
        for key, bpp in sbuf_writes:
            self.res.write(key, bpp)
        saves = self.spill_saves() if self.t.spill_at_eviction else []
        alias = self.alias
        uses = [alias.get(k, k) for k, _, _ in sbuf_reads] + [alias.get(k, k) for k, _ in sbuf_writes]
        waits = list(self.place(place)) + saves
        if psum_blocks:  # PSUM banks: a ring of Target.psum_banks, in program order
            banks = self.t.psum_banks
            waits += self.rings.place([(key, ("psum",), banks) for key in psum_blocks])
            uses = uses + list(psum_blocks)
        self._add(("C", rec, waits, uses), reads, writes, waits, uses)
        if engine == "tensor" and not psum_blocks and writes:
            # TensorE writes only PSUM [D nki-facts §2.6]: a matmul recorded into SBUF (a
            # partition broadcast) is evicted from PSUM by a copy
            copy = ("C", "auto", "tensor_copy", n, {"sbuf": True}, writes, writes, [], [], [], ())
            self._add(("C", copy, (), uses, True), writes, writes, (), uses)

    def plan_load(self, rec):
        _, partitions, nbytes, n_desc, key, block, bpp, src_region, dst_region, place = rec[:10]
        extra = rec[10] if len(rec) > 10 else None
        if block is not None and self.res.load(key, block, bpp, nbytes):
            # the data is still in the buffer of the tile its last load wrote: readers of
            # this tile access that buffer
            held = self.src_tile.get(key)
            if held is not None and held != block:
                self.alias[block] = self.alias.get(held, held)
            self._add(("H", dst_region, key), (), [dst_region])
            self.hoisted += 1
            return
        if block is not None:
            self.src_tile[key] = block
            self.alias.pop(block, None)
        saves = self.spill_saves() if self.t.spill_at_eviction else []
        self._dma_job("load", partitions, nbytes, n_desc, [src_region], [dst_region],
                      list(self.place(place)) + saves, [k for k, _, _, _ in place], extra, load_key=key)
        if not (extra and extra.get("onchip")):
            self.hbm_read += nbytes

    def plan_store(self, rec):
        _, partitions, nbytes, n_desc, sbuf_reads, src_region, writes, scratch = rec[:8]
        if sbuf_reads:
            self.reloads(sbuf_reads)
        self._dma_job("store", partitions, nbytes, n_desc, [src_region], writes, (),
                      [self.alias.get(k, k) for k, _, _ in sbuf_reads], rec[8] if len(rec) > 8 else None)
        self.hbm_write += nbytes

    def dma_modes(self, extra):
        """(bandwidth efficiency, start delay ns) of a DMA record's transpose/DGE flags on this
        target (nki-facts §3.1: DMA transpose up to 90 % of DMA throughput from HBM, 50 % SBUF
        to SBUF; hardware DGE ~600 ns per DMA instruction)."""
        if not extra:
            return 1.0, 0.0
        t = self.t
        efficiency = {"hbm": t.dma_transpose_efficiency_hbm, "sbuf": t.dma_transpose_efficiency_sbuf}.get(
            extra.get("transpose"), 1.0)
        return efficiency, t.hwdge_ns if extra.get("dge") == "hwdge" else 0.0

    # --- timing ---------------------------------------------------------------------
    def auto_engine(self):
        """Engine for an engine=unknown instruction (Target.auto_engine; nki-facts §3.5: the
        measured profiles put them on ScalarE). A fixed rule: choosing by which engine is free
        first would make the estimate non-monotone."""
        return self.t.auto_engine

    def time_compute(self, job):
        _, rec, waits, uses = job[:4]
        _, engine, op, n, info, reads, writes, psum_blocks, _, _, _ = rec
        from_psum = len(job) > 4
        t = self.t
        if engine == "auto":
            engine = self.auto_engine()
        cyc = formulas.cycles(op, n, info, engine, t) + t.instr_overhead_cycles
        if engine == "scalar":
            cyc += t.act_overhead_cycles
        self.sched.compute(engine, cyc / t.clock_ghz[engine], reads, writes, psum_blocks,
                           bool(psum_blocks) or from_psum, info.get("sbuf", False), waits, uses)

    def time_dma(self, job):
        (_, direction, partitions, nbytes, n_desc, reads, writes, waits, uses, efficiency, delay, first, hbm,
         load_key) = job
        _, end = self.sched.dma(partitions, nbytes, n_desc, reads, writes, direction, waits, uses, efficiency,
                                delay, first, hbm)
        if load_key is not None:
            self.load_end[load_key] = end

    def run(self, records):
        if self.t.static_hoist_share > 0:
            self.res.hoisted_groups = plan_static_hoisting(records, self.t)
        dying, last_load = _last_uses(records) if self.t.release_dead_blocks else ({}, {})
        release = self.res.release
        self.reads_of = _reads_of(records) if self.t.spill_at_eviction else {}
        self.res.evicted = [] if self.t.spill_at_eviction else None
        for i, rec in enumerate(records):
            self.current = i
            kind = rec[0]
            self.pipe = _pipe_tag(rec, self.pipe[0], self.t.pipeline_depth)
            if kind == "C":
                self.plan_compute(rec)
            elif kind == "L":
                self.plan_load(rec)
            else:
                self.plan_store(rec)
            if i in dying:
                live = lambda src, i=i: last_load.get(src, -1) > i  # noqa: E731
                for block in dying[i]:
                    release(block, live)
        s = self.sched
        jobs = self.jobs
        if self.t.pipeline_depth > 0:
            jobs = [jobs[k[2]] for k in sorted(self.keys)]
        for job in jobs:
            kind = job[0]
            if kind == "C":
                self.time_compute(job)
            elif kind == "D":
                self.time_dma(job)
            else:
                s.wrote([job[1]], self.load_end.get(job[2], 0.0), "dma")
        return self


def _pipe_tag(rec, step, depth):
    """(step, stage) of a record for ``Target.pipeline_depth`` ``depth`` (Tracer.pipe_stages);
    stage 0 with ``depth`` 0 (program order) and for a record without a tag (a trace
    recorded before tags existed: it keeps the previous step)."""
    kind = rec[0]
    if kind == "C":
        tag = rec[4].get("pipe")
    else:
        n = 10 if kind == "L" else 8
        tag = rec[n].get("pipe") if len(rec) > n else None
    if tag is None:
        return (step, 0)
    stages, depth = tag[1], int(depth)
    return (tag[0], stages[min(depth, len(stages)) - 1] if depth > 0 else 0)


def _dma_extra(info, pipe=None):
    """The optional last element of a DMA record: its transpose/DGE flags and its
    software-pipelining tag ``pipe`` (step, pipelined), only when set."""
    extra = {k: info[k] for k in ("transpose", "dge", "onchip") if info.get(k)}
    if pipe is not None:
        extra["pipe"] = pipe
    return (extra,) if extra else ()


def _reads_of(records):
    """{SBUF block: [(index, 1 for a read / 0 for a write) of the records that access it]}."""
    out = {}
    for i, rec in enumerate(records):
        kind = rec[0]
        reads = rec[8] if kind == "C" else rec[4] if kind == "S" else ()
        for key, _, _ in reads:
            out.setdefault(key, []).append((i, 1))
        if kind == "C":
            for key, _ in rec[9]:
                out.setdefault(key, []).append((i, 0))
        elif kind == "L" and rec[5] is not None:
            out.setdefault(rec[5], []).append((i, 0))
    return out


def _last_uses(records):
    """({record index: [SBUF blocks accessed for the last time there]}, {HBM source key:
    index of its last load}) of a trace."""
    last_block, last_load = {}, {}
    for i, rec in enumerate(records):
        kind = rec[0]
        if kind == "C":
            for key, _, _ in rec[8]:
                last_block[key] = i
            for key, _ in rec[9]:
                last_block[key] = i
        elif kind == "L":
            last_load[rec[4]] = i
            if rec[5] is not None:
                last_block[rec[5]] = i
        else:
            for key, _, _ in rec[4]:
                last_block[key] = i
    dying = {}
    for key, i in last_block.items():
        dying.setdefault(i, []).append(key)
    return dying, last_load


def _traffic(records, target, hoisted):
    """HBM bytes (loads, re-issues, spill saves and reloads) of ``records`` under
    residency alone (no scheduling) with ``hoisted`` ({(uid, version): bytes per
    partition}) pinned."""
    res = Residency(target.sbuf_capacity, target.hoist_share)
    res.hoisted_groups = dict(hoisted)  # consumed as blocks are pinned
    total = 0
    for rec in records:
        kind = rec[0]
        reads = rec[8] if kind == "C" else rec[4] if kind == "S" else ()
        for key, nbytes, _ in reads:
            act = res.read(key, nbytes)
            if act is not None:
                total += act[1] + act[2]
        if kind == "C":
            for key, bpp in rec[9]:
                res.write(key, bpp)
        elif kind == "L":
            if rec[5] is None or not res.load(rec[4], rec[5], rec[6], rec[2]):
                total += rec[2]
    return total


def plan_static_hoisting(records, target):
    """The HBM tensors the compiler would hoist (residency.py) and how much of each:
    {(uid, version): bytes per partition to pin}.

    Candidates are the tensors loaded more than once whose whole footprint fits in
    SBUF, in order of first load; each gets what is left of
    ``target.static_hoist_share`` of SBUF, up to its footprint (the rest of a
    tensor larger than that is re-issued like any other load: nki-facts §5.2's partial
    reloads of matmul_add_rmsnorm), and is kept only if pinning lowers the
    kernel's total HBM traffic (no spills or re-issues bought by the SBUF it takes).
    """
    loads = [(r[4], r[6]) for r in records if r[0] == "L" and r[5] is not None]
    probe = Residency(target.sbuf_capacity, target.hoist_share)
    candidates = probe.hoisting_candidates(loads, 1.0)
    hoisted = {}
    if not candidates:
        return hoisted
    best = _traffic(records, target, hoisted)
    budget = probe.capacity * target.static_hoist_share
    for group, footprint in candidates:
        pin = min(footprint, budget)
        if pin <= 0:
            break
        trial = _traffic(records, target, {**hoisted, group: pin})
        if trial < best:
            best, budget = trial, budget - pin
            hoisted[group] = pin
    return hoisted


def replay(records, counters, target):
    """Schedules ``records`` (from :meth:`Tracer.finish`) on ``target`` (a targets.Target
    or its name); returns the profile dict of ``metrics.profile``."""
    if isinstance(target, str):
        target = targets.get(target)
    state = _Replay(target, counters).run(records)
    return metrics.profile(target, state)

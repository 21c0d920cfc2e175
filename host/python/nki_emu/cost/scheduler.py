"""List scheduler for recorded instructions (nki-facts §3.4, §3.6; docs/nki-emulator.md "Cost model").

Every resource serves its work in one fixed order, decided before any time is
computed, and an instruction starts at the latest of the times it waits for.
Every start and end is then a maximum of sums of durations (a max-plus
system), so removing an instruction or shortening one never delays another:
the estimate is monotone (tests/python/emulator/test_cost_monotone.py).

* one in-order queue per compute engine (tensor, vector, scalar, gpsimd), in
  the pipelined order (below);
* 16 DMA engines (nki-facts §3.4); a transfer over P partitions uses ceil(P/8)
  of them. Each engine is a FIFO: it serves the transfers in the issue order
  that ``tracer`` computes (a load is issued once its destination buffer is free
  in program order, a store where it is written), loads and stores sharing the
  engine's bandwidth. Per engine a transfer takes ``dma_fixed_ns`` + descriptors
  x ``dma_desc_ns`` + bytes / rate and completes ``dma_latency_ns`` later;
* data dependencies (read-after-write, write-after-write) on memory regions,
  plus ``Target.sync_ns`` per cross-engine edge (semaphore);
* write-after-read through physical buffer reuse (``Rings``): every SBUF
  allocation site owns a ring of ``Target.buffers(kind, bytes)`` buffers; a new
  logical tile takes the next one and waits until the previous occupant's last
  access finished (nki-facts §3.6 "N buffers per declared tile");
* trn1 shared ports: VectorE and GpSimd exclusive on SBUF, VectorE and ScalarE
  exclusive on PSUM [D S3 arch], taken in program order;
* 8 PSUM banks, a ring like an SBUF site's, assigned in program order to accumulation
  groups: a new group waits until the bank's previous group was read out (nki-facts §3.6).

Pipelined order (``Target.pipeline_depth``; tracer.Tracer.pipe_stages): the
jobs are handed over, and every queue serves them, sorted by (step + stage,
stage, program index). A step is one iteration of an ``nl.affine_range`` loop
(a nest of affine loops is one flat sequence of iterations); an instruction of
an affine body whose dependency depth within its iteration reaches
``pipeline_depth`` is in stage 1 and is handed over after the next iteration's
stage-0 instructions, as a software-pipelined loop with a one-iteration offset
would issue them. Affine iterations carry no dependency (nki-facts §2.4), the
compiler applies loop-level optimizations to them (§5.2) and reorders
instructions within an engine (§3.6); sequential and static loops, and
everything outside loops, drain the pipeline and keep program order. A job that
depends on a stage-1 job of its own or the previous step is in stage 1 too, so
the order is a topological order of the dependencies. The stages are computed
when the trace is recorded, from its structure alone, never from a duration:
the order stays fixed before any time is computed and the estimate monotone.

Regions are tuples ``(root uid, first block, last block, lo, hi)``: element
spans inside the root, blocks being the block dimensions of on-chip tensors
and ``HBM_CHUNK``-element chunks of HBM tensors. Times are ns.
"""
HBM_CHUNK = 1 << 20


def dma_engines(target, partitions):
    """DMA engines a transfer over ``partitions`` partitions uses: ceil(P/8), at most 16
    (nki-facts §3.4)."""
    return max(1, min(target.dma_queues, -(-max(partitions, 1) // target.dma_partitions_per_queue)))


def dma_rate(target, hbm=True):
    """Bytes per ns one DMA engine moves for loads and stores together when all 16 stream:
    the engine's rate, capped by the core's HBM share spread over the engines for transfers
    that touch HBM (nki-facts §3.1, §3.4)."""
    rate = target.dma_bytes_per_ns
    if hbm and target.hbm_bytes_per_ns:
        rate = min(rate, target.hbm_bytes_per_ns / target.dma_queues)
    return rate


def dma_occupancy(target, partitions, nbytes, n_desc, efficiency=1.0, hbm=True):
    """(engines used, ns each is busy in its direction's queue, ns of the engine's shared
    bandwidth) for one transfer (nki-facts §3.4).

    Queue: ``dma_fixed_ns`` + descriptors x ``dma_desc_ns`` + bytes at the per-queue rate
    ``dma_queue_bytes_per_ns`` (with 4 KiB rows the documented 17 B/ns per engine).
    Shared (loads and stores together): the same per-transfer and per-descriptor costs
    (the engine does that work whichever queue the transfer is in) + bytes at ``dma_rate``. A
    descriptor is one contiguous chunk; every partition row is at least one (a partition
    is its own SBUF address range), so ``n_desc`` is raised to ``partitions``.
    """
    n_q = dma_engines(target, partitions)
    n_desc = max(n_desc, partitions, 1)
    per_engine = nbytes / n_q
    overhead = target.dma_fixed_ns + (n_desc / n_q) * target.dma_desc_ns
    queue = overhead + per_engine / (target.dma_queue_bytes_per_ns * efficiency)
    return n_q, queue, overhead + per_engine / (dma_rate(target, hbm) * efficiency)


class Rings:
    """Physical buffer rings of the SBUF allocation sites, assigned in program order.

    ``place(tiles)`` takes [(tile key, site, n buffers)] of an instruction's first
    writes and returns the tile keys whose buffers they reuse (the previous occupants,
    whose last access the instruction must wait for)."""

    def __init__(self):
        self.rings = {}  # site -> [next slot, [occupant tile key per slot]]
        self.placed = set()  # tile keys that own a physical buffer

    def place(self, tiles):
        prev = []
        for key, site, n_buf in tiles:
            if key in self.placed:
                continue
            self.placed.add(key)
            ring = self.rings.get(site)
            if ring is None:
                ring = self.rings[site] = [0, [None] * max(1, n_buf)]
            slot = ring[0] % len(ring[1])
            ring[0] += 1
            old = ring[1][slot]
            ring[1][slot] = key
            if old is not None:
                self.placed.discard(old)
                prev.append(old)
        return prev


class Scheduler:
    """Schedules instructions handed over in a fixed order; times in ns. ``busy`` holds
    per-engine busy ns (``dma``: total engine time / engines)."""

    def __init__(self, target):
        self.t = target
        self.free = {"tensor": 0.0, "vector": 0.0, "scalar": 0.0, "gpsimd": 0.0}
        self.busy = {"tensor": 0.0, "vector": 0.0, "scalar": 0.0, "gpsimd": 0.0, "dma": 0.0}
        self.ports = {"sbuf": 0.0, "psum": 0.0}
        # per DMA engine: a FIFO queue per direction and the engine's bandwidth shared by both
        # (the time each was last booked until)
        self.lanes = {"load": [0.0] * target.dma_queues, "store": [0.0] * target.dma_queues}
        self.dma_floor = 0.0  # total shared-bandwidth ns of all transfers / engines
        self.writers = {}  # (uid, block) -> list of [lo, hi, end, engine]
        self.last_use = {}  # tile key -> end of its latest access by a compute engine
        self.last_dma_use = {}  # ... by a DMA
        self.end = 0.0

    # --- dependencies ---------------------------------------------------------------
    def ready(self, regions, engine, split=False):
        """Earliest time all writers of ``regions`` finished (+ sync when cross-engine).

        With ``split``: (latest end of a DMA writer, latest end of a compute-engine writer),
        without the sync (a DMA that waits for an engine pays ``dma_start_ns`` instead)."""
        t = t_dma = t_eng = 0.0
        sync = self.t.sync_ns
        writers = self.writers
        for uid, b0, b1, lo, hi in regions:
            for b in range(b0, b1 + 1):
                lst = writers.get((uid, b))
                if not lst:
                    continue
                for w_lo, w_hi, w_end, w_eng in lst:
                    if w_lo <= hi and lo <= w_hi:
                        if split:
                            if w_eng == "dma":
                                t_dma = w_end if w_end > t_dma else t_dma
                            elif w_end > t_eng:
                                t_eng = w_end
                            continue
                        e = w_end + (sync if w_eng != engine else 0.0)
                        if e > t:
                            t = e
        return (t_dma, t_eng) if split else t

    def wrote(self, regions, end, engine):
        for uid, b0, b1, lo, hi in regions:
            for b in range(b0, b1 + 1):
                lst = self.writers.get((uid, b))
                if lst is None:
                    self.writers[(uid, b)] = [[lo, hi, end, engine]]
                    continue
                lst[:] = [w for w in lst if not (lo <= w[0] and w[1] <= hi)]
                lst.append([lo, hi, end, engine])

    # --- physical buffers (write-after-read) ----------------------------------------
    def freed(self, previous, split=False):
        """Earliest start of an instruction that reuses the buffers of ``previous`` tiles
        (their last access must have finished); with ``split`` (last DMA access, last
        compute-engine access)."""
        t_dma = t_eng = 0.0
        lu, by_dma = self.last_use, self.last_dma_use
        for key in previous:
            e = lu.get(key, 0.0)
            if e > t_eng:
                t_eng = e
            d = by_dma.get(key, 0.0)
            if d > t_dma:
                t_dma = d
        return (t_dma, t_eng) if split else max(t_dma, t_eng)

    def used(self, keys, end, dma=False):
        lu = self.last_dma_use if dma else self.last_use
        for k in keys:
            if lu.get(k, 0.0) < end:
                lu[k] = end

    # --- instructions ---------------------------------------------------------------
    def compute(self, engine, duration, reads, writes, psum_blocks=(), touches_psum=False,
                touches_sbuf=False, waits=(), uses=()):
        """Schedules one compute instruction of ``duration`` ns; returns (start, end).

        ``reads``/``writes``: regions; ``psum_blocks``: PSUM (uid, block) keys;
        ``waits``: tiles (SBUF buffers, PSUM banks) the instruction's new tiles reuse
        (``Rings``); ``uses``: tile keys accessed (for later write-after-read waits).
        """
        start = max(self.free[engine], self.ready(reads, engine), self.ready(writes, engine))
        if waits:
            start = max(start, self.freed(waits))
        ports = ()
        if self.t.shared_ports:
            if touches_psum and engine in ("vector", "scalar"):
                ports = ("psum",)
            if touches_sbuf and engine in ("vector", "gpsimd"):
                ports = ports + ("sbuf",)
            for p in ports:
                start = max(start, self.ports[p])
        elif touches_psum and engine in ("vector", "scalar"):
            # trn2 lifts the shared ports, but VectorE and ScalarE still cannot access the
            # same PSUM bank at once [D nki-facts §3.1, S4 trn2 guide]
            ports = tuple(("psum", key) for key in psum_blocks)
            for p in ports:
                start = max(start, self.ports.get(p, 0.0))
        end = start + duration
        self.free[engine] = end
        for p in ports:
            self.ports[p] = end
        self.busy[engine] += duration
        self.wrote(writes, end, engine)
        if uses:
            self.used(uses, end)
        if end > self.end:
            self.end = end
        return start, end

    def dma(self, partitions, nbytes, n_desc, reads, writes, direction="load", waits=(), uses=(),
            efficiency=1.0, delay_ns=0.0, first=0, hbm=True):
        """Schedules one DMA of ``nbytes`` in ``n_desc`` contiguous chunks over ceil(P/8)
        DMA engines starting at engine ``first`` (nki-facts §3.4); returns (start, end).

        Each engine serves its transfers in the order they are handed over (FIFO): the
        transfer starts on an engine once the engine finished the previous one and its
        data and buffers are ready, occupies it for ``dma_occupancy`` and completes
        ``dma_latency_ns`` after the last engine finished. ``efficiency`` scales the
        bandwidth (DMA transposes); ``delay_ns`` delays the start (hardware DGE);
        ``hbm`` False for SBUF-to-SBUF copies (no HBM share cap).
        """
        t = self.t
        n_q, occupancy, share = dma_occupancy(t, partitions, nbytes, n_desc, efficiency, hbm)
        # a transfer that waits for a compute engine starts dma_start_ns after its semaphore;
        # one that waits for another transfer only for that transfer's completion
        r_dma, r_eng = self.ready(reads, "dma", True)
        w_dma, w_eng = self.ready(writes, "dma", True)
        f_dma, f_eng = self.freed(waits, True) if waits else (0.0, 0.0)
        on_engine = max(r_eng, w_eng, f_eng)
        ready = max(r_dma, w_dma, f_dma, on_engine + t.dma_start_ns if on_engine > 0.0 else 0.0)
        ready += delay_ns
        lanes = self.lanes[direction]
        n_all = len(lanes)
        start = end_q = None
        for j in range(n_q):
            i = (first + j) % n_all
            s = lanes[i] if lanes[i] > ready else ready
            lanes[i] = e = s + occupancy
            if start is None or s < start:
                start = s
            if end_q is None or e > end_q:
                end_q = e
        end = end_q + t.dma_latency_ns
        self.busy["dma"] += occupancy * n_q / n_all
        # loads and stores together cannot outrun the engines' shared bandwidth
        self.dma_floor += share * n_q / n_all
        if self.dma_floor > self.end:
            self.end = self.dma_floor
        self.wrote(writes, end, "dma")
        if uses:
            self.used(uses, end, dma=True)
        if end > self.end:
            self.end = end
        return start, end

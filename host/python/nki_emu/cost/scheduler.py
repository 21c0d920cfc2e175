"""List scheduler for recorded instructions (nki-facts §3.6 [I]).

* one in-order queue per compute engine (tensor, vector, scalar, gpsimd);
* 16 DMA engines (each transfer uses ceil(P/8) of them, nki-facts §3.4), each a
  timeline of busy intervals filled first-fit (``Lane``);
* data dependencies (read-after-write, write-after-write) on memory regions,
  plus ``Target.sync_ns`` per cross-engine edge (semaphore);
* write-after-read through physical buffer reuse: every SBUF allocation site
  (a block-dim tensor, or a tile allocated inside a loop) owns a ring of
  ``Target.buffers(kind, bytes)`` physical buffers; a new logical tile (a new
  block, or the tile of a new iteration) takes the next buffer and waits until
  the previous occupant's last access finished (nki-facts §3.6 "N buffers per
  declared tile");
* trn1 shared ports: VectorE and GpSimd exclusive on SBUF, VectorE and ScalarE
  exclusive on PSUM [D S3 arch];
* 8 PSUM banks: a new accumulation region waits for the bank's previous
  owner to be read out (nki-facts §3.6).

Regions are tuples ``(root uid, first block, last block, lo, hi)``: element
spans inside the root, blocks being the block dimensions of on-chip tensors
and ``HBM_CHUNK``-element chunks of HBM tensors. Times are ns.
"""
import bisect

HBM_CHUNK = 1 << 20


class Scheduler:
    """Online scheduler; times in ns. ``busy`` holds per-engine busy ns."""

    def __init__(self, target):
        self.t = target
        self.free = {"tensor": 0.0, "vector": 0.0, "scalar": 0.0, "gpsimd": 0.0}
        self.busy = {"tensor": 0.0, "vector": 0.0, "scalar": 0.0, "gpsimd": 0.0, "dma": 0.0}
        self.ports = {"sbuf": 0.0, "psum": 0.0}
        # separate rings for HBM->SBUF and SBUF->HBM so a store waiting on compute
        # does not block the next loads [I]
        self.queues = {"load": [Lane() for _ in range(target.dma_queues)]}
        self.queues["store"] = self.queues["load"] if target.dma_shared_queues else \
            [Lane() for _ in range(target.dma_queues)]
        self.rr = {"load": 0, "store": 0}
        self.writers = {}  # (uid, block) -> list of [lo, hi, end, engine]
        self.banks = [0.0] * target.psum_banks  # release time per bank
        self.bank_of = {}  # (uid, block) -> bank
        self.owner = [None] * target.psum_banks
        self.rings = {}  # site -> [next slot, [occupant tile key per slot]]
        self.placed = set()  # tile keys that own a physical buffer
        self.last_use = {}  # tile key -> end of its latest access
        self.end = 0.0

    # --- dependencies ---------------------------------------------------------------
    def ready(self, regions, engine):
        """Earliest time all writers of ``regions`` finished (+ sync when cross-engine)."""
        t = 0.0
        sync = self.t.sync_ns
        writers = self.writers
        for uid, b0, b1, lo, hi in regions:
            for b in range(b0, b1 + 1):
                lst = writers.get((uid, b))
                if not lst:
                    continue
                for w_lo, w_hi, w_end, w_eng in lst:
                    if w_lo <= hi and lo <= w_hi:
                        e = w_end + (sync if w_eng != engine else 0.0)
                        if e > t:
                            t = e
        return t

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
    def place(self, tiles):
        """Earliest start for first writes of ``tiles`` [(tile key, site, n buffers)]."""
        t = 0.0
        for key, site, n_buf in tiles:
            if key in self.placed:
                continue
            self.placed.add(key)
            ring = self.rings.get(site)
            if ring is None:
                ring = self.rings[site] = [0, [None] * max(1, n_buf)]
            slot = ring[0] % len(ring[1])
            ring[0] += 1
            prev = ring[1][slot]
            ring[1][slot] = key
            if prev is not None:
                self.placed.discard(prev)
                t = max(t, self.last_use.pop(prev, 0.0))
        return t

    def used(self, keys, end):
        lu = self.last_use
        for k in keys:
            if lu.get(k, 0.0) < end:
                lu[k] = end

    # --- PSUM banks -----------------------------------------------------------------
    def bank_ready(self, psum_blocks):
        """Earliest start for writing ``psum_blocks``; assigns banks to new owners."""
        t = 0.0
        for key in psum_blocks:
            if key in self.bank_of:
                continue
            bank = min(range(len(self.banks)), key=self.banks.__getitem__)
            old = self.owner[bank]
            if old is not None:
                self.bank_of.pop(old, None)
            self.owner[bank] = key
            self.bank_of[key] = bank
            t = max(t, self.banks[bank])
        return t

    def bank_touch(self, psum_blocks, end):
        for key in psum_blocks:
            bank = self.bank_of.get(key)
            if bank is not None and self.banks[bank] < end:
                self.banks[bank] = end

    # --- instructions ---------------------------------------------------------------
    def compute(self, engine, duration, reads, writes, psum_blocks=(), touches_psum=False,
                touches_sbuf=False, place=(), uses=()):
        """Schedules one compute instruction of ``duration`` ns; returns (start, end).

        ``reads``/``writes``: regions; ``psum_blocks``: PSUM (uid, block) keys;
        ``place``: first-write tiles for :meth:`place`; ``uses``: SBUF tile keys
        accessed (for later write-after-read waits).
        """
        start = max(self.free[engine], self.ready(reads, engine), self.ready(writes, engine))
        if psum_blocks:
            start = max(start, self.bank_ready(psum_blocks))
        if place:
            start = max(start, self.place(place))
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
            ports = tuple(("psum", self.bank_of.get(key, key)) for key in psum_blocks)
            for p in ports:
                start = max(start, self.ports.get(p, 0.0))
        end = start + duration
        self.free[engine] = end
        for p in ports:
            self.ports[p] = end
        self.busy[engine] += duration
        self.wrote(writes, end, engine)
        if psum_blocks:
            self.bank_touch(psum_blocks, end)
        if uses:
            self.used(uses, end)
        if end > self.end:
            self.end = end
        return start, end

    def dma(self, partitions, nbytes, n_desc, reads, writes, direction="load", place=(), uses=(), efficiency=1.0,
            delay_ns=0.0):
        """Schedules one DMA of ``nbytes`` in ``n_desc`` contiguous chunks over
        ceil(P/8) DMA engines (nki-facts §3.4); returns (start, end).

        Per engine: occupancy = dma_fixed_ns + chunks * dma_desc_ns + bytes / BW. Each
        engine's bandwidth is a timeline of busy intervals; a transfer takes the first
        gap at or after its ready time (engines have many queues, so a DMA waiting for
        its data does not block later ones, but concurrent transfers share the engine's
        bandwidth). With ``dma_shared_queues`` False loads and stores use separate
        timelines. The transfer completes dma_latency_ns after its occupancy. ``efficiency``
        scales the bandwidth (DMA transposes); ``delay_ns`` delays the start (hardware DGE).
        """
        t = self.t
        n_q = max(1, min(t.dma_queues, -(-max(partitions, 1) // t.dma_partitions_per_queue)))
        lanes = self.queues[direction]
        occupancy = t.dma_fixed_ns + (n_desc / n_q) * t.dma_desc_ns + (nbytes / n_q) / (t.dma_bytes_per_ns * efficiency)
        ready = self.ready(reads, "dma") + delay_ns
        if place:
            ready = max(ready, self.place(place))
        first = self.rr[direction] if n_q < t.dma_queues else 0
        self.rr[direction] = (first + n_q) % t.dma_queues
        start, end_q = _take_lanes(lanes, first, n_q, ready, occupancy)
        end = end_q + t.dma_latency_ns
        self.busy["dma"] += occupancy * n_q / t.dma_queues
        self.wrote(writes, end, "dma")
        if uses:
            self.used(uses, end)
        if end > self.end:
            self.end = end
        return start, end


def _take_lanes(lanes, first, n_q, ready, occupancy):
    """Books ``occupancy`` ns on lanes first..first+n_q-1 (mod len) from ``ready``; returns
    (earliest start, latest end).

    A DMA over all 128 partitions takes every engine with the same ready time and
    duration, so after one such transfer the engines' timelines are often identical.
    Identical timelines are then held as one shared Lane object (taking it once books
    all of them), and a lane is copied out of the shared object again before a
    transfer over fewer engines books it alone. The bookings are exactly those of
    separate timelines: the matmul kernel's 33 888 DMAs made 542 208 scans before.
    """
    n_all = len(lanes)
    if n_q == n_all:
        lane0 = lanes[0]
        if all(lane is lane0 for lane in lanes):
            s = lane0.take(ready, occupancy)
            return s, s + occupancy
        start = end_q = None
        for lane in {id(lane): lane for lane in lanes}.values():  # a shared timeline once
            s = lane.take(ready, occupancy)
            start = s if start is None or s < start else start
            end_q = s + occupancy if end_q is None or s + occupancy > end_q else end_q
        if all(lane.same_as(lane0) for lane in lanes):
            lanes[:] = [lane0] * n_all
        return start, end_q
    start = end_q = None
    for j in range(n_q):
        i = (first + j) % n_all
        lane = lanes[i]
        if any(other is lane for k, other in enumerate(lanes) if k != i):
            lane = lanes[i] = lane.copy()  # leave the shared timeline of the others
        s = lane.take(ready, occupancy)
        start = s if start is None or s < start else start
        end_q = s + occupancy if end_q is None or s + occupancy > end_q else end_q
    return start, end_q


class Lane:
    """Busy intervals of one DMA engine (sorted, disjoint, touching ones merged); ``take``
    books the first gap."""

    __slots__ = ("starts", "ends", "floor")
    KEEP = 64  # intervals kept; older ones are forgotten (their gaps are not reused)

    def __init__(self):
        self.starts, self.ends = [], []
        self.floor = 0.0  # end of the newest forgotten interval: nothing is booked before it

    def copy(self):
        other = Lane()
        other.starts, other.ends, other.floor = list(self.starts), list(self.ends), self.floor
        return other

    def same_as(self, other):
        """True if both timelines hold the same bookings (and so book alike from now on)."""
        return self is other or (self.floor == other.floor and self.ends == other.ends
                                 and self.starts == other.starts)

    def take(self, ready, duration):
        """Books ``duration`` ns at the earliest time >= ``ready`` that is free; returns it."""
        starts, ends = self.starts, self.ends
        if ready < self.floor:
            ready = self.floor
        i = bisect.bisect_right(ends, ready)
        c = ready
        n = len(starts)
        while i < n and c + duration > starts[i]:
            if ends[i] > c:
                c = ends[i]
            i += 1
        # Book [c, e) before interval i, merged with neighbours it touches: a
        # back-to-back lane stays one interval, so later scans stay short.
        e = c + duration
        if i > 0 and ends[i - 1] == c:
            if i < n and starts[i] == e:
                ends[i - 1] = ends[i]
                del starts[i], ends[i]
            else:
                ends[i - 1] = e
        elif i < n and starts[i] == e:
            starts[i] = c
        else:
            starts.insert(i, c)
            ends.insert(i, e)
        if len(starts) > 2 * self.KEEP:
            self.floor = ends[self.KEEP - 1]
            del starts[:self.KEEP], ends[:self.KEEP]
        return c

"""List scheduler for traced instructions (spec 3.6 [I]).

* one in-order queue per compute engine (tensor, vector, scalar, gpsimd);
* 16 DMA queues (each transfer uses ceil(P/8) of them, spec 3.4);
* data dependencies (read-after-write, write-after-write) on memory regions,
  plus ``Target.sync_ns`` per cross-engine edge (semaphore);
* trn1 shared ports: VectorE and GpSimd exclusive on SBUF, VectorE and ScalarE
  exclusive on PSUM [D S3 arch];
* 8 PSUM banks: a new accumulation region waits for the bank's previous
  owner to be read out (spec 3.6).

Regions are (root uid, block, lo, hi) element spans; blocks are the block
dimensions of on-chip tensors and 1 Mi-element chunks of HBM tensors.
"""
from collections import deque

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
        self.queues = {"load": [0.0] * target.dma_queues, "store": [0.0] * target.dma_queues}
        self.writers = {}  # (uid, block) -> list of [lo, hi, end, engine]
        self.banks = [0.0] * target.psum_banks  # release time per bank
        self.bank_of = {}  # (uid, block) -> bank
        self.owner = [None] * target.psum_banks
        self.recent = deque(maxlen=max(1, target.dma_issue_window))
        self.end = 0.0

    # --- dependencies ---------------------------------------------------------------
    def ready(self, regions, engine):
        """Earliest time all writers of ``regions`` finished (+ sync when cross-engine)."""
        t = 0.0
        for uid, blocks, lo, hi in regions:
            for b in blocks:
                for w_lo, w_hi, w_end, w_eng in self.writers.get((uid, b), ()):
                    if w_lo <= hi and lo <= w_hi:
                        t = max(t, w_end + (self.t.sync_ns if w_eng != engine else 0.0))
        return t

    def wrote(self, regions, end, engine):
        for uid, blocks, lo, hi in regions:
            for b in blocks:
                lst = self.writers.setdefault((uid, b), [])
                lst[:] = [w for w in lst if not (lo <= w[0] and w[1] <= hi)]
                lst.append([lo, hi, end, engine])

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
            if bank is not None:
                self.banks[bank] = max(self.banks[bank], end)

    # --- instructions ---------------------------------------------------------------
    def compute(self, engine, duration, reads, writes, psum_blocks, touches_psum, touches_sbuf):
        """Schedules one compute instruction; returns (start, end)."""
        start = max(self.free[engine], self.ready(reads, engine), self.ready(writes, engine),
                    self.bank_ready(psum_blocks))
        ports = []
        if self.t.shared_ports:
            if touches_psum and engine in ("vector", "scalar"):
                ports.append("psum")
            if touches_sbuf and engine in ("vector", "gpsimd"):
                ports.append("sbuf")
            for p in ports:
                start = max(start, self.ports[p])
        end = start + duration
        self.free[engine] = end
        for p in ports:
            self.ports[p] = end
        self.busy[engine] += duration
        self.wrote(writes, end, engine)
        self.bank_touch(psum_blocks, end)
        self.recent.append(start)
        self.end = max(self.end, end)
        return start, end

    def dma(self, partitions, nbytes, n_desc, reads, writes, direction="load"):
        """Schedules one DMA over ceil(P/8) queues; returns (start, end)."""
        t = self.t
        n_q = max(1, min(t.dma_queues, -(-max(partitions, 1) // t.dma_partitions_per_queue)))
        queues = self.queues[direction]
        order = sorted(range(len(queues)), key=queues.__getitem__)[:n_q]
        occupancy = (n_desc / n_q) * t.dma_desc_ns + (nbytes / n_q) / t.dma_bytes_per_ns
        issue = min(self.recent) if len(self.recent) == self.recent.maxlen else 0.0
        start = max(max(queues[q] for q in order), self.ready(reads, "dma"), issue)
        for q in order:
            queues[q] = start + occupancy
        end = start + t.dma_latency_ns + occupancy
        self.busy["dma"] += occupancy * n_q / t.dma_queues
        self.wrote(writes, end, "dma")
        self.end = max(self.end, end)
        return start, end

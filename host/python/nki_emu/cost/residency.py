"""SBUF residency: load hoisting, re-issue and spills (nki-facts §3.4, 5.2 [I]).

The compiler keeps loop-invariant loads resident when they fit and re-issues
(or spills) what does not fit; nki-facts §5.2 shows this changes HBM traffic up to
7x on NKIBench. This module approximates it with an LRU over SBUF blocks
(one record per (root tensor, block index)) and a capacity in bytes per
partition (Target.sbuf_capacity):

* a load whose HBM source (region + version) is still resident costs nothing
  (hoisted/deduplicated) and moves the block (as does the re-issue of a
  source loaded before) to a *protected* segment: blocks
  of loop-invariant loads are evicted only after all unprotected blocks (a
  two-queue LRU), which is how the compiler keeps hoisted loads while streaming
  per-iteration tiles through the rest of SBUF;
* reading a block that was evicted re-issues the load (HBM read of the bytes
  read) or, for computed data, a spill save + reload;
* static hoisting (``hoisted_groups``: {(uid, version): bytes per partition
  to pin}, chosen by tracer.plan_static_hoisting with
  ``Target.static_hoist_share``): the compiler allocates hoisted buffers for
  loop-invariant inputs that fit in SBUF. Blocks of such a tensor are pinned
  after their first load (every later load is free, and they shrink the LRU)
  until its budget is spent; the rest of it is re-issued when evicted. An LRU
  alone thrashes on such cyclic reuse (0 hits once the set exceeds it), which
  nki-facts §5.2's matmul_add_rmsnorm shows the compiler avoids (w read about once),
  while matmul's 20 MiB rhs block, too large to hoist, is re-issued in full.
"""
from collections import Counter, OrderedDict


class Record:
    """One SBUF block: ``bytes_pp`` per partition, ``kind`` "load"/"compute"."""

    __slots__ = ("bytes_pp", "kind", "resident", "saved", "load_bytes", "pinned", "sources", "refs", "block")

    def __init__(self, bytes_pp, kind):
        self.bytes_pp, self.kind, self.resident, self.saved, self.load_bytes = bytes_pp, kind, False, False, 0
        self.pinned = False
        self.block = None  # the first block key mapped to this record
        self.sources = ()  # HBM source keys whose data this block holds (loads)
        self.refs = 0  # block keys mapped to this record


class Residency:
    """Two-queue LRU of SBUF blocks: ``capacity`` bytes per partition, of which at most
    ``protected_share`` for protected (hoisted) loads."""

    def __init__(self, capacity, protected_share=0.75):
        self.capacity = capacity
        self.protected_cap = capacity * protected_share
        self.prot_used = 0
        self.lru = OrderedDict()  # id(record) -> record, oldest first (unprotected)
        self.prot = OrderedDict()  # protected records (hoisted loads), oldest first
        self.used = 0
        self.records = {}  # block key -> Record
        self.sources = {}  # HBM source key -> Record
        self.hoisted_groups = {}  # HBM tensor (uid, version) -> bytes per partition still to pin
        self.evicted = None  # when a list: records evicted by the calls since it was set

    @staticmethod
    def group_of(src_key):
        """The HBM tensor (uid, version) a load source key belongs to."""
        return src_key[:2]

    def hoisting_candidates(self, loads, share):
        """HBM tensors that could be hoisted, in order of first load: [(group, bytes_pp)].

        ``loads``: (src_key, bytes_pp) of every load in program order. A
        candidate has a region loaded more than once and distinct loaded
        bytes per partition within ``share`` of the capacity.
        """
        counts = Counter(key for key, _ in loads)
        footprint, order, seen = {}, [], set()
        for key, bpp in loads:
            group = self.group_of(key)
            if group not in footprint:
                footprint[group] = 0
                order.append(group)
            if key not in seen:
                seen.add(key)
                footprint[group] += bpp
        repeated = {self.group_of(key) for key, n in counts.items() if n > 1}
        limit = self.capacity * share
        return [(g, footprint[g]) for g in order if g in repeated and footprint[g] <= limit]

    def _touch(self, rec, protect=False):
        if rec.pinned:
            return
        key = id(rec)
        if rec.resident:
            if key in self.prot:
                self.prot.move_to_end(key)
            elif protect:
                del self.lru[key]
                self.prot[key] = rec
                self.prot_used += rec.bytes_pp
                self._shrink_protected(key)
            else:
                self.lru.move_to_end(key)
            return
        rec.resident = True
        (self.prot if protect else self.lru)[key] = rec
        self.used += rec.bytes_pp
        if protect:
            self.prot_used += rec.bytes_pp
            self._shrink_protected(key)
        while self.used > self.capacity:
            if len(self.lru) > (0 if protect else 1):
                _, old = self.lru.popitem(last=False)
            elif len(self.prot) > (1 if protect else 0):
                _, old = self.prot.popitem(last=False)
                self.prot_used -= old.bytes_pp
            else:
                break
            old.resident = False
            self.used -= old.bytes_pp
            if self.evicted is not None:
                self.evicted.append(old)

    def _shrink_protected(self, keep):
        """Demotes the oldest protected blocks to the unprotected LRU (as most recent) while
        the protected segment exceeds its share."""
        while self.prot_used > self.protected_cap and len(self.prot) > 1:
            key, old = next(iter(self.prot.items()))
            if key == keep:
                break
            del self.prot[key]
            self.prot_used -= old.bytes_pp
            self.lru[key] = old

    def load(self, src_key, block, bytes_pp, nbytes):
        """A DMA load of ``nbytes`` from ``src_key`` into ``block``; returns True if hoisted."""
        rec = self.sources.get(src_key)
        if rec is not None and rec.resident:
            self._map(block, rec)
            self._touch(rec, protect=True)
            return True
        group = self.group_of(src_key) if self.hoisted_groups else None
        if group is not None and self.hoisted_groups.get(group, 0) >= bytes_pp:
            self.hoisted_groups[group] -= bytes_pp
            rec = Record(bytes_pp, "load")
            rec.pinned = rec.resident = True
            rec.load_bytes = nbytes
            self.used += bytes_pp
            self._map(block, rec)
            self.sources[src_key] = rec
            return False
        repeated = rec is not None  # the source was loaded before: re-issue of a hoistable load
        rec = self.records.get(block)
        if rec is None or rec.kind != "load" or not rec.resident:
            rec = Record(bytes_pp, "load")
            self._map(block, rec)
        rec.load_bytes += nbytes
        self.sources[src_key] = rec
        rec.sources = rec.sources + (src_key,)
        self._touch(rec, protect=repeated)
        return False

    def _map(self, block, rec):
        """records[block] = rec, counting the block keys that map to each record."""
        old = self.records.get(block)
        if old is rec:
            return
        if old is not None:
            old.refs -= 1
        rec.refs += 1
        if rec.block is None:
            rec.block = block
        self.records[block] = rec

    def release(self, block, live_sources):
        """``block`` is never accessed again: its physical buffer is free (the compiler's
        allocator reuses it). A loaded block stays while ``live_sources(src_key)`` says a
        later load of its data could still be served from it (hoisting)."""
        rec = self.records.get(block)
        if rec is None or not rec.resident or rec.pinned or any(live_sources(src) for src in rec.sources):
            return
        del self.records[block]
        rec.refs -= 1
        if rec.refs > 0:
            return  # another block still maps to the same data
        key = id(rec)
        if key in self.prot:
            del self.prot[key]
            self.prot_used -= rec.bytes_pp
        else:
            self.lru.pop(key, None)
        rec.resident = False
        self.used -= rec.bytes_pp

    def write(self, block, bytes_pp):
        """A compute instruction writes ``block``."""
        rec = self.records.get(block)
        if rec is None or rec.kind != "compute":
            rec = Record(bytes_pp, "compute")
            self._map(block, rec)
        rec.saved = False
        self._touch(rec)

    def read(self, block, nbytes):
        """A read of ``nbytes`` of ``block``; returns None or (kind, save_bytes, reload_bytes).

        kind "reload": re-issued HBM load; kind "spill": spill save + reload.
        """
        rec = self.records.get(block)
        if rec is None:
            return None
        if rec.resident:
            self._touch(rec)
            return None
        self._touch(rec)
        if rec.kind == "load":
            return ("reload", 0, min(nbytes, rec.load_bytes))
        save = 0 if rec.saved else nbytes
        rec.saved = True
        return ("spill", save, nbytes)

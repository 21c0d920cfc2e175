"""Monotonicity of the cost model as a property (issue 35; docs/nki-emulator.md "Cost model").

Removing work must never make a kernel slower in the model: deleting an
instruction or a DMA from a trace (its readers then find no writer, which makes
their use harmless), or shrinking one (fewer bytes, fewer elements), must not
raise the estimated latency. ``violations`` tries every such mutation of a
trace once; ``minimize`` shrinks a violating trace to the fewest records that
still show it. Used by tests/python/emulator/test_cost_monotone.py (small
kernels) and bench/monotone.py (the published baselines).
"""
from . import metrics, tracer

# tolerance for floating-point summation order (ns and relative)
ABS_NS = 1e-6
REL = 1e-12


def latency_ns(records, counters, target):
    """Estimated latency of ``records`` in ns (without the fixed launch cost)."""
    if counters is None:
        counters = metrics.Counters()
    return tracer.replay(records, counters, target)["latency_ms"] * 1e6 - target.launch_ns


def mutations(records, shrink=True, stride=1):
    """Yields (description, mutate): ``mutate(records)`` returns the records with the
    mutation applied (it finds its record by identity, so it also applies to a part of
    the trace). Each record is deleted once, each DMA halved (bytes) and each compute
    instruction halved (elements) once; with ``stride`` > 1 only every stride-th record
    (deletions from the first, halvings from the middle of each stride).

    Deleting a load also deletes the later loads of the same HBM data: the model serves
    those from the first one's buffer (hoisting, ``residency``), so they are its
    dependent uses, and without it they would become loads of their own."""
    for i, rec in enumerate(records):
        if i % stride == 0:
            yield f"delete record {i} {_describe(rec)}", _deleter(rec)
    if not shrink:
        return
    for i, rec in enumerate(records):
        if i % stride != (stride // 2):
            continue
        if rec[0] in ("L", "S") and rec[2] > 1:
            small = rec[:2] + (rec[2] // 2,) + rec[3:]
        elif rec[0] == "C" and rec[3] > 1:
            small = rec[:3] + (rec[3] // 2,) + rec[4:]
        else:
            continue
        yield f"halve record {i} {_describe(rec)}", _replacer(rec, small)


def _deleter(target):
    def mutate(records):
        for i, rec in enumerate(records):
            if rec is target:
                rest = records[i + 1:]
                if rec[0] == "L":
                    rest = [r for r in rest if not (r[0] == "L" and r[4] == rec[4])]
                return records[:i] + rest
        return list(records)
    mutate.target = target
    return mutate


def _replacer(target, small):
    def mutate(records):
        return [small if rec is target else rec for rec in records]
    mutate.target = target
    return mutate


def _describe(rec):
    if rec[0] == "C":
        return f"(compute {rec[2]} on {rec[1]}, n={rec[3]})"
    return f"({'load' if rec[0] == 'L' else 'store'} of {rec[2]} bytes over {rec[1]} partitions)"


def rises(before, after):
    return after > before * (1 + REL) + ABS_NS


def violations(records, counters, target, shrink=True, limit=None, stride=1):
    """[(description, latency before ns, after ns, mutate)] of the mutations of
    ``records`` (``mutations``) that raise the estimate; at most ``limit``."""
    records = list(records)
    base = latency_ns(records, counters, target)
    found = []
    for what, mutate in mutations(records, shrink, stride):
        after = latency_ns(mutate(records), counters, target)
        if rises(base, after):
            found.append((what, base, after, mutate))
            if limit and len(found) >= limit:
                break
    return found


def minimize(records, mutate, target):
    """The smallest part of ``records`` (greedy chunk deletion, the mutated record kept)
    on which ``mutate`` still raises the estimate."""
    records = list(records)

    def shows(part):
        return rises(latency_ns(part, None, target), latency_ns(mutate(part), None, target))
    chunk = max(1, len(records) // 2)
    while chunk >= 1:
        k, changed = 0, False
        while k < len(records):
            part = records[k:k + chunk]
            if any(rec is mutate.target for rec in part):
                k += chunk
                continue
            trial = records[:k] + records[k + chunk:]
            if trial and shows(trial):
                records, changed = trial, True
            else:
                k += chunk
        if not changed:
            chunk //= 2
    return records

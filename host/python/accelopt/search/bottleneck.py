"""The per-engine bottleneck model behind the graph search's priors.

A profile (the emulator's or the hardware's fields, docs/profile.md) says how
long each resource was busy; a move (an accelopt.rules plan) says which
resources it relieves (``relieves``: {resource: weight 0..1}). The model
turns the profile into a **pressure** per move category and weighs a move by
the pressure on what it relieves. docs/search.md, "Priors from the profile",
is the user view; the numbers are cited from docs/nki-facts.md.

Categories (the keys of ``relieves``):
  tensor, vector, scalar, gpsimd   engine time (TensorE, VectorE, ScalarE, GpSimd)
  dma                              HBM traffic and DMA time
  instructions                     fixed costs: instruction and DMA counts, dependency waits

Pressure, each 0..1:
  engine r:     busy_r = ``<r>_engine_active_time_percent`` (a 0..1 fraction of the
                latency), else engine_busy_ms[r] / latency_ms
  dma:          ``dma_active_time_percent``, else engine_busy_ms.dma / latency_ms
  % of peak:    the resource that sets the roofline (peak.bound: memory -> dma,
                mm -> tensor, vec -> vector) is busy at least percent_of_peak / 100 of
                the latency (peak_ms is its minimum time), so its pressure is at least that
  instructions: the largest of
                - 0.5 x the top pressure (every instruction has a fixed cost on the
                  busiest engine, nki-facts §3.2),
                - dma x the DMAs' fixed share f = 1 / (1 + b / (DMA_FIXED_NS x
                  DMA_BYTES_PER_NS)), b = (hbm_read_bytes + hbm_write_bytes) / dma_count
                  (a DMA costs a ~1300 ns start plus its bytes at 272 B/ns on 16 engines,
                  nki-facts §3.1, §3.4: small DMAs are paid for by their count),
                - 1 - top when no resource is busy for UNDERUTILIZED of the latency
                  (the kernel is "underutilized": dependencies and fixed costs set the time).

Bottleneck label: the category of highest pressure, with "instructions" reported
as "underutilized" or "dma_count" when that term set it, and "dma" as "dma_count"
when fixed costs are more than half of the DMA time.

Move weight: PRIOR_FLOOR + max over r of relieves[r] x pressure[r] / top pressure
(PRIOR_FLOOR..PRIOR_FLOOR + 1): a move pays in full only on the bottleneck.
"""

ENGINES = ("tensor", "vector", "scalar", "gpsimd")
CATEGORIES = ENGINES + ("dma", "instructions")
DMA_FIXED_NS = 1300.0       # DMA start latency (nki-facts §3.1)
DMA_BYTES_PER_NS = 272.0    # 16 DMA engines x 17 B/ns (nki-facts §3.1, trn1)
UNDERUTILIZED = 0.5         # top pressure below this: no resource is the bottleneck
PRIOR_FLOOR = 0.1           # weight of a move that relieves nothing under pressure
_BOUND_RESOURCE = {"memory": "dma", "mm": "tensor", "vec": "vector"}


def _fraction(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return max(0.0, min(1.0, float(value)))


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def classify(metrics, peak=None):
    """The pressure per category of one profile.

    ``metrics``: profile fields (dict; *_active_time_percent as 0..1 fractions,
    engine_busy_ms and latency_ms in ms, hbm_*_bytes and dma_count as counts);
    ``peak``: accelopt.peak.describe's object ({"bound", "percent_of_peak", ...}) or
    None. Returns {"pressure": {category: 0..1}, "busy": {resource: 0..1},
    "dma_fixed_share": 0..1 or None, "bottleneck": label, "why": one-line reason}
    or None when the profile has no busy figure at all.
    """
    metrics = metrics if isinstance(metrics, dict) else {}
    peak = peak if isinstance(peak, dict) else {}
    busy_ms = metrics.get("engine_busy_ms") if isinstance(metrics.get("engine_busy_ms"), dict) else {}
    latency = _number(metrics.get("latency_ms"))
    busy = {}
    for res in ENGINES + ("dma",):
        field = "dma_active_time_percent" if res == "dma" else f"{res}_engine_active_time_percent"
        v = _fraction(metrics.get(field))
        if v is None and latency and _number(busy_ms.get(res)) is not None:
            v = _fraction(busy_ms[res] / latency)
        if v is not None:
            busy[res] = v
    pressure = dict(busy)
    why = []
    bound = _BOUND_RESOURCE.get(peak.get("bound"))
    percent = _number(peak.get("percent_of_peak"))
    if bound and percent is not None:
        floor = max(0.0, min(1.0, percent / 100.0))
        if floor > pressure.get(bound, 0.0):
            pressure[bound] = floor
            why.append(f"{bound} busy at least {percent:.0f} % (the roofline's {peak.get('bound')} bound)")
    if not pressure:
        return None
    for res in CATEGORIES[:-1]:
        pressure.setdefault(res, 0.0)
    top = max(pressure.values())
    fixed = None
    count = _number(metrics.get("dma_count"))
    moved = sum(_number(metrics.get(k)) or 0.0 for k in ("hbm_read_bytes", "hbm_write_bytes"))
    if count and count > 0 and moved > 0:
        fixed = 1.0 / (1.0 + (moved / count) / (DMA_FIXED_NS * DMA_BYTES_PER_NS))
    terms = {"instructions": 0.5 * top, "dma_count": pressure["dma"] * (fixed or 0.0),
             "underutilized": (1.0 - top) if top < UNDERUTILIZED else 0.0}
    source = max(terms, key=terms.get)
    pressure["instructions"] = terms[source]
    label = max(CATEGORIES, key=lambda c: pressure[c])
    if label == "instructions":
        label = source
    elif label == "dma" and fixed is not None and fixed > 0.5:
        label = "dma_count"
    if label == "underutilized":
        why.insert(0, f"no resource busy for {UNDERUTILIZED:.0%} of the latency (top {top:.0%})")
    elif label == "dma_count":
        why.insert(0, f"DMA busy {pressure['dma']:.0%}, {fixed:.0%} of it fixed costs "
                      f"({moved / count / 1024:.0f} KiB per DMA)")
    else:
        why.insert(0, f"{label} busy {pressure[label]:.0%} of the latency")
    return {"pressure": {c: round(pressure[c], 4) for c in CATEGORIES}, "busy": busy,
            "dma_fixed_share": None if fixed is None else round(fixed, 4), "bottleneck": label,
            "why": "; ".join(why)}


def move_weight(relieves, pressure):
    """Prior weight of a move relieving ``relieves`` ({category: weight}) under ``pressure``.

    PRIOR_FLOOR + max_r relieves[r] x pressure[r] / max(pressure); unknown
    categories count as 0. PRIOR_FLOOR alone when nothing is under pressure.
    """
    top = max(pressure.values()) if pressure else 0.0
    if top <= 0 or not isinstance(relieves, dict):
        return PRIOR_FLOOR
    best = 0.0
    for res, w in relieves.items():
        w = _number(w)
        if w is not None:
            best = max(best, max(0.0, w) * pressure.get(res, 0.0) / top)
    return round(PRIOR_FLOOR + best, 6)


def weigh(request):
    """Batch entry point of native:mcgs_priors.

    ``request``: {"nodes": [{"metrics", "peak", "moves": [{"relieves": {...}}]}]}.
    Returns {"nodes": [{"model": classify(...) or None, "weights": [float or None per
    move]}]}: weights are None when the node's profile has no busy figures (the
    stage then falls back to the rank prior). Never raises.
    """
    nodes = request.get("nodes") if isinstance(request, dict) else None
    if not isinstance(nodes, list):
        return {"error": {"kind": "bad_request", "message": "request.nodes must be a list"}}
    out = []
    for node in nodes:
        node = node if isinstance(node, dict) else {}
        model = classify(node.get("metrics"), node.get("peak"))
        moves = node.get("moves") if isinstance(node.get("moves"), list) else []
        weights = [None if model is None else move_weight((m or {}).get("relieves"), model["pressure"])
                   for m in moves]
        out.append({"model": model, "weights": weights})
    return {"nodes": out}

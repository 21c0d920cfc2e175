"""``propose`` and ``apply``: the JSON contract of the rule-based proposer.

propose(request) -> {"plans": [{"id", "rule", "description", "params", "effect", "relieves"[, "predicted_gain"]}]}
  (relieves: {resource: weight 0..1} - the engines, "dma" or "instructions" the move relieves)
apply(request)   -> {"source", "diff"} or {"error": {"kind", "message"}}

Neither raises for bad input; see docs/rules.md.
"""
import random

from ..search import canon
from . import effects, registry
from .errors import NotApplicable
from .source import Source, unified_diff

ENGINE_FIELDS = {
    "vector": "vector_engine_active_time_percent",
    "scalar": "scalar_engine_active_time_percent",
    "tensor": "tensor_engine_active_time_percent",
    "gpsimd": "gpsimd_engine_active_time_percent",
    "dma": "dma_active_time_percent",
}
MAX_PLANS_DEFAULT = 8


def _error(kind, message):
    return {"error": {"kind": kind, "message": str(message)}}


def _busy(metrics):
    """{resource: busy fraction 0..1} from profile metrics; {} when unknown."""
    out = {}
    if not isinstance(metrics, dict):
        return out
    for res, field in ENGINE_FIELDS.items():
        v = metrics.get(field)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[res] = max(0.0, min(1.0, float(v)))
    return out


def score(cand, metrics):
    """Ranking score of a candidate: its prior plus how busy the resources it relieves are.

    With w[r] the weight of resource r in ``cand.relieves``: + 40 x max over
    r of w[r] x busy(r), + 30 x w[bottleneck] (the bottleneck is
    ``metrics["bottleneck"]``, else the busiest engine), and "instructions"
    (fewer fixed per-instruction costs everywhere) counts as relieving the
    bottleneck at half weight. Without metrics the prior alone ranks.
    """
    busy = _busy(metrics)
    s = cand.base
    if busy:
        bottleneck = metrics.get("bottleneck") if isinstance(metrics.get("bottleneck"), str) else None
        if bottleneck not in busy:
            bottleneck = max(busy, key=busy.get)
        w = cand.relieves
        s += 40.0 * max([wt * busy.get(r, 0.0) for r, wt in w.items()] + [0.0])
        s += 30.0 * max(w.get(bottleneck, 0.0), 0.5 * w.get("instructions", 0.0))
    return s


def _plan(rule, cand, busy=None):
    params = dict(cand.params)
    params["site"] = cand.site
    plan = {"id": f"{rule}:{cand.site}", "rule": rule, "description": cand.description, "params": params,
            "effect": cand.effect or effects.EFFECTS.get(rule, ""), "relieves": dict(cand.relieves)}
    gain = effects.predicted_gain(rule, cand.relieves, busy or {})
    if gain is not None:
        plan["predicted_gain"] = gain
    return plan


def propose(request):
    """Applicable rewrite plans for a kernel, best first.

    ``request``: {"source": str, "metrics": dict (profile metrics, may be
    empty), "input_shapes": optional [[int, ...] per kernel argument] (the
    profile result's; rules then skip what those shapes rule out, e.g.
    tile_free's chunks that do not divide the extent), "max_plans": int
    (default 8), "seed": int (default 0),
    "history": [plan ids or rule names already tried], optional "rules":
    [rule names to consider], optional "rank": "score" (default: the
    order the searches use) or "predicted_gain" (``moves``: by predicted
    gain, ties in score order; each plan gets ``search_rank``, its place in
    the score order)}. Plans whose id is in history are dropped;
    plans of a rule named in history rank lower. Ties are broken by a
    shuffle seeded with ``seed``, so the order is deterministic per seed.
    Returns {"plans": [...]} or {"plans": [], "error": {...}} for bad input.
    """
    if not isinstance(request, dict):
        return dict(plans=[], **_error("bad_request", "request must be a JSON object"))
    max_plans = request.get("max_plans", MAX_PLANS_DEFAULT)
    seed = request.get("seed", 0)
    history = request.get("history") or []
    metrics = request.get("metrics") or {}
    only = request.get("rules")
    if isinstance(max_plans, bool) or not isinstance(max_plans, int) or max_plans < 0:
        return dict(plans=[], **_error("bad_request", "max_plans must be a non-negative integer"))
    if isinstance(seed, bool) or not isinstance(seed, int):
        return dict(plans=[], **_error("bad_request", "seed must be an integer"))
    if not isinstance(history, list) or not all(isinstance(h, str) for h in history):
        return dict(plans=[], **_error("bad_request", "history must be a list of strings"))
    if not isinstance(metrics, dict):
        return dict(plans=[], **_error("bad_request", "metrics must be an object"))
    if only is not None and (not isinstance(only, list) or not all(isinstance(r, str) for r in only)):
        return dict(plans=[], **_error("bad_request", "rules must be a list of rule names"))
    rank = request.get("rank", "score")
    if rank not in ("score", "predicted_gain"):
        return dict(plans=[], **_error("bad_request", f"rank must be 'score' or 'predicted_gain', got {rank!r}"))
    shapes = request.get("input_shapes") or []
    if not isinstance(shapes, list) or not all(
            isinstance(s, list) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in s)
            for s in shapes):
        return dict(plans=[], **_error("bad_request", "input_shapes must be a list of shapes (lists of integers)"))
    try:
        src = Source(request.get("source"))
    except NotApplicable as exc:
        return dict(plans=[], **_error("bad_source", exc))
    src.input_shapes = shapes
    tried = set(history)
    busy = _busy(metrics)
    scored = []
    for rule, module in registry.RULES.items():
        if only is not None and rule not in only:
            continue
        try:
            cands = registry.candidates(module, src)
        except NotApplicable:
            continue
        for cand in cands:
            plan = _plan(rule, cand, busy)
            if plan["id"] in tried:
                continue
            s = score(cand, metrics) - (25.0 if rule in tried else 0.0)
            scored.append((s, plan))
    random.Random(seed).shuffle(scored)
    scored.sort(key=lambda sp: -sp[0])  # stable: the seeded shuffle breaks ties
    plans = [p for _, p in scored]
    if rank == "predicted_gain":
        for index, plan in enumerate(plans, start=1):
            plan["search_rank"] = index
        plans.sort(key=lambda p: -(p.get("predicted_gain") or 0.0))  # stable: score order breaks ties
    return {"plans": plans[:max_plans]}


def apply(request):
    """Applies one plan (from ``propose`` on the same source) and returns the new source.

    ``request``: {"source": str, "plan": {"rule": str, "params": {"site": str, ...}}}.
    Returns {"source": new_source, "diff": unified diff, "plan_id": str, "state_hash": the
    graph search's state key of new_source (accelopt.search.canon)} or
    {"error": {"kind": "bad_request" | "bad_source" | "not_applicable",
    "message": str}}. The site is searched again in the given source and all
    preconditions are re-checked; nothing is assumed from the proposal.
    """
    if not isinstance(request, dict):
        return _error("bad_request", "request must be a JSON object")
    plan = request.get("plan")
    if not isinstance(plan, dict):
        return _error("bad_request", "plan must be an object")
    rule = plan.get("rule")
    params = plan.get("params") if isinstance(plan.get("params"), dict) else {}
    if rule is None and isinstance(plan.get("id"), str) and ":" in plan["id"]:
        rule, site = plan["id"].split(":", 1)
        params = dict(params, site=params.get("site", site))
    if rule not in registry.RULES:
        return _error("bad_request", f"unknown rule {rule!r}; known: {', '.join(registry.RULES)}")
    site = params.get("site")
    if not isinstance(site, str):
        return _error("bad_request", "plan.params.site must be a string")
    try:
        src = Source(request.get("source"))
    except NotApplicable as exc:
        return _error("bad_source", exc)
    try:
        cands = registry.candidates(registry.RULES[rule], src)
        match = [c for c in cands if c.site == site]
        if not match:
            raise NotApplicable(f"{rule}: no site {site!r} whose preconditions hold in this source")
        new = match[0].rewrite()
    except NotApplicable as exc:
        return _error("not_applicable", exc)
    except Exception as exc:  # noqa: BLE001 - a rule bug must not take the caller down
        # report it as a refusal
        return _error("not_applicable", f"{rule}: internal error: {type(exc).__name__}: {exc}")
    if new == src.text:
        return _error("not_applicable", f"{rule}: the rewrite leaves the source unchanged")
    return {"source": new, "diff": unified_diff(src.text, new), "plan_id": f"{rule}:{site}",
            "state_hash": canon.state_hash(new)}

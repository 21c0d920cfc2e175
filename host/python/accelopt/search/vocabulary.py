"""The move vocabulary an LLM planner chooses from (docs/search.md, "LLM moves").

The vocabulary is accelopt.rules' registry: each rule name is a move kind with
its documented effect (accelopt.rules.effects.EFFECTS). For one kernel,
``describe`` adds the moves accelopt.rules.propose finds applicable (with their
parameters and predicted gains), what each kind relieves, and the profile's
bottleneck (accelopt.search.bottleneck). The planner must answer with one kind;
``check_kind`` validates it.

Beside the rule kinds there is one open kind, ``open`` (OPEN_KIND): a free
restructuring that no single rule produces. It has no applicable moves and no
rule applies it; the planner describes it in its PLAN text and the executor
writes the kernel from that text (docs/search.md, "The open move"). Its
statistics and prior are its own (the kind keys tactics.json like any rule).
"""
import re

from accelopt.rules import api as rules_api
from accelopt.rules import effects, registry

from . import bottleneck

# What a kind relieves when no applicable move of it on the kernel says so: each rule's own
# RELIEVES (accelopt/rules/moves/<kind>.py, collected by the registry); a rule loaded from
# ACCELOPT_RULES_PATH without RELIEVES: fixed costs at half weight.
KIND_RELIEVES = registry.RELIEVES
DEFAULT_RELIEVES = {"instructions": 0.5}

# The open move: its kind, the names a planner may write for it, its effect as the
# prompt shows it, and what it relieves for the profile prior: a restructuring may
# change any engine's load, so every resource at the same weight (the tactic
# statistics of "open" then say whether it pays on which bottleneck).
OPEN_KIND = "open"
OPEN_ALIASES = ("open", "restructure", "open_move", "free_restructuring")
OPEN_EFFECT = ("a free restructuring of the kernel that no single rule kind produces (a new loop structure, "
               "data layout, engine assignment or algorithm); describe it concretely in PLAN and the reasoning: "
               "the kernel is written from your text")
OPEN_RELIEVES = {"instructions": 0.6, "dma": 0.6, "vector": 0.6, "scalar": 0.6, "tensor": 0.6}


def kinds():
    """Every move kind: [{"name", "effect"}], the rules in the registry's order, then OPEN_KIND."""
    out = [{"name": name, "effect": effects.EFFECTS.get(name, "")} for name in registry.RULES]
    out.append({"name": OPEN_KIND, "effect": OPEN_EFFECT})
    return out


def normalize_kind(text):
    """The kind a planner wrote, as a vocabulary name: lower case, spaces and '-' as '_',
    surrounding quotes/backticks and a ':site' suffix removed ("Fuse-SiLU" -> "fuse_silu")."""
    t = str(text).strip().strip("`'\"*").strip()
    t = t.split(":", 1)[0]
    return re.sub(r"[\s\-]+", "_", t.strip().lower())


def check_kind(name):
    """(kind, None) when ``name`` names a kind after normalize_kind, else (None, error message)."""
    kind = normalize_kind(name)
    if kind in registry.RULES:
        return kind, None
    if kind in OPEN_ALIASES:
        return OPEN_KIND, None
    if not kind:
        return None, "the reply names no move kind (a `MOVE: <kind>` line is required)"
    return None, (f"move kind {name!r} is not in the vocabulary; known kinds: {', '.join(registry.RULES)}, "
                  f"or {OPEN_KIND} for a free restructuring")


def relieves_of(kind, applicable):
    """What ``kind`` relieves: the element-wise max of its applicable moves' ``relieves``,
    else KIND_RELIEVES[kind], else DEFAULT_RELIEVES."""
    out = {}
    for plan in applicable:
        if plan.get("rule") == kind and isinstance(plan.get("relieves"), dict):
            for res, w in plan["relieves"].items():
                out[res] = max(out.get(res, 0.0), float(w))
    if kind == OPEN_KIND:
        return dict(OPEN_RELIEVES)
    return out or dict(KIND_RELIEVES.get(kind, DEFAULT_RELIEVES))


def describe(request):
    """The vocabulary for one kernel, as the planner prompt shows it.

    ``request``: {"source": kernel source, "metrics": profile fields, "input_shapes":
    the profile's (optional), "peak":
    accelopt.peak's object or null, "max_plans": applicable moves to list (default
    12), "seed", "history": as accelopt.rules.propose}. Returns {"kinds": [{"name",
    "effect", "relieves", "applicable": count}], "applicable": propose's plans (id,
    rule, description, params, effect, relieves, predicted_gain), "bottleneck":
    accelopt.search.bottleneck.classify(...) or None, "error": propose's error or
    absent}. Never raises.
    """
    if not isinstance(request, dict):
        return {"kinds": [], "applicable": [], "bottleneck": None,
                "error": {"kind": "bad_request", "message": "request must be an object"}}
    proposal = rules_api.propose({"source": request.get("source"), "metrics": request.get("metrics") or {},
                                  "input_shapes": request.get("input_shapes") or [],
                                  "max_plans": request.get("max_plans", 12), "seed": request.get("seed", 0),
                                  "history": request.get("history") or []})
    applicable = proposal.get("plans", [])
    out_kinds = []
    for k in kinds():
        k["relieves"] = relieves_of(k["name"], applicable)
        k["applicable"] = sum(1 for p in applicable if p.get("rule") == k["name"])
        out_kinds.append(k)
    out = {"kinds": out_kinds, "applicable": applicable,
           "bottleneck": bottleneck.classify(request.get("metrics"), request.get("peak"))}
    if proposal.get("error"):
        out["error"] = proposal["error"]
    return out


def resolve_move(request):
    """Validates a planner's move choice and matches it to an applicable move.

    ``request``: {"kind": the kind as written, "site": site or "", "applicable":
    describe()'s applicable plans}. Returns {"kind": vocabulary name, "matched":
    the applicable plan of that kind whose site (params.site, or the id after
    ':') equals ``site``, else the kind's first applicable plan, else None
    (always None for OPEN_KIND, which no rule applies)} or
    {"error": {"kind": "unknown_move" | "no_move", "message"}}. Never raises.
    """
    if not isinstance(request, dict):
        return {"error": {"kind": "bad_request", "message": "request must be an object"}}
    written = request.get("kind") or ""
    kind, error = check_kind(written)
    if error:
        return {"error": {"kind": "no_move" if not normalize_kind(written) else "unknown_move", "message": error}}
    if kind == OPEN_KIND:
        return {"kind": kind, "matched": None}
    site = str(request.get("site") or "").strip().strip("`'\"")
    same = [p for p in request.get("applicable") or [] if isinstance(p, dict) and p.get("rule") == kind]

    def site_of(plan):
        params = plan.get("params") if isinstance(plan.get("params"), dict) else {}
        return str(params.get("site", str(plan.get("id", "")).split(":", 1)[-1]))
    matched = next((p for p in same if site and site_of(p) == site), same[0] if same else None)
    return {"kind": kind, "matched": matched}

"""The documented effect each rule relies on, and its predicted gain from profile metrics.

Each rule declares both in its own file (``EFFECT``, ``GAIN``, accelopt/rules/moves/); the
registry collects them here. ``EFFECTS[rule]`` names the hardware effect (engine time, DMA count or bytes,
overlap) with its source in docs/nki-facts.md; it is shown in every plan
(``effect``). ``GAINS[rule]`` is the rule author's estimate of the fraction of
the relieved resource's busy time the move removes. With profile metrics,
``predicted_gain`` (a fraction of the latency, 0..1) is

    gain x max over relieved resources r of  w_r x busy_r x min(1, busy_r / busy_max)

where busy_r is the resource's active fraction (``*_active_time_percent``),
busy_max that of the busiest one (the bottleneck), and w_r the plan's weight
on r: a move pays in full only on the bottleneck, and on another engine only
as far as that engine is nearly as busy. "instructions" counts as half the
bottleneck's busy fraction (every instruction has a fixed cost on some
engine, nki-facts §3.2).
"""

# Filled by accelopt.rules.registry from each rule module's EFFECT and GAIN.
EFFECTS = {}
GAINS = {}

# The effect of one tile-size move, by its direction (tunable, retile).
TILE_LARGER = "tile size: fewer, larger instructions and DMAs (fixed costs per instruction and DMA, nki-facts §3.2, §3.4)"
TILE_SMALLER = ("tile size: more, smaller instructions and DMAs, each paying its fixed cost (nki-facts §3.2, §3.4); "
                "shorter tiles let the next tile's DMA overlap this tile's compute sooner and need less SBUF "
                "(nki-facts §3.6, §5.2)")


def predicted_gain(rule, relieves, busy):
    """Predicted latency fraction saved (0..1, rounded to 3 digits), or None without metrics.

    ``relieves``: {resource: weight}; ``busy``: {resource: active fraction 0..1} (api._busy).
    """
    if not busy:
        return None
    top = max(busy.values())
    if top <= 0:
        return 0.0
    best = 0.0
    for res, w in relieves.items():
        b = 0.5 * top if res == "instructions" else busy.get(res, 0.0)
        best = max(best, w * b * min(1.0, b / top))
    return round(min(0.9, GAINS.get(rule, 0.1) * best), 3)

"""What a rule module provides: candidates (one per rewrite site) that know their edits.

A rule module defines ``NAME`` (the rule id), ``SUMMARY`` (one line) and
``candidates(src) -> [Candidate]``: every site in ``src`` (an
``accelopt.rules.source.Source``) where all the rule's preconditions are
proven. ``Candidate.rewrite()`` returns the new source text.
"""


class Candidate:
    """One applicable rewrite.

    ``site``: stable key of the site (names, not line numbers), unique within
    the rule for one source; ``description``: one line; ``params``: extra
    JSON-able parameters shown in the plan; ``relieves``: resources the
    rewrite takes work off ("vector", "scalar", "dma", "tensor",
    "instructions"); ``base``: prior score; ``edits``: callable returning
    the list of ``Edit`` to apply to ``src``. ``relieves`` may be a tuple
    (weight 1 each) or a dict {resource: weight in 0..1}. ``effect``: this
    move's own effect text when it differs from the rule's documented one
    (``effects.EFFECTS``), e.g. the direction of a tile-size change.
    """

    __slots__ = ("site", "description", "params", "relieves", "base", "edits", "src", "effect")

    def __init__(self, src, site, description, edits, params=None, relieves=(), base=50.0, effect=None):
        self.src = src
        self.site = site
        self.description = description
        self.edits = edits
        self.params = dict(params or {})
        if isinstance(relieves, dict):
            self.relieves = {str(k): float(v) for k, v in relieves.items()}
        else:
            self.relieves = {str(k): 1.0 for k in relieves}
        self.base = float(base)
        self.effect = effect

    def rewrite(self):
        """The rewritten source text; raises NotApplicable if the edit cannot be made."""
        return self.src.apply_edits(self.edits())


def uniquify(cands):
    """Appends "#2", "#3", ... to repeated sites (source order) so every site is unique."""
    seen = {}
    for c in cands:
        n = seen.get(c.site, 0) + 1
        seen[c.site] = n
        if n > 1:
            c.site = f"{c.site}#{n}"
    return cands

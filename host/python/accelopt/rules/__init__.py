"""Rule-based proposer: a fixed vocabulary of source rewrites on NKI kernels (docs/rules.md).

``propose(request)`` lists applicable rewrite plans, ranked with the profile
metrics; ``apply(request)`` performs one. Both take and return JSON-able
dicts and never raise for bad input. ``accelopt.rules.greedy`` is a small
search driver (propose -> apply -> profile) usable from the command line.
The rules' costs cite docs/nki-facts.md as "nki-facts §N".
"""
from .api import apply, propose
from .registry import RULES

__all__ = ["apply", "propose", "RULES"]

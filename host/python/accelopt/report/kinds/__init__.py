"""Run kinds: which report a run directory gets, recognised from its files.

A kind is a module with:

* ``KIND`` -- its name, stored in the run index (``profile``, ``optimize-beam``, ...);
* ``LABEL`` -- a short human description for the page header;
* ``matches(run) -> bool`` -- whether a ``RunFiles`` belongs to this kind,
  judged only from the files in the run directory;
* ``summarize(run) -> dict`` -- ``{"kind", "geomean_speedup", "problems": [{"case_name",
  "problem", "baseline_ms", "best_ms", "speedup", "status"}]}`` for the run index
  and ``compare`` (cheap: no charts);
* ``build(run, base_dir) -> page.Report`` -- the page's sections (links relative to ``base_dir``).

``KINDS`` is tried in order and the first match wins; ``generic`` matches any
run and stays last. A new kind (MCGS, agent, FlashInfer) is a new module
added to ``KINDS`` before the kinds its files could also match.
"""
from . import agent
from . import beam
from . import flashinfer
from . import generic
from . import mcgs
from . import profile

# The graph search and the agent write the beam's files too: they come before it.
KINDS = [mcgs, agent, beam, flashinfer, profile, generic]


def detect(run):
    """The first kind in ``KINDS`` whose ``matches(run)`` is true."""
    for kind in KINDS:
        if kind.matches(run):
            return kind
    return generic


def by_name(name):
    """The kind module called ``name`` (its ``KIND``), or None."""
    for kind in KINDS:
        if kind.KIND == name:
            return kind
    return None

"""The evaluators of isolated calls: one registry that the trusted side dispatches through.

The host names an isolated call by the Python function a worker would run
(``{"module", "function", "arg"}``, host/src/worker/isolated_call.cc). An evaluator claims
one such call and brings its trusted side (docs/isolation.md):

* ``prepare(call) -> (prepared, blobs)``: checks the request, draws the inputs and returns the
  worker's job with a token, or a final ``result`` (the candidate never runs);
* ``finish(token, outcome, blobs) -> (value, blobs)``: judges the worker's answer (or asks for
  another pass);
* ``discard(token) -> bool``: forgets a call the host abandoned;
* optionally ``ahead(call) -> (value, blobs)``: sends a later pass early.

Its tokens start with its ``token_prefix``, so an answer finds its evaluator without the host
knowing which one it was. A worker started for the evaluator's ``backend`` runs its
``warm_up`` once, in the zygote. A call that no evaluator claims runs as is in a worker.

Adding an evaluator is one entry here plus its trusted side; ``accelopt.sandbox`` never
imports an evaluator's package (tests/python/structure/test_evaluators.py).
"""
import dataclasses
import importlib


@dataclasses.dataclass(frozen=True)
class Evaluator:
    """One kind of isolated evaluation. ``module``/``function``: the call the host names;
    ``side``: the module of its trusted side; ``prepare``/``finish``/``discard``/``ahead``: the
    names of the side's functions (``ahead`` may be None); ``backend``/``warm_up``: the worker
    backend it needs and that backend's warm-up as "module:function" (None: none)."""
    name: str
    module: str
    function: str
    side: str
    token_prefix: str
    prepare: str = "prepare"
    finish: str = "finish"
    discard: str = "discard"
    ahead: str = None
    backend: str = None
    warm_up: str = None

    @property
    def call(self):
        """(module, function) as the host names the call."""
        return self.module, self.function

    def hook(self, step):
        """The trusted side's function for ``step`` ("prepare", "finish", "discard", "ahead"), or
        None when the evaluator has no such step."""
        name = getattr(self, step)
        return getattr(importlib.import_module(self.side), name) if name else None


EVALUATORS = (
    # A candidate NKI kernel on the emulator or a NeuronCore (docs/isolation.md, docs/trainium.md).
    Evaluator("nki.profile", "accelopt.profile", "profile_kernel", side="accelopt.sandbox.trusted",
              token_prefix="nki-", prepare="prepare_profile", finish="finish_profile",
              discard="discard_profile", ahead="ahead_profile"),
    # One trial of a FlashInfer-Bench solution or reference in a CPU torch worker (docs/flashinfer.md).
    Evaluator("fib.trial", "accelopt.fib.evaluate", "trial", side="accelopt.fib.trusted", token_prefix="fib-",
              prepare="prepare_call", finish="finish_call", discard="discard", backend="torch",
              warm_up="accelopt.fib.untrusted:warm_up"),
)


def for_call(module, function):
    """The evaluator that claims the host's call ``module.function``, or None."""
    return next((e for e in EVALUATORS if e.call == (module, function)), None)


def for_token(token):
    """The evaluator whose tokens look like ``token``, or None."""
    token = str(token or "")
    return next((e for e in EVALUATORS if token.startswith(e.token_prefix)), None)


def by_name(name):
    """The evaluator called ``name``; KeyError naming the known ones otherwise."""
    for evaluator in EVALUATORS:
        if evaluator.name == name:
            return evaluator
    raise KeyError(f"no evaluator {name!r}; known: {', '.join(e.name for e in EVALUATORS)}")


def warm_up(backend):
    """Runs the warm-up of every evaluator that needs the worker ``backend``; returns their
    results in registry order (an empty list when none needs it)."""
    out = []
    for evaluator in EVALUATORS:
        if evaluator.backend == backend and evaluator.warm_up:
            module, function = evaluator.warm_up.split(":")
            out.append(getattr(importlib.import_module(module), function)())
    return out

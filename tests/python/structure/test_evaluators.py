"""Isolated evaluations dispatch through one registry (issue 40, item 1): accelopt.evaluators
names every evaluator (the host's call it claims, its trusted side, its token prefix, its
worker warm-up); accelopt.sandbox never imports an evaluator's package, and a new evaluator
is an entry plus its trusted side."""
import ast
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PYTHON_ROOT = os.path.join(REPO, "host", "python")
sys.path.insert(0, PYTHON_ROOT)

from accelopt import evaluators  # noqa: E402
from accelopt.sandbox import trusted  # noqa: E402


def _imports(path):
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield ("." * node.level) + (node.module or ""), [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []


def test_the_sandbox_reaches_evaluators_only_through_the_registry():
    sandbox = os.path.join(PYTHON_ROOT, "accelopt", "sandbox")
    offenders = []
    for name in sorted(os.listdir(sandbox)):
        if not name.endswith(".py"):
            continue
        for module, names in _imports(os.path.join(sandbox, name)):
            if module.startswith(("..fib", "accelopt.fib")) or (module == ".." and "fib" in names):
                offenders.append(f"accelopt/sandbox/{name} imports {module} {names}")
    assert not offenders, "dispatch through accelopt.evaluators instead:\n" + "\n".join(offenders)


def test_every_evaluator_resolves_and_claims_its_own_calls_and_tokens():
    prefixes = [e.token_prefix for e in evaluators.EVALUATORS]
    assert all(prefixes) and not any(a != b and b.startswith(a) for a in prefixes for b in prefixes)
    for evaluator in evaluators.EVALUATORS:
        assert evaluators.for_call(*evaluator.call) is evaluator
        assert evaluators.for_token(evaluator.token_prefix + "0123") is evaluator
        assert evaluators.by_name(evaluator.name) is evaluator
        for step in ("prepare", "finish", "discard"):
            assert callable(evaluator.hook(step)), (evaluator.name, step)
    assert evaluators.for_call("accelopt.report", "render_report") is None
    assert evaluators.for_token("0123abcd") is None


def test_unclaimed_calls_and_unknown_tokens_keep_their_answers():
    assert trusted.prepare({"module": "accelopt.report", "function": "render_report", "arg": {}}) == \
        ({"plain": True}, [])
    result, blobs = trusted.finish({"token": "no-such-evaluator", "outcome": {"ok": False}})
    assert blobs == [] and result["error"]["kind"] == trusted.WORKER_ERROR
    assert trusted.discard({"token": "nki-unknown"}) is False
    assert trusted.ahead({"token": "fib-unknown"}) == ({"none": True}, [])


TOY_SIDE = '''
PREPARED = {}


def prepare(call):
    token = "toy-" + str(len(PREPARED))
    PREPARED[token] = call["arg"]
    return {"token": token, "backend": "toy", "worker": {"module": "toy_worker", "function": "run",
                                                         "arg": call["arg"]}}, []


def finish(token, outcome, blobs):
    return {"arg": PREPARED.pop(token), "worker_said": outcome.get("result")}, []


def discard(token):
    return PREPARED.pop(token, None) is not None
'''


def test_a_new_evaluator_is_an_entry_and_its_trusted_side():
    """A toy evaluator: its trusted side in one new module, one entry in the registry; the
    sandbox's prepare, finish and discard reach it by the call and by its tokens."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "toy_side.py"), "w", encoding="utf-8") as handle:
            handle.write(TOY_SIDE)
        sys.path.insert(0, tmp)
        saved = evaluators.EVALUATORS
        evaluators.EVALUATORS = saved + (evaluators.Evaluator("toy.echo", "toy_evaluator", "echo",
                                                                side="toy_side", token_prefix="toy-"),)
        try:
            prepared, _ = trusted.prepare({"module": "toy_evaluator", "function": "echo", "arg": {"x": 1}})
            assert prepared["worker"]["arg"] == {"x": 1} and prepared["token"].startswith("toy-")
            value, _ = trusted.finish({"token": prepared["token"], "outcome": {"ok": True, "result": 42}})
            assert value == {"arg": {"x": 1}, "worker_said": 42}
            again, _ = trusted.prepare({"module": "toy_evaluator", "function": "echo", "arg": {"x": 2}})
            assert trusted.discard({"token": again["token"]}) is True
            assert trusted.discard({"token": again["token"]}) is False
        finally:
            evaluators.EVALUATORS = saved
            sys.path.remove(tmp)
            sys.modules.pop("toy_side", None)

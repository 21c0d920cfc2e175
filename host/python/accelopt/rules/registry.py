"""The rule registry: rule name -> module (docs/rules.md, "Writing a rule").

A built-in rule is one file, ``accelopt/rules/moves/<NAME>.py``, and registers itself by being
there: every module of that package is imported here and checked against the rule contract
(``NAME`` equal to the file's name, ``SUMMARY``, ``EFFECT``, ``GAIN``, ``RELIEVES`` and
``candidates(src)``; ``ORDER`` optional). Its effect, gain and relief enter ``effects.EFFECTS``,
``effects.GAINS`` and ``RELIEVES``, which the plans, the predicted gains and the LLM planner's
move vocabulary read. Shared analysis (``analysis``, ``patterns``, ``cstyle``, ...) lives beside
this module in ``accelopt/rules/``, never in ``moves/``.

Besides the built-in rules, every ``*.py`` in the folders of ``ACCELOPT_RULES_PATH``
(colon-separated, read when this module is imported: the host, ``moves``, the plan
stage) is loaded as a rule module (docs/rules.md, "Writing a rule"); a module that breaks
the contract is refused with a warning naming its file.
"""
import importlib
import importlib.util
import math
import os
import pkgutil
import sys

from . import effects, moves
from .base import uniquify
from .errors import NotApplicable

RULES = {}  # rule name -> module, built-ins in ORDER, then rules loaded from ACCELOPT_RULES_PATH
RELIEVES = {}  # rule name -> {resource: weight 0..1}: what the move takes work off when no candidate says
RESOURCES = ("vector", "scalar", "tensor", "gpsimd", "dma", "instructions")


def _contract_problem(module, builtin):
    """Why ``module`` is not a rule module, or None. A built-in must also declare EFFECT, GAIN and
    RELIEVES; a rule from ACCELOPT_RULES_PATH may omit them."""
    name = getattr(module, "NAME", None)
    if not isinstance(name, str) or not name.isidentifier():
        return "NAME must be the rule's id, an identifier (e.g. NAME = \"my_rule\")"
    if not isinstance(getattr(module, "SUMMARY", None), str):
        return "SUMMARY must be a one-line string"
    if not callable(getattr(module, "candidates", None)):
        return "candidates(src) must be a function returning a list of accelopt.rules.base.Candidate"
    effect, gain, relieves = (getattr(module, key, None) for key in ("EFFECT", "GAIN", "RELIEVES"))
    if (builtin or effect is not None) and not isinstance(effect, str):
        return "EFFECT must be the documented hardware effect, a string citing docs/nki-facts.md"
    if (builtin or gain is not None) and (not isinstance(gain, (int, float)) or isinstance(gain, bool)
                                          or not 0 <= gain <= 1):
        return "GAIN must be a number in 0..1 (the share of the relieved resources' busy time removed)"
    if (builtin or relieves is not None) and not (
            isinstance(relieves, dict) and relieves and all(
                r in RESOURCES and isinstance(w, (int, float)) and not isinstance(w, bool) and 0 < w <= 1
                for r, w in relieves.items())):
        return f"RELIEVES must map resources ({', '.join(RESOURCES)}) to weights in (0, 1]"
    return None


def _register(module):
    RULES[module.NAME] = module
    if isinstance(getattr(module, "EFFECT", None), str):
        effects.EFFECTS[module.NAME] = module.EFFECT
    if getattr(module, "GAIN", None) is not None:
        effects.GAINS[module.NAME] = float(module.GAIN)
    if getattr(module, "RELIEVES", None) is not None:
        RELIEVES[module.NAME] = {str(r): float(w) for r, w in module.RELIEVES.items()}


def _load_builtin():
    """Imports every rule module of ``accelopt.rules.moves`` and registers it in ORDER (then by
    name). A built-in that breaks the contract is a bug in the tree: ImportError naming the file."""
    modules = []
    for info in pkgutil.iter_modules(moves.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{moves.__name__}.{info.name}")
        problem = _contract_problem(module, builtin=True)
        if problem is None and module.NAME != info.name:
            problem = f"NAME {module.NAME!r} differs from the file's name {info.name!r}"
        if problem:
            raise ImportError(f"{module.__file__}: rule refused: {problem}")
        modules.append(module)
    for module in sorted(modules, key=lambda m: (getattr(m, "ORDER", math.inf), m.NAME)):
        _register(module)


_load_builtin()


def candidates(module, src):
    """The rule's candidates on ``src`` with unique sites; internal errors become NotApplicable."""
    try:
        return uniquify(list(module.candidates(src)))
    except NotApplicable:
        raise
    except Exception as exc:  # noqa: BLE001 - a rule bug must not take the caller down
        raise NotApplicable(f"{module.NAME}: internal error: {type(exc).__name__}: {exc}") from exc


_EXTERNAL = {}  # rule name -> file, of the rules loaded by load_external


def load_external(folders):
    """Loads the rule modules (``*.py``, not starting with ``_``) of ``folders`` (a list, or a
    colon-separated string) into ``RULES``. A module must define ``NAME`` (an identifier that
    is not already a rule), ``SUMMARY`` (str) and ``candidates(src)``; optional ``EFFECT`` (str),
    ``GAIN`` (0..1) and ``RELIEVES`` ({resource: weight}) go to ``effects.EFFECTS``,
    ``effects.GAINS`` and ``RELIEVES``. Returns
    ``(loaded names, refusals)``, each refusal a message naming the file. Rule modules run in
    the host process: load only code you trust (as for a pipeline's python_path)."""
    if isinstance(folders, str):
        folders = [f for f in folders.split(os.pathsep) if f]
    loaded, refused = [], []
    for folder in folders or []:
        try:
            names = sorted(os.listdir(folder))
        except OSError as error:
            refused.append(f"{folder}: cannot list the rules folder: {error.strerror or error}")
            continue
        for name in names:
            if not name.endswith(".py") or name.startswith("_"):
                continue
            path = os.path.join(folder, name)
            problem, module = _load_rule(path)
            if problem:
                refused.append(f"{path}: rule refused: {problem}")
                continue
            _register(module)
            _EXTERNAL[module.NAME] = path
            loaded.append(module.NAME)
    return loaded, refused


def unload_external(names):
    """Removes rules ``load_external`` loaded (their effects and gains too)."""
    for name in names:
        if name in _EXTERNAL:
            RULES.pop(name, None)
            effects.EFFECTS.pop(name, None)
            effects.GAINS.pop(name, None)
            RELIEVES.pop(name, None)
            sys.modules.pop(f"accelopt_external_rules.{name}", None)
            del _EXTERNAL[name]


def _load_rule(path):
    """(problem, module): the imported rule module, or why it is refused."""
    stem = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(f"accelopt_external_rules.{stem}", path)
    if spec is None or spec.loader is None:
        return "not a Python module", None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - a broken module is refused, never fatal
        return f"{type(error).__name__}: {error}", None
    problem = _contract_problem(module, builtin=False)
    if problem:
        return problem, None
    if module.NAME in RULES:
        where = _EXTERNAL.get(module.NAME, "a built-in rule")
        return f"{module.NAME!r} is already a rule ({where}); choose another NAME", None
    return None, module


def _load_from_environment():
    loaded, refused = load_external(os.environ.get("ACCELOPT_RULES_PATH", ""))
    for message in refused:
        print(f"warning: {message}", file=sys.stderr)


_load_from_environment()

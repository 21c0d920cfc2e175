"""The rule vocabulary: rule name -> module (documented in docs/rules.md).

Besides the built-in rules, every ``*.py`` in the folders of ``ACCELOPT_RULES_PATH``
(colon-separated, read when this module is imported: the host, ``moves``, the plan
stage) is loaded as a rule module (docs/rules.md, "Writing a rule"); a module that breaks
the contract is refused with a warning naming its file.
"""
import importlib.util
import os
import sys

from . import effects
from . import (affine_loop, copy_engine, defer_row_scale, evict_engine, merge_chunks, fuse_nests, narrow_load, block_dim, fuse_reciprocal, fuse_sigmoid, fuse_silu, hoist, hoist_invariant, hoist_nest, hoist_transpose, split_block, store_chunks, reblock,
               interchange, dedupe_load, merge_loads, merge_stores, merge_tensor_scalar, reciprocal_to_scalar, reduce_to_activation, retile, scale_to_activation,
               square_to_activation, tile_free, tunable, widen)
from .base import uniquify
from .errors import NotApplicable

_MODULES = (tunable, hoist, widen, fuse_reciprocal, fuse_sigmoid, fuse_silu, reciprocal_to_scalar,
            square_to_activation, merge_tensor_scalar, hoist_transpose, evict_engine, hoist_invariant, interchange, dedupe_load,
            scale_to_activation, retile, tile_free, defer_row_scale, reduce_to_activation, affine_loop, merge_chunks, copy_engine,
            merge_loads, hoist_nest, split_block, reblock, merge_stores, fuse_nests, narrow_load, block_dim, store_chunks)

RULES = {m.NAME: m for m in _MODULES}


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
    is not already a rule), ``SUMMARY`` (str) and ``candidates(src)``; optional ``EFFECT`` (str)
    and ``GAIN`` (number) go to ``effects.EFFECTS`` / ``effects.GAINS``. Returns
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
            RULES[module.NAME] = module
            _EXTERNAL[module.NAME] = path
            if isinstance(getattr(module, "EFFECT", None), str):
                effects.EFFECTS[module.NAME] = module.EFFECT
            if isinstance(getattr(module, "GAIN", None), (int, float)) and not isinstance(module.GAIN, bool):
                effects.GAINS[module.NAME] = float(module.GAIN)
            loaded.append(module.NAME)
    return loaded, refused


def unload_external(names):
    """Removes rules ``load_external`` loaded (their effects and gains too)."""
    for name in names:
        if name in _EXTERNAL:
            RULES.pop(name, None)
            effects.EFFECTS.pop(name, None)
            effects.GAINS.pop(name, None)
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
    name = getattr(module, "NAME", None)
    if not isinstance(name, str) or not name.isidentifier():
        return "NAME must be the rule's id, an identifier (e.g. NAME = \"my_rule\")", None
    if name in RULES:
        where = _EXTERNAL.get(name, "a built-in rule")
        return f"{name!r} is already a rule ({where}); choose another NAME", None
    if not isinstance(getattr(module, "SUMMARY", None), str):
        return "SUMMARY must be a one-line string", None
    if not callable(getattr(module, "candidates", None)):
        return "candidates(src) must be a function returning a list of accelopt.rules.base.Candidate", None
    return None, module


def _load_from_environment():
    loaded, refused = load_external(os.environ.get("ACCELOPT_RULES_PATH", ""))
    for message in refused:
        print(f"warning: {message}", file=sys.stderr)


_load_from_environment()

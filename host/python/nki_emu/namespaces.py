"""The module namespaces a kernel imports: ``neuronxcc.nki.language``, ``.isa``, ``.typing``.

The implementation modules (``nki_emu.language`` ...) hold NumPy, ``sys``,
``os``, the emulator's internal modules and private helpers in their
globals. A kernel gets a separate module object per namespace that holds
only the NKI API: every public name of the implementation module except
modules and the helpers listed in :data:`INTERNAL` (``dir(nl)`` shows no
``np``, ``sys``, ``runtime`` or ``values``). The functions are the same
objects, so behaviour and the worker's integrity snapshot (rule R5) are
unchanged.
"""
import types

from . import isa_api, language
from . import typing as nki_typing
from .signatures import checked

# Public-looking names of the implementation modules that are emulator internals.
INTERNAL = {
    "language": frozenset({"HBM_BUFFERS", "LoopReduceResult", "NkiTensor", "check_allocation", "elementwise", "usable_sbuf_bytes",
                           "fail", "free_size", "mask_array", "on_chip", "tensor_values", "tensor_write", "values"}),
    "isa": frozenset({"call", "checked", "dual", "fail"}),
    "typing": frozenset({"Annotation"}),
}


def public_names(module, internal):
    """Names of ``module`` a kernel may see: not private, not a module, not in ``internal``."""
    return sorted(name for name, value in vars(module).items()
                  if not name.startswith("_") and not isinstance(value, types.ModuleType) and name not in internal)


def build(name, module, internal):
    """A new module object called ``name`` holding ``module``'s public names (see
    :func:`public_names`) and its docstring. Python functions are wrapped once by
    ``signatures.checked`` (an unknown keyword or a wrong arity in a kernel's call is a
    compile error naming the API, issue 20); the wrappers are built here, at import."""
    facade = types.ModuleType(name, module.__doc__)
    short = name.replace("neuronxcc.", "")
    for attr in public_names(module, internal):
        value = getattr(module, attr)
        if isinstance(value, types.FunctionType) and not getattr(value, "__nki_checked__", False):
            value = checked(f"{short}.{attr}", value)
        setattr(facade, attr, value)
    return facade


LANGUAGE = build("neuronxcc.nki.language", language, INTERNAL["language"])
ISA = build("neuronxcc.nki.isa", isa_api, INTERNAL["isa"])
TYPING = build("neuronxcc.nki.typing", nki_typing, INTERNAL["typing"])

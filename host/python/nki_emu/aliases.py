"""Registers the emulator under the module names kernels import (spec 1.1, 1.2).

``neuronxcc``, ``neuronxcc.nki`` (+ ``.language``, ``.isa``, ``.typing``) and
``nki`` (+ ``.language``, ``.isa``, ``.typing``) all map to the one
implementation in this package (the submodules as the API-only namespaces of
``nki_emu.namespaces``), so ``from neuronxcc.nki import trace`` and
``from neuronxcc.nki.language import par_dim`` resolve, also when repeated
inside kernel bodies.
"""
import sys
import types


def install():
    """Idempotently places the alias modules into ``sys.modules``."""
    import nki_emu
    from .namespaces import ISA, LANGUAGE, TYPING

    if getattr(sys.modules.get("neuronxcc"), "__nki_emu__", False):
        return
    root = types.ModuleType("neuronxcc")
    root.__nki_emu__ = True
    root.__path__ = []
    root.nki = nki_emu.nki_module
    sys.modules["neuronxcc"] = root
    for prefix in ("neuronxcc.nki", "nki"):
        sys.modules[prefix] = nki_emu.nki_module
        sys.modules[prefix + ".language"] = LANGUAGE
        sys.modules[prefix + ".isa"] = ISA
        sys.modules[prefix + ".typing"] = TYPING

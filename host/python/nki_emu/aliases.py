"""Registers the emulator under the module names kernels import (nki-facts §1.1, 1.2).

``neuronxcc``, ``neuronxcc.nki`` (+ ``.language``, ``.isa``, ``.typing``) and
``nki`` (+ ``.language``, ``.isa``, ``.typing``) all map to the one
implementation in this package (the submodules as the API-only namespaces of
``nki_emu.namespaces``), so ``from neuronxcc.nki import trace`` and
``from neuronxcc.nki.language import par_dim`` resolve, also when repeated
inside kernel bodies.
"""
import sys
import types

from .namespaces import ISA, LANGUAGE, TYPING


def install(nki_module):
    """Idempotently places the alias modules into ``sys.modules``; ``nki_module`` is the
    module object that ``neuronxcc.nki`` and ``nki`` name (``nki_emu.nki_module``)."""
    if getattr(sys.modules.get("neuronxcc"), "__nki_emu__", False):
        return
    root = types.ModuleType("neuronxcc")
    root.__nki_emu__ = True
    root.__path__ = []
    root.nki = nki_module
    nki_module.__nki_emu__ = True  # the top-level ``nki`` alias must not pass for the real SDK (>= 2.28)
    sys.modules["neuronxcc"] = root
    for prefix in ("neuronxcc.nki", "nki"):
        sys.modules[prefix] = nki_module
        sys.modules[prefix + ".language"] = LANGUAGE
        sys.modules[prefix + ".isa"] = ISA
        sys.modules[prefix + ".typing"] = TYPING

"""The public ``nki.isa`` / ``neuronxcc.nki.isa`` namespace of the emulator.

One name per API of the SDK 2.28 ``nki.isa`` list and of the legacy (SDK <= 2.27)
``neuronxcc.nki.isa`` list (docs/nki-emulator.md, API table):

* APIs with both forms dispatch on the call (``nki_emu.signatures.dual``): the
  legacy form returns a new tile (``nki_emu.isa``), the 2.28 form writes ``dst``
  (``nki_emu.isa_dst``); ``dst=`` as a keyword, or a tile where the legacy form
  has a non-tile argument, selects the 2.28 form;
* ``dma_copy``/``dma_transpose`` (``nki_emu.isa_dma``) and the other 2.28 additions
  (``nki_emu.isa_new``);
* 2.28 APIs the emulator does not model refuse with ``err_api_not_emulated``.

Every function's arguments are checked against its signature
(``err_unexpected_keyword_argument``, ``err_invalid_number_of_arguments``).
"""
from . import isa, isa_dma, isa_dst, isa_new
from .isa import (dge_mode, engine, gpsimd_engine, nc_version, oob_mode, reduce_cmd, scalar_engine,  # noqa: F401
                  sync_engine, tensor_engine, unknown_engine, vector_engine)
from .isa_dst import matmul_perf_mode  # noqa: F401
from .signatures import checked, dual

get_nc_version = checked("nki.isa.get_nc_version", isa.get_nc_version)


def _public():
    names = {}
    for name, beta2 in isa_dst.DST_FORMS.items():
        names[name] = dual(f"nki.isa.{name}", getattr(isa, name), beta2, isa_dst.DST_SELECTORS[name])
    for name, fn in isa_new.NEW_APIS.items():
        names[name] = checked(f"nki.isa.{name}", fn)
    for name, fn in isa_new.REFUSALS.items():
        names[name] = fn
    names["dma_copy"] = checked("nki.isa.dma_copy", isa_dma.dma_copy)
    names["dma_transpose"] = checked("nki.isa.dma_transpose", isa_dma.dma_transpose)
    return names


globals().update(_public())

"""The public ``nki.isa`` / ``neuronxcc.nki.isa`` namespace of the emulator.

One name per API of the SDK 2.28 ``nki.isa`` list and of the legacy (SDK <= 2.27)
``neuronxcc.nki.isa`` list (docs/nki-emulator.md, API table):

* APIs with both forms dispatch on the call (``nki_emu.signatures.dual``): the
  legacy form returns a new tile (``nki_emu.isa``), the 2.28 form writes ``dst``
  (``nki_emu.isa_dst``); ``dst=`` as a keyword, or a tile where the legacy form
  has a non-tile argument, selects the 2.28 form;
* ``dma_copy``/``dma_transpose`` (``nki_emu.isa_dma``) and the other 2.28 additions
  (``nki_emu.isa_special``), with their SDK 2.26 tile-returning forms where 2.26 had them
  (``nki_emu.isa_special_legacy``);
* 2.28 APIs the emulator does not model refuse with ``err_api_not_emulated``.

Every function's arguments are checked against its signature
(``err_unexpected_keyword_argument``, ``err_invalid_number_of_arguments``).
"""
from . import isa, isa_dma, isa_dst, isa_special, isa_special_legacy
from .isa import (dge_mode, engine, gpsimd_engine, nc_version, oob_mode, reduce_cmd, scalar_engine,  # noqa: F401
                  sync_engine, tensor_engine, unknown_engine, vector_engine)
from .isa_dst import matmul_perf_mode  # noqa: F401 - public enum
from .errors import fail
from .signatures import call, checked, dual

get_nc_version = checked("nki.isa.get_nc_version", isa.get_nc_version)


def _public():
    names = {}
    for name, beta2 in isa_dst.DST_FORMS.items():
        names[name] = dual(f"nki.isa.{name}", getattr(isa, name), beta2, isa_dst.DST_SELECTORS[name])
    new = dict(isa_special.NEW_APIS, dma_copy=isa_dma.dma_copy, dma_transpose=isa_dma.dma_transpose)
    for name, fn in new.items():
        if name in isa_special_legacy.LEGACY_FORMS:
            legacy, selector = isa_special_legacy.LEGACY_FORMS[name]
            names[name] = dual(f"nki.isa.{name}", legacy, fn, selector, dst_selects=name != "dma_copy")
        else:
            names[name] = checked(f"nki.isa.{name}", fn)
    for name, fn in isa_special.REFUSALS.items():
        names[name] = fn
    names["nc_stream_shuffle"] = _stream_shuffle
    _stream_shuffle.__nki_checked__ = True
    return names


def _stream_shuffle(*args, **kwargs):
    """``nc_stream_shuffle``: SDK 2.28 ``(dst, src, shuffle_mask)``, SDK 2.26 ``(src, dst,
    shuffle_mask)``: the same types in swapped order, so two positional tiles are refused
    (``err_ambiguous_positional_arguments`` [I]) instead of guessed; pass ``dst=``/``src=``."""
    if len(args) >= 2:
        fail("err_ambiguous_positional_arguments",
             "'nki.isa.nc_stream_shuffle' takes (dst, src, shuffle_mask) in SDK 2.28 but (src, dst, shuffle_mask) "
             "in SDK 2.26; pass dst= and src= by keyword")
    return call("nki.isa.nc_stream_shuffle", isa_special.nc_stream_shuffle, args, kwargs)


globals().update(_public())

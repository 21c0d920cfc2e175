"""Argument checks of the public NKI API: no silent keywords (issue 20).

neuronxcc traces a kernel against each API's signature: a keyword the API does
not have, a missing argument or too many positional arguments is refused when
the kernel is compiled. The emulator's API functions have exactly the
parameters of neuronxcc's signature (the SDK 2.24 ``neuronxcc.nki`` docs for
the legacy forms, the SDK 2.28 ``nki.isa`` stubs for the ``dst=`` forms;
docs/nki-facts.md §2.9), and :func:`call` turns Python's binding ``TypeError``
into an ``NKICompileError`` naming the API and the keyword, located at the
kernel's source line (``errors.fail``). Error codes (ours, [I]; neuronxcc's text
for them is not public): ``err_unexpected_keyword_argument`` and
``err_invalid_number_of_arguments``.

Cost: none on the happy path (a ``try`` around the call); the signature is
inspected only to word a refusal.
"""
import functools
import inspect

from .errors import fail


def _parameters(fn):
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def _signature_text(api, fn):
    params = _parameters(fn)
    return f"{api}({', '.join(str(p) for p in params.values())})"


def refuse(api, fn, exc, kwargs, other=None):
    """Raises the NKICompileError for a call of ``fn`` (public name ``api``) whose
    arguments did not bind (``exc``: Python's TypeError; ``kwargs``: the keywords given);
    ``other``: the API's other form (legacy / SDK 2.28), named in the message too."""
    params = _parameters(fn)
    signature = _signature_text(api, fn) + (f" (or {_signature_text(api, other)})" if other is not None else "")
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = [k for k in kwargs if k not in params] if not accepts_any else []
    if unknown:
        fail("err_unexpected_keyword_argument",
             f"'{api}' got an unexpected keyword argument '{unknown[0]}'; its signature is {signature}")
    text = str(exc)
    detail = text.split(") ", 1)[1] if ") " in text and text.startswith(getattr(fn, "__name__", "")) else text
    fail("err_invalid_number_of_arguments", f"'{api}' {detail}; its signature is {signature}")


def call(api, fn, args, kwargs):
    """``fn(*args, **kwargs)``; a TypeError raised while binding the arguments (no frame
    of ``fn`` in its traceback) becomes the NKICompileError of :func:`refuse`. TypeErrors
    raised inside ``fn`` propagate unchanged."""
    try:
        return fn(*args, **kwargs)
    except TypeError as exc:
        tb = exc.__traceback__
        if tb is not None and tb.tb_next is None:
            refuse(api, fn, exc, kwargs)
        raise


def checked(api, fn):
    """``fn`` wrapped so that its arguments are checked as by :func:`call`; the wrapper
    keeps ``fn``'s name, docstring, attributes (``op_name``) and signature."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as exc:
            tb = exc.__traceback__
            if tb is not None and tb.tb_next is None:
                refuse(api, fn, exc, kwargs)
            raise

    wrapper.__nki_checked__ = True
    return wrapper


def dual(api, legacy, beta2, is_beta2, dst_selects=True):
    """Public API ``api`` with two forms: the legacy ``neuronxcc.nki`` one (returns a
    tile) and the SDK 2.28 ``dst=`` one. ``is_beta2(args, kwargs)`` picks the form;
    with ``dst_selects``, ``dst=`` given as a keyword always selects the 2.28 form (not
    for APIs whose legacy form has a ``dst`` keyword too). Arguments are checked
    against the chosen form's signature."""
    def dispatcher(*args, **kwargs):
        form = beta2 if ((dst_selects and "dst" in kwargs) or is_beta2(args, kwargs)) else legacy
        try:
            return form(*args, **kwargs)
        except TypeError as exc:
            tb = exc.__traceback__
            if tb is None or tb.tb_next is not None:
                raise
            # the arguments do not bind to the form the selector guessed: the other form, if
            # they bind to it (nothing ran yet), else the refusal for the guessed form
            other = legacy if form is beta2 else beta2
            try:
                return other(*args, **kwargs)
            except TypeError as exc2:
                tb2 = exc2.__traceback__
                if tb2 is not None and tb2.tb_next is None:
                    refuse(api, form, exc, kwargs, other)
                raise

    dispatcher.__name__ = legacy.__name__
    dispatcher.__qualname__ = legacy.__name__
    dispatcher.__doc__ = (f"``{api}``: legacy form {_signature_text(api.split('.')[-1], legacy)} or "
                          f"SDK 2.28 form {_signature_text(api.split('.')[-1], beta2)}.\n\n"
                          f"Legacy: {legacy.__doc__ or ''}\n\nSDK 2.28: {beta2.__doc__ or ''}")
    dispatcher.__nki_checked__ = True
    dispatcher.legacy, dispatcher.beta2 = legacy, beta2
    return dispatcher

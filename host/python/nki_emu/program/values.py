"""The values a kernel's program may carry, and their JSON form.

A program (``nki_emu.program``) names emulator objects by handle number and
carries everything else as a *literal*: Python scalars, strings, tuples, lists,
slices, ``...``, NumPy scalars, dtypes and scalar types, the emulator's own
dtypes, NumPy ufuncs and a few NumPy reductions by name, and small constant
arrays (``np.identity(128)`` for ``nl.shared_constant``). Nothing else can be
encoded: a program cannot carry a Python function, a module or an object of the
kernel's own, so the trusted replayer never receives code.

JSON forms (``enc``): JSON scalars as themselves (a float that is not finite as
``{"f": "inf"|"-inf"|"nan"}``); ``{"h": n}`` handle n; ``{"t": [...]}`` tuple;
``{"l": [...]}`` list; ``{"d": [[key, value], ...]}`` dict with str keys;
``{"sl": [start, stop, step]}``; ``{"el": 1}`` Ellipsis; ``{"ns": dtype, "v":
value}`` NumPy scalar (floats as ``float.hex``); ``{"dt": name}`` ``np.dtype``;
``{"ty": name}`` NumPy scalar type; ``{"nd": name}`` emulator dtype (bfloat16,
...); ``{"uf": name}`` NumPy ufunc; ``{"nf": name}`` NumPy function of
:data:`NUMPY_FUNCTIONS`; ``{"a": [dtype, shape, base64]}`` constant array.
"""
import base64
import math

import numpy as np

from .. import dtypes

# The program document's format name and version (nki_emu.program's docstring).
FORMAT = "accelopt-nki-program"
VERSION = 1

# NumPy functions (not ufuncs) that kernels pass as an ``op`` (np.max in
# nisa.tensor_reduce), by name.
NUMPY_FUNCTIONS = ("max", "min", "sum", "mean", "prod", "amax", "amin", "all", "any")

# Constant arrays one program may carry, in bytes (np.identity(128) fp32 is 64 KiB).
CONSTANT_BYTES = 64 << 20

_NUMERIC_KINDS = "biuf"


class ProgramError(ValueError):
    """A program that cannot be recorded or is not a valid program (malformed, or an
    operation the replayer does not allow). ``line``: the kernel's line, when known."""

    def __init__(self, message, line=None):
        super().__init__(message)
        self.line = line


def _np_name(value):
    return getattr(value, "__name__", None)


def is_numpy_function(value):
    name = _np_name(value)
    return isinstance(name, str) and name in NUMPY_FUNCTIONS and getattr(np, name, None) is value


def is_literal_type(kind):
    """Whether values of ``kind`` are literals (else an object the program names by handle)."""
    return kind in _PLAIN or kind in (float, tuple, list, dict, slice, type(Ellipsis)) \
        or issubclass(kind, (np.generic, np.dtype, dtypes.NkiDType, np.ufunc)) \
        or issubclass(kind, type) or kind is np.ndarray


_PLAIN = frozenset({type(None), bool, int, str})


def encode(value, handle_type, budget):
    """JSON form of ``value``; ``handle_type``: the class of recording handles (their
    ``_hid`` is the handle number); ``budget``: a one-element list of constant bytes
    left. Raises ProgramError naming the type that cannot be part of a program. Runs
    for every argument of every traced operation: the common types come first."""
    kind = type(value)
    if kind is handle_type:
        return {"h": value._hid}
    if kind in _PLAIN:
        return value
    if kind is tuple:
        return {"t": [encode(v, handle_type, budget) for v in value]}
    if kind is slice:
        return {"sl": [encode(value.start, handle_type, budget), encode(value.stop, handle_type, budget),
                       encode(value.step, handle_type, budget)]}
    if kind is float:
        return value if math.isfinite(value) else {"f": repr(value)}
    if kind is list:
        return {"l": [encode(v, handle_type, budget) for v in value]}
    if kind is dict:
        if not all(type(k) is str for k in value):
            raise ProgramError("a dict passed to the NKI API must have str keys")
        return {"d": [[k, encode(v, handle_type, budget)] for k, v in value.items()]}
    if value is Ellipsis:
        return {"el": 1}
    if isinstance(value, np.generic) and value.dtype.kind in _NUMERIC_KINDS:
        item = value.item()
        return {"ns": value.dtype.name, "v": float(item).hex() if value.dtype.kind == "f" else item}
    if isinstance(value, np.dtype) and value.kind in _NUMERIC_KINDS:
        return {"dt": value.name}
    if isinstance(value, type) and issubclass(value, np.generic) and np.dtype(value).kind in _NUMERIC_KINDS:
        return {"ty": np.dtype(value).name}
    if isinstance(value, dtypes.NkiDType):
        return {"nd": value.name}
    if isinstance(value, np.ufunc) and getattr(np, value.__name__, None) is value:
        return {"uf": value.__name__}
    if is_numpy_function(value):
        return {"nf": value.__name__}
    if isinstance(value, np.ndarray) and value.dtype.kind in _NUMERIC_KINDS:
        if value.nbytes > budget[0]:
            raise ProgramError(f"constant arrays over {CONSTANT_BYTES} bytes cannot be part of an NKI program")
        budget[0] -= value.nbytes
        data = base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii")
        return {"a": [value.dtype.str, list(value.shape), data]}
    raise ProgramError(f"a {kind.__module__}.{kind.__qualname__} cannot be passed to the NKI API "
                       "(a program carries tensors, scalars, dtypes and small constant arrays only)")


def _float(text):
    if not isinstance(text, str):
        raise ProgramError("malformed float in program")
    try:
        return float.fromhex(text)
    except ValueError as exc:
        raise ProgramError(f"malformed float in program: {text!r}") from exc


def _dtype(name):
    try:
        dtype = np.dtype(name)
    except (TypeError, ValueError) as exc:
        raise ProgramError(f"unknown dtype {name!r} in program") from exc
    if dtype.kind not in _NUMERIC_KINDS or dtype.hasobject:
        raise ProgramError(f"dtype {name!r} is not allowed in a program")
    return dtype


def decode(data, slot, budget):
    """The value of JSON form ``data``; ``slot(n)`` returns handle n's object;
    ``budget``: a one-element list of constant bytes left. Raises ProgramError."""
    kind = type(data)
    if data is None or kind is bool or kind is int or kind is str or kind is float:
        return data
    if kind is not dict or len(data) != 1 and not ("ns" in data and len(data) == 2):
        raise ProgramError(f"malformed value in program: {str(data)[:80]}")
    if "h" in data:
        return slot(data["h"])
    if "t" in data:
        return tuple(decode(v, slot, budget) for v in _list(data["t"]))
    if "l" in data:
        return [decode(v, slot, budget) for v in _list(data["l"])]
    if "d" in data:
        out = {}
        for pair in _list(data["d"]):
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
                raise ProgramError("malformed dict in program")
            out[pair[0]] = decode(pair[1], slot, budget)
        return out
    if "sl" in data:
        parts = _list(data["sl"])
        if len(parts) != 3:
            raise ProgramError("malformed slice in program")
        return slice(*(decode(v, slot, budget) for v in parts))
    if "el" in data:
        return Ellipsis
    if "f" in data:
        if data["f"] not in ("inf", "-inf", "nan"):
            raise ProgramError("malformed float in program")
        return float(data["f"])
    if "ns" in data:
        dtype = _dtype(data["ns"])
        raw = data.get("v")
        value = _float(raw) if dtype.kind == "f" else raw
        if dtype.kind != "f" and type(raw) not in (int, bool):
            raise ProgramError("malformed NumPy scalar in program")
        try:
            return dtype.type(value)
        except (OverflowError, ValueError) as exc:
            raise ProgramError(f"malformed NumPy scalar in program: {exc}") from exc
    if "dt" in data:
        return _dtype(data["dt"])
    if "ty" in data:
        return _dtype(data["ty"]).type
    if "nd" in data:
        value = getattr(dtypes, str(data["nd"]), None)
        if not isinstance(value, dtypes.NkiDType):
            raise ProgramError(f"unknown NKI dtype {data['nd']!r} in program")
        return value
    if "uf" in data:
        value = getattr(np, str(data["uf"]), None)
        if not isinstance(value, np.ufunc):
            raise ProgramError(f"unknown NumPy ufunc {data['uf']!r} in program")
        return value
    if "nf" in data:
        if data["nf"] not in NUMPY_FUNCTIONS:
            raise ProgramError(f"NumPy function {data['nf']!r} is not allowed in a program")
        return getattr(np, data["nf"])
    if "a" in data:
        parts = _list(data["a"])
        if len(parts) != 3 or type(parts[1]) is not list or type(parts[2]) is not str:
            raise ProgramError("malformed constant array in program")
        dtype = _dtype(parts[0])
        shape = tuple(parts[1])
        if not all(type(d) is int and 0 <= d for d in shape):
            raise ProgramError("malformed constant array shape in program")
        count = math.prod(shape)
        if count * dtype.itemsize > budget[0]:
            raise ProgramError(f"constant arrays over {CONSTANT_BYTES} bytes in program")
        budget[0] -= count * dtype.itemsize
        try:
            raw = base64.b64decode(parts[2], validate=True)
        except ValueError as exc:
            raise ProgramError("malformed constant array data in program") from exc
        if len(raw) != count * dtype.itemsize:
            raise ProgramError("constant array data does not match its shape")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    raise ProgramError(f"malformed value in program: {str(data)[:80]}")


def _list(value):
    if type(value) is not list:
        raise ProgramError("malformed program: expected a list")
    return value


def same(a, b):
    """Whether a replayed literal ``b`` equals the recorded ``a`` (NaN equals NaN, types match)."""
    if type(a) is not type(b):
        return False
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (float, np.floating)):
        return a == b or (a != a and b != b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable means different
        return False

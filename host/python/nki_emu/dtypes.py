"""NKI data types on NumPy.

Supported dtypes follow ``nki.api.shared.rst`` (SDK 2.24, nki-facts §2.8).
``bfloat16`` and ``tfloat32`` have no NumPy type here (Debian ships no
``ml_dtypes``); they are stored in float32 arrays and every value written to
them is rounded to the narrower mantissa, round-to-nearest-even on the fp32
bit pattern. ``float8_e4m3``/``float8_e5m2`` are approximated the same way
(mantissa 3/2 bits; exponent range not clamped).
"""
import numpy as np


class NkiDType:
    """A dtype without a native NumPy equivalent.

    ``name``: NKI name; ``storage``: NumPy dtype of the backing array;
    ``itemsize``: bytes on the device (used by the cost model);
    ``mantissa_bits``: explicit mantissa bits kept when rounding.
    """

    def __init__(self, name, itemsize, mantissa_bits):
        self.name = name
        self.storage = np.dtype(np.float32)
        self.itemsize = itemsize
        self.mantissa_bits = mantissa_bits
        self.kind = "f"

    def __repr__(self):
        return self.name

    def __call__(self, value):
        return round_to(np.float32(value), self)


bfloat16 = NkiDType("bfloat16", 2, 7)
tfloat32 = NkiDType("tfloat32", 4, 10)
float8_e4m3 = NkiDType("float8_e4m3", 1, 3)
float8_e5m2 = NkiDType("float8_e5m2", 1, 2)

float32 = np.float32
float16 = np.float16
int8, uint8, int16, uint16 = np.int8, np.uint8, np.int16, np.uint16
int32, uint32 = np.int32, np.uint32
bool_ = np.bool_

_BY_NAME = {d.name: d for d in (bfloat16, tfloat32, float8_e4m3, float8_e5m2)}


_RESOLVED = {}  # hashable spelling (np.float32, "float32", np.dtype) -> resolved dtype


def resolve(dtype):
    """Returns a NumPy dtype or an NkiDType for any accepted dtype spelling."""
    try:
        return _RESOLVED[dtype]  # runs for every instruction: memoised
    except (KeyError, TypeError):
        pass
    if dtype is None:
        return None
    if isinstance(dtype, NkiDType):
        out = dtype
    elif isinstance(dtype, str) and dtype in _BY_NAME:
        out = _BY_NAME[dtype]
    else:
        out = np.dtype(dtype)
    try:
        if len(_RESOLVED) < 256:
            _RESOLVED[dtype] = out
    except TypeError:
        pass
    return out


def storage(dtype):
    """NumPy dtype used to hold values of ``dtype``."""
    dtype = resolve(dtype)
    return dtype.storage if isinstance(dtype, NkiDType) else dtype


def itemsize(dtype):
    """Device bytes per element of ``dtype``."""
    dtype = resolve(dtype)
    return dtype.itemsize


def name(dtype):
    """Printable name (``float32``, ``bfloat16``, ...)."""
    dtype = resolve(dtype)
    return dtype.name


def is_float(dtype):
    """True for floating-point dtypes (incl. the emulated ones)."""
    return resolve(dtype).kind == "f"


def round_to(values, dtype):
    """Rounds float32 ``values`` (array or scalar) to ``dtype``'s mantissa, RNE.

    Only emulated dtypes are affected; NumPy dtypes are returned cast.
    """
    dtype = resolve(dtype)
    if not isinstance(dtype, NkiDType):
        return np.asarray(values).astype(dtype, copy=False)
    arr = np.ascontiguousarray(values, dtype=np.float32)
    drop = 23 - dtype.mantissa_bits
    bits = arr.view(np.uint32).astype(np.uint64)
    lsb = (bits >> drop) & 1
    bits = ((bits + ((1 << (drop - 1)) - 1) + lsb) >> drop) << drop
    out = (bits & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    finite = np.isfinite(arr)
    return np.where(finite, out, arr).reshape(np.shape(values))


def promote(a, b):
    """Result dtype of a binary op on dtypes a, b (nki-facts §2.8; fp16+bf16 -> fp32)."""
    a, b = resolve(a), resolve(b)
    if a is None:
        return b
    if b is None or a == b:
        return a
    if is_float(a) and not is_float(b):
        return a
    if is_float(b) and not is_float(a):
        return b
    if is_float(a) and is_float(b):
        if isinstance(a, NkiDType) or isinstance(b, NkiDType):
            if {name(a), name(b)} == {"float8_e4m3", "float8_e5m2"}:
                return bfloat16
            wider = a if itemsize(a) > itemsize(b) else b
            if itemsize(a) == itemsize(b):
                return np.dtype(np.float32)
            return wider
        return np.promote_types(a, b)
    if {a, b} == {np.dtype(np.int32), np.dtype(np.uint32)}:
        return np.dtype(np.float32)
    return np.promote_types(a, b)


def scalar_dtype(value):
    """Weak type of a Python/NumPy scalar (nki-facts §2.8: int32, float32, uint8)."""
    if isinstance(value, np.generic):
        return value.dtype
    if isinstance(value, bool):
        return np.dtype(np.uint8)
    if isinstance(value, int):
        return np.dtype(np.int32)
    return np.dtype(np.float32)

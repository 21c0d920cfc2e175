"""Arrays and scalars <-> JSON-safe values for the host<->worker pipe.

Arrays travel as base64 ``.npy`` (``allow_pickle=False`` both ways), so a
worker can only ever hand back plain numeric data: lazy objects, ndarray
subclasses and object arrays are materialised or refused in the worker.
"""
import base64
import hashlib
import io

import numpy as np


class CodecError(ValueError):
    """A value that cannot cross the pipe (object dtype, unsupported type)."""


def encode(value):
    """Returns a JSON-safe dict for an array, NumPy scalar or Python int/float/bool.

    Arrays: ``{"npy": base64}``; Python scalars: ``{"py": value}`` (a
    non-finite float goes as npy so it survives JSON). Raises CodecError for
    anything else (including object arrays).
    """
    if isinstance(value, (bool, int)) and not isinstance(value, np.generic):
        return {"py": value}
    if isinstance(value, float) and np.isfinite(value):
        return {"py": value}
    try:
        array = np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - anything that is not array-like
        raise CodecError(f"cannot encode {type(value).__name__}: {exc}") from exc
    if array.dtype.kind not in "biufc":
        raise CodecError(f"cannot encode a value of dtype {array.dtype} ({type(value).__name__})")
    buffer = io.BytesIO()
    np.save(buffer, array if array.flags.c_contiguous else np.array(array, order="C"), allow_pickle=False)
    out = {"npy": base64.b64encode(buffer.getvalue()).decode("ascii")}
    if not isinstance(value, np.ndarray):
        out["scalar"] = True
    return out


def decode(obj):
    """Inverse of :func:`encode`: a fresh, writeable ndarray (or a Python/NumPy scalar)."""
    if not isinstance(obj, dict):
        raise CodecError(f"malformed encoded value: {type(obj).__name__}")
    if "py" in obj:
        return obj["py"]
    raw = base64.b64decode(obj["npy"])
    array = np.load(io.BytesIO(raw), allow_pickle=False)
    if obj.get("scalar"):
        return array[()]
    return np.array(array, copy=True)


def digest(value):
    """SHA-256 (hex) of a value's dtype, shape and bytes; "" for Python scalars."""
    if not isinstance(value, np.ndarray):
        return ""
    h = hashlib.sha256()
    h.update(str(value.dtype).encode())
    h.update(str(value.shape).encode())
    h.update(value.tobytes())
    return h.hexdigest()

"""Arrays and scalars <-> JSON-safe descriptors plus raw bytes, for the host<->worker pipe.

An array crosses the pipe as a descriptor ``{"blob": i, "dtype": "<f4",
"shape": [m, n]}`` in the JSON part of a frame and its raw C-order bytes as
attachment ``i`` (host/src/worker/protocol.h): one copy each way, no text
encoding. Only plain numeric dtypes travel, so a worker can only ever hand
back numeric data: lazy objects, ndarray subclasses and object arrays are
materialised or refused, and :func:`decode` checks every descriptor against
its attachment.

Functions called across the pipe with attachments follow the *packed*
convention: ``fn(arg, blobs) -> (value, blobs)``, where ``blobs`` is a list
of buffers (``bytes`` in, any C-contiguous buffer out). Mark them with
:func:`packed`.
"""
import hashlib
import math

import numpy as np

_NUMERIC_KINDS = "biufc"


class CodecError(ValueError):
    """A value that cannot cross the pipe (object dtype, unsupported type, malformed descriptor)."""


def packed(function):
    """Marks ``function`` as taking ``(arg, blobs)`` and returning ``(value, blobs)``."""
    function.packed = True
    return function


def encode(value, blobs):
    """Returns a JSON-safe descriptor of ``value`` and appends its bytes to ``blobs`` (list).

    Python bool/int and finite floats: ``{"py": value}`` (no attachment).
    Arrays and NumPy scalars (and non-finite floats, which JSON cannot
    carry): ``{"blob", "dtype", "shape"}`` plus ``"scalar": true`` for a
    0-d value that was not an ndarray. Raises CodecError for anything else
    (strings, dicts, object or structured arrays).
    """
    if isinstance(value, (bool, int)) and not isinstance(value, np.generic):
        return {"py": value}
    if isinstance(value, float) and math.isfinite(value):
        return {"py": value}
    try:
        array = np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - anything that is not array-like
        raise CodecError(f"cannot encode {type(value).__name__}: {exc}") from exc
    if array.dtype.kind not in _NUMERIC_KINDS or array.dtype.fields is not None:
        raise CodecError(f"cannot encode a value of dtype {array.dtype} ({type(value).__name__})")
    if not array.flags.c_contiguous:
        array = array.copy(order="C")
    out = {"blob": len(blobs), "dtype": array.dtype.str, "shape": list(array.shape)}
    blobs.append(array)  # the host copies the buffer once, straight from the array
    if not isinstance(value, np.ndarray):
        out["scalar"] = True
    return out


def decode(obj, blobs, copy=True):
    """Inverse of :func:`encode`: a fresh, writeable ndarray (or a Python/NumPy scalar).

    ``blobs``: the frame's attachments (buffers). With ``copy=False`` an
    array is a read-only view of its attachment instead (the trusted judge
    only reads outputs). Raises CodecError when the
    descriptor is malformed, names a non-numeric dtype or does not match its
    attachment's size.
    """
    if not isinstance(obj, dict):
        raise CodecError(f"malformed encoded value: {type(obj).__name__}")
    if "py" in obj:
        value = obj["py"]
        if not isinstance(value, (bool, int, float)):
            raise CodecError(f"malformed encoded scalar: {type(value).__name__}")
        return value
    try:
        index = int(obj["blob"])
        dtype = np.dtype(str(obj["dtype"]))
        shape = tuple(int(n) for n in obj["shape"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CodecError(f"malformed array descriptor: {exc}") from exc
    if dtype.kind not in _NUMERIC_KINDS or dtype.fields is not None or dtype.hasobject:
        raise CodecError(f"refused dtype {dtype}")
    if not 0 <= index < len(blobs) or any(n < 0 for n in shape):
        raise CodecError(f"array descriptor out of range (blob {index}, shape {shape})")
    buffer = memoryview(blobs[index]).cast("B")
    if buffer.nbytes != math.prod(shape) * dtype.itemsize:
        raise CodecError(f"attachment {index} has {buffer.nbytes} bytes, not the {shape} {dtype} it claims")
    array = np.frombuffer(buffer, dtype=dtype).reshape(shape)
    if copy:
        array = array.copy()
    elif array.flags.writeable:
        array.flags.writeable = False
    if obj.get("scalar"):
        return array[()]
    return array


def digest(value):
    """SHA-256 (hex) of a value's dtype, shape and bytes; "" for Python scalars."""
    if not isinstance(value, np.ndarray):
        return ""
    h = hashlib.sha256()
    h.update(str(value.dtype).encode())
    h.update(str(value.shape).encode())
    h.update(np.ascontiguousarray(value).data)
    return h.hexdigest()

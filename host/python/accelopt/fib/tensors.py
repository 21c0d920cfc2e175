"""Torch tensors <-> JSON-safe descriptors plus raw bytes, for the host<->worker pipe.

The same idea as :mod:`accelopt.sandbox.codec` (NumPy), for torch: a tensor
crosses as ``{"blob": i, "dtype": <FIB dtype or torch name>, "shape": [...]}``
plus its C-order bytes as attachment ``i``; bfloat16 and the float8 types,
which NumPy lacks, travel as integers of the same width. Python scalars are
``{"py": v}`` (non-finite floats ``{"float": "inf"|"-inf"|"nan"}``), lists and
tuples ``{"list": [...]}``. Only plain tensors travel: a subclass or any other
object is refused (:class:`CodecError`), so a worker hands back numbers only.
"""
import math

import numpy as np
import torch

# FIB dtype name -> torch attribute (flashinfer-facts §1.1). float4_e2m1 packs two values per byte.
FIB_TO_TORCH = {
    "float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2", "float4_e2m1": "float4_e2m1fn_x2", "int64": "int64", "int32": "int32",
    "int16": "int16", "int8": "int8", "bool": "bool",
}
_CARRIER = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_NUMPY_CARRIER = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}


class CodecError(ValueError):
    """A value that cannot cross the pipe."""


class UnsupportedDType(RuntimeError):
    """A FIB dtype this torch does not have (Debian's torch 1.13 has no float8/float4)."""


def torch_dtype(name):
    """The torch dtype of FIB dtype ``name``; raises UnsupportedDType when this torch lacks it."""
    attr = FIB_TO_TORCH.get(name, name)
    dtype = getattr(torch, attr, None)
    if not isinstance(dtype, torch.dtype):
        raise UnsupportedDType(f"dtype {name} is not available in torch {torch.__version__}")
    return dtype


def dtype_name(dtype):
    """FIB's name of a torch dtype (the torch name when FIB has none)."""
    text = str(dtype).replace("torch.", "")
    for fib, attr in FIB_TO_TORCH.items():
        if attr == text:
            return fib
    return text


def _itemsize(dtype):
    return torch.empty((), dtype=dtype).element_size()


def encode(value, blobs):
    """A JSON-safe descriptor of ``value``; tensor bytes are appended to ``blobs`` (list)."""
    if isinstance(value, bool) or (isinstance(value, int) and not isinstance(value, bool)):
        return {"py": value}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"py": value}
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, (list, tuple)):
        return {"list": [encode(v, blobs) for v in value]}
    if type(value) is not torch.Tensor:  # noqa: E721 - exactly a tensor, no subclass
        raise CodecError(f"cannot send a {type(value).__name__}")
    tensor = value.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    tensor = tensor.contiguous()
    size = _itemsize(tensor.dtype)
    if tensor.is_complex() or size not in _CARRIER:
        raise CodecError(f"cannot send a tensor of dtype {tensor.dtype}")
    flat = tensor.reshape(-1)
    raw = flat.view(_CARRIER[size]) if flat.dtype != _CARRIER[size] else flat
    out = {"blob": len(blobs), "dtype": dtype_name(tensor.dtype), "shape": list(tensor.shape)}
    blobs.append(raw.numpy())
    return out


def decode(obj, blobs, copy=True):
    """Inverse of :func:`encode`: fresh tensors (read-only views into the attachment with ``copy=False``)."""
    if not isinstance(obj, dict):
        raise CodecError(f"malformed encoded value: {type(obj).__name__}")
    if "py" in obj:
        value = obj["py"]
        if not isinstance(value, (bool, int, float)):
            raise CodecError("malformed encoded scalar")
        return value
    if "float" in obj:
        return float(obj["float"])
    if "list" in obj:
        return [decode(v, blobs, copy) for v in obj["list"]]
    try:
        index = int(obj["blob"])
        dtype = torch_dtype(str(obj["dtype"]))
        shape = tuple(int(n) for n in obj["shape"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CodecError(f"malformed tensor descriptor: {exc}") from exc
    if not 0 <= index < len(blobs) or any(n < 0 for n in shape):
        raise CodecError(f"tensor descriptor out of range (blob {index}, shape {shape})")
    size = _itemsize(dtype)
    buffer = memoryview(blobs[index]).cast("B")
    if buffer.nbytes != math.prod(shape) * size:
        raise CodecError(f"attachment {index} has {buffer.nbytes} bytes, not the {shape} {dtype} it claims")
    array = np.frombuffer(buffer, dtype=_NUMPY_CARRIER[size])
    if copy or not array.flags.writeable:
        array = array.copy()  # torch wants writeable memory; the judge's copy is cheap next to a run
    carrier = torch.from_numpy(array)
    tensor = carrier.view(dtype) if dtype != carrier.dtype else carrier
    return tensor.reshape(shape)

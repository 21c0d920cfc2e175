"""Inputs of a FIB workload, drawn as FIB's gen_inputs does, but seeded (flashinfer-facts §2.5).

Runs in the host (trusted). In definition order, per input:

* ``safetensors``: the blob's tensor (path relative to the trace-set root),
  shape and dtype checked against the definition;
* ``scalar``: its value, as a plain Python value;
* ``random`` (and any input the workload leaves out): float32/16/bf16
  N(0, 1); float8/float4 N(0, 1) clamped to [-2, 2] then cast; bool 0 or 1;
  int8 in [-128, 128); int16/32/64 in [-1024, 1024); a shape-null input one
  such value as a Python number; for ``op_type == "sampling"`` the input
  named ``probs`` is softmaxed.

FIB sets no seed; here every trial draws from its own seed
(:func:`trial_seed`), recorded with the trace, so a run can be repeated.
"""
import hashlib
import json
import os
import struct

import numpy as np
import torch

from . import tensors

# safetensors dtype -> (FIB dtype, NumPy carrier of the same width)
_SAFETENSORS = {
    "F32": ("float32", np.float32), "F16": ("float16", np.float16), "BF16": ("bfloat16", np.int16),
    "F8_E4M3": ("float8_e4m3fn", np.uint8), "F8_E5M2": ("float8_e5m2", np.uint8), "I64": ("int64", np.int64),
    "I32": ("int32", np.int32), "I16": ("int16", np.int16), "I8": ("int8", np.int8), "BOOL": ("bool", np.bool_),
}


class InputError(RuntimeError):
    """An input that cannot be built (missing blob, wrong shape or dtype, a dtype torch lacks)."""


def trial_seed(seed, uuid, trial):
    """The seed of one trial's random inputs: SHA-256 of ``"<seed>/<uuid>/<trial>"``, 63 bits."""
    digest = hashlib.sha256(f"{seed}/{uuid}/{trial}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def axis_values(definition, workload):
    """{axis: int} for every axis: const values from the definition, var values from the workload."""
    values = {}
    for name, axis in definition["axes"].items():
        if axis.get("type", "const" if "value" in axis else "var") == "const":
            values[name] = int(axis["value"])
    for name, value in (workload.get("axes") or {}).items():
        values[name] = int(value)
    return values


def shape_of(spec, axes):
    """The concrete shape of a TensorSpec (None for a scalar); raises InputError for a missing axis."""
    if spec.get("shape") is None:
        return None
    try:
        return tuple(axes[a] for a in spec["shape"])
    except KeyError as exc:
        raise InputError(f"missing value for variable axis {exc.args[0]!r}") from exc


def output_specs(definition, workload):
    """[{"name", "shape", "dtype"}] of the definition's outputs for this workload."""
    axes = axis_values(definition, workload)
    return [{"name": name, "shape": shape_of(spec, axes), "dtype": spec["dtype"]}
            for name, spec in definition["outputs"].items()]


def read_safetensors(path):
    """{key: (fib dtype, shape, bytes)} of a safetensors file (raises InputError)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
            if head.startswith(b"version "):
                raise InputError(f"{path} is a Git-LFS pointer, not the data (git lfs pull --include it)")
            if len(head) != 8:
                raise InputError(f"{path}: shorter than 8 bytes")
            (size,) = struct.unpack("<Q", head)
            header = json.loads(handle.read(size))
            data = handle.read()
    except OSError as exc:
        raise InputError(f"cannot read blob {path}: {exc}") from exc
    except ValueError as exc:
        raise InputError(f"{path}: the header is not JSON: {exc}") from exc
    out = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        out[key] = (entry["dtype"], tuple(entry["shape"]), data[begin:end])
    return out


class BlobCache:
    """Safetensors files read once per evaluation (a workload's blob serves every trial)."""

    def __init__(self):
        self._files = {}

    def tensor(self, root, path, key):
        full = path if os.path.isabs(path) else os.path.normpath(os.path.join(root, path))
        if full not in self._files:
            self._files[full] = read_safetensors(full)
        entries = self._files[full]
        if key not in entries:
            raise InputError(f"tensor key {key!r} not found in {path}")
        st_dtype, shape, raw = entries[key]
        if st_dtype not in _SAFETENSORS:
            raise InputError(f"{path}:{key} has dtype {st_dtype}, which FIB has no name for")
        fib_dtype, carrier = _SAFETENSORS[st_dtype]
        array = np.frombuffer(raw, dtype=carrier).reshape(shape).copy()
        tensor = torch.from_numpy(array)
        target = tensors.torch_dtype(fib_dtype)
        return fib_dtype, (tensor.view(target) if tensor.dtype != target else tensor)


def _random_tensor(shape, dtype_name, generator):
    dtype = tensors.torch_dtype(dtype_name)
    if dtype_name in ("float32", "float16", "bfloat16"):
        return torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype)
    if dtype_name.startswith("float8") or dtype_name.startswith("float4"):
        return torch.randn(shape, generator=generator, dtype=torch.float32).clamp(-2, 2).to(dtype)
    if dtype_name == "bool":
        return torch.randint(0, 2, shape, generator=generator, dtype=torch.int64).to(torch.bool)
    if dtype_name == "int8":
        return torch.randint(-128, 128, shape, generator=generator, dtype=torch.int64).to(dtype)
    return torch.randint(-1024, 1024, shape, generator=generator, dtype=torch.int64).to(dtype)


def _random_scalar(dtype_name, generator):
    value = _random_tensor((), dtype_name, generator)
    return value.item()


def make_inputs(definition, workload, root, seed, blobs=None):
    """The inputs of one trial, in definition order (tensors or Python scalars); raises InputError.

    ``seed``: the trial's seed (:func:`trial_seed`); ``root``: the trace-set
    root safetensors paths are relative to; ``blobs``: a :class:`BlobCache`.
    """
    blobs = blobs or BlobCache()
    axes = axis_values(definition, workload)
    generator = torch.Generator().manual_seed(int(seed))
    described = workload.get("inputs") or {}
    out = []
    for name, spec in definition["inputs"].items():
        desc = described.get(name) or {"type": "random"}
        kind = desc.get("type") or ("safetensors" if "path" in desc else "scalar" if "value" in desc else "random")
        shape = shape_of(spec, axes)
        try:
            if kind == "scalar":
                out.append(desc["value"])
            elif kind == "safetensors":
                dtype, tensor = blobs.tensor(root, desc["path"], desc["tensor_key"])
                if dtype != spec["dtype"]:
                    raise InputError(f"input {name}: the blob holds {dtype}, the definition says {spec['dtype']}")
                if shape is not None and tuple(tensor.shape) != tuple(shape):
                    raise InputError(f"input {name}: the blob's shape {tuple(tensor.shape)} is not {tuple(shape)}")
                out.append(tensor)
            elif shape is None:
                out.append(_random_scalar(spec["dtype"], generator))
            else:
                value = _random_tensor(shape, spec["dtype"], generator)
                if definition.get("op_type") == "sampling" and name == "probs":
                    value = torch.softmax(value.float(), dim=-1).to(value.dtype)
                out.append(value)
        except tensors.UnsupportedDType as exc:
            raise InputError(f"input {name}: {exc}") from exc
    return out


def digest(value):
    """SHA-256 (hex) of a tensor's dtype, shape and bytes; "" for a Python scalar."""
    if not isinstance(value, torch.Tensor):
        return ""
    t = value.detach().contiguous()
    h = hashlib.sha256(f"{t.dtype}{tuple(t.shape)}".encode())
    flat = t.reshape(-1)
    size = flat.element_size()
    carrier = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    h.update(memoryview(flat.view(carrier).numpy()).cast("B"))
    return h.hexdigest()



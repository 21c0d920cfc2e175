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

A workload's axes are data: ``batch_size = 1e8`` would make the host draw
gigabytes. :func:`check_workload_bytes` sizes everything the host will hold
for a workload from the shapes alone, before anything is allocated or read,
and refuses a workload over the cap (:func:`default_workload_bytes`, or the
evaluation's ``max_workload_bytes``) naming the workload and its axes.
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


# Bytes per element of each FIB dtype (float4_e2m1: two values per byte, counted as one byte).
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "float4_e2m1": 1,
                "int64": 8, "int32": 4, "int16": 2, "int8": 1, "bool": 1}
# Random inputs of these dtypes are drawn in float32 first (randn), then cast.
_FLOAT_DRAWN = {"float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1"}
# safetensors caps its JSON header at 100 MB; a larger length field is a broken or hostile file.
_MAX_HEADER = 100 * 1000 * 1000


def default_workload_bytes():
    """The default cap on what the host holds for one workload: a quarter of the machine's memory,
    at most 8 GiB (2 GiB when /proc/meminfo cannot be read)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return min(int(line.split()[1]) * 1024 // 4, 8 << 30)
    except (OSError, ValueError, IndexError):
        pass
    return 2 << 30


def _size_text(n):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def check_workload_bytes(definition, workload, trials, cap=None):
    """Raises InputError when one workload would make the host hold more than ``cap`` bytes.

    Counted from the shapes, nothing allocated: every trial's inputs and the
    reference outputs kept for it, plus the float32 draw of the largest random
    input (randn draws in float32, then casts). The message names the
    workload, the var axes that size the largest tensor and their values, and
    the parameter that raises the cap. Returns the count.
    """
    cap = int(cap) if cap else default_workload_bytes()
    axes = axis_values(definition, workload)
    described = workload.get("inputs") or {}
    per_trial, transient, largest = 0, 0, None
    for group in ("inputs", "outputs"):
        for name, spec in (definition.get(group) or {}).items():
            shape = shape_of(spec, axes)
            if shape is None:
                continue
            numel = 1
            for extent in shape:
                numel *= int(extent)
            size = numel * _DTYPE_BYTES.get(spec.get("dtype"), 8)
            per_trial += size
            if largest is None or size > largest[2]:
                largest = (name, shape, size, spec.get("dtype"))
            kind = (described.get(name) or {}).get("type", "random") if group == "inputs" else "output"
            if kind == "random" and spec.get("dtype") in _FLOAT_DRAWN:
                transient = max(transient, numel * 4)
    total = max(1, int(trials)) * per_trial + transient
    if total <= cap:
        return total
    name, shape, size, dtype = largest
    var = workload.get("axes") or {}
    spec = (definition.get("inputs") or {}).get(name) or (definition.get("outputs") or {}).get(name) or {}
    sized_by = [a for a in dict.fromkeys(spec.get("shape") or []) if a in var]
    if sized_by:
        why = (f"axis {', '.join(f'{a} = {axes[a]}' for a in sized_by)} makes {name} {list(shape)} {dtype} "
               f"{_size_text(size)}")
    else:
        why = (f"axes {', '.join(f'{a} = {v}' for a, v in var.items()) or '(none)'}; the largest tensor is {name} "
               f"{list(shape)} {dtype} {_size_text(size)}")
    raise InputError(
        f"workload {workload.get('uuid', '?')}: needs {_size_text(total)} in the host ({max(1, int(trials))} trial(s) "
        f"x {_size_text(per_trial)} of inputs and reference outputs"
        + (f", + {_size_text(transient)} to draw the largest random input" if transient else "")
        + f"), over the cap of {_size_text(cap)} (fib_evaluate's max_workload_bytes): {why}; nothing was allocated")


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


def read_safetensors_header(path):
    """{key: (safetensors dtype, shape, absolute begin, end)} of a safetensors file (raises InputError);
    reads the header only."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
            if head.startswith(b"version "):
                raise InputError(f"{path} is a Git-LFS pointer, not the data (git lfs pull --include it)")
            if len(head) != 8:
                raise InputError(f"{path}: shorter than 8 bytes")
            (size,) = struct.unpack("<Q", head)
            if size > _MAX_HEADER:
                raise InputError(f"{path}: header length {size} is over safetensors' 100 MB")
            header = json.loads(handle.read(size))
    except OSError as exc:
        raise InputError(f"cannot read blob {path}: {exc}") from exc
    except ValueError as exc:
        raise InputError(f"{path}: the header is not JSON: {exc}") from exc
    out = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        try:
            begin, end = (int(v) for v in entry["data_offsets"])
            out[key] = (entry["dtype"], tuple(int(n) for n in entry["shape"]), 8 + size + begin, 8 + size + end)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{path}: tensor {key!r} has a malformed header entry") from exc
    return out


def read_safetensors(path):
    """{key: (fib dtype, shape, bytes)} of a safetensors file (raises InputError)."""
    out = {}
    with open(path, "rb") as handle:
        for key, (dtype, shape, begin, end) in read_safetensors_header(path).items():
            handle.seek(begin)
            out[key] = (dtype, shape, handle.read(max(0, end - begin)))
    return out


class BlobCache:
    """Safetensors headers read once per evaluation; a tensor's bytes are read when it is asked for,
    after its shape and dtype were checked, so a large blob is never read whole."""

    def __init__(self):
        self._headers = {}

    def tensor(self, root, path, key, expected_shape=None, expected_dtype=None):
        full = path if os.path.isabs(path) else os.path.normpath(os.path.join(root, path))
        if full not in self._headers:
            self._headers[full] = read_safetensors_header(full)
        entries = self._headers[full]
        if key not in entries:
            raise InputError(f"tensor key {key!r} not found in {path}")
        st_dtype, shape, begin, end = entries[key]
        if st_dtype not in _SAFETENSORS:
            raise InputError(f"{path}:{key} has dtype {st_dtype}, which FIB has no name for")
        fib_dtype, carrier = _SAFETENSORS[st_dtype]
        if expected_dtype is not None and fib_dtype != expected_dtype:
            return fib_dtype, None
        if expected_shape is not None and tuple(shape) != tuple(expected_shape):
            return fib_dtype, tuple(shape)
        count = 1
        for extent in shape:
            count *= extent
        if end - begin != count * np.dtype(carrier).itemsize:
            raise InputError(f"{path}:{key}: data_offsets give {end - begin} bytes, the shape {list(shape)} needs "
                             f"{count * np.dtype(carrier).itemsize}")
        with open(full, "rb") as handle:
            handle.seek(begin)
            raw = handle.read(end - begin)
        if len(raw) != end - begin:
            raise InputError(f"{path}:{key}: the file ends before the tensor's data")
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
                # Shape and dtype are checked against the header before the data is read.
                dtype, tensor = blobs.tensor(root, desc["path"], desc["tensor_key"], shape, spec["dtype"])
                if dtype != spec["dtype"]:
                    raise InputError(f"input {name}: the blob holds {dtype}, the definition says {spec['dtype']}")
                if not isinstance(tensor, torch.Tensor):
                    raise InputError(f"input {name}: the blob's shape {tensor} is not {tuple(shape or ())}")
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



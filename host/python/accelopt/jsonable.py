"""Conversion of profile values to plain JSON types."""
import dataclasses
import math

import numpy as np


def to_json(value):
    """Returns ``value`` as JSON-compatible Python data, or None if it has no JSON form.

    NumPy scalars/0-d arrays become int/float/bool; dicts (str keys), lists,
    tuples and dataclasses are converted recursively, dropping entries that
    have no JSON form; non-finite floats become None.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return to_json(value.item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            converted = to_json(item)
            if converted is not None or item is None:
                out[str(key)] = converted
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    return None


def record_to_dict(record):
    """Returns the fields of a profile record (dict, dataclass, or object) as a dict.

    Objects are read through ``to_dict()`` if present, else their public attributes.
    """
    if isinstance(record, dict):
        return dict(record)
    if hasattr(record, "to_dict") and callable(record.to_dict):
        return dict(record.to_dict())
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    if hasattr(record, "__dict__"):
        return {k: v for k, v in vars(record).items() if not k.startswith("_")}
    raise TypeError(f"cannot read profile of type {type(record).__name__}")

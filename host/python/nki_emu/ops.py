"""Element-wise math shared by ``nki.language`` and ``nki.isa``.

Each :class:`Op` is both a callable ``nl.<name>`` API function and an ``op=``
value for ISA calls; ``np_fn`` is its NumPy semantics (evaluated in float32,
nki-facts §2.6: "math in fp32"). Functions for the activation table follow
``nki.api.shared.rst`` (SDK 2.24).
"""
import math

import numpy as np


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / np.float32(math.sqrt(2.0))))


def _gelu_tanh(x):
    c = np.float32(math.sqrt(2.0 / math.pi))
    return 0.5 * x * (1.0 + np.tanh(c * (x + np.float32(0.044715) * x * x * x)))


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _erf(x):
    return _ERF(x).astype(np.float32)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _silu(x):
    return x * _sigmoid(x)


def _softplus(x):
    return np.logaddexp(np.float32(0), x)


def _mish(x):
    return x * np.tanh(_softplus(x))


UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "square": np.square, "reciprocal": np.reciprocal, "sigmoid": _sigmoid, "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0), "gelu": _gelu, "gelu_apprx_tanh": _gelu_tanh,
    "silu": _silu, "softplus": _softplus, "mish": _mish, "erf": _erf, "abs": np.abs,
    "sign": np.sign, "sin": np.sin, "cos": np.cos, "tan": np.tan, "arctan": np.arctan,
    "negative": np.negative, "copy": lambda x: x, "identity": lambda x: x,
    "ceil": np.ceil, "floor": np.floor, "trunc": np.trunc,
    "gelu_dx": lambda x: _gelu_dx(x),
    "silu_dx": lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))),
    "erf_dx": lambda x: np.float32(2.0 / math.sqrt(math.pi)) * np.exp(-x * x),
}


def _gelu_dx(x):
    cdf = 0.5 * (1.0 + _erf(x / np.float32(math.sqrt(2.0))))
    pdf = np.exp(-0.5 * x * x) / np.float32(math.sqrt(2.0 * math.pi))
    return cdf + x * pdf


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power, "max": np.maximum,
    "min": np.minimum, "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal,
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
    "left_shift": np.left_shift, "right_shift": np.right_shift, "mod": np.mod, "fmod": np.fmod,
}

REDUCE = {"add": np.sum, "sum": np.sum, "max": np.max, "maximum": np.max, "min": np.min,
          "minimum": np.min, "multiply": np.prod, "prod": np.prod, "mean": np.mean}

BITVEC = {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"}

# NumPy callables users pass as op= (np.add, np.max, ...), keyed by identity.
_NP_NAMES = {np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide",
             np.maximum: "maximum", np.minimum: "minimum", np.max: "max", np.min: "min",
             np.amax: "max", np.amin: "min", np.power: "power", np.sum: "add", np.exp: "exp",
             np.sqrt: "sqrt", np.square: "square", np.tanh: "tanh", np.log: "log", np.abs: "abs",
             np.reciprocal: "reciprocal", np.sin: "sin", np.cos: "cos", np.negative: "negative",
             np.equal: "equal", np.greater: "greater", np.less: "less",
             np.greater_equal: "greater_equal", np.less_equal: "less_equal",
             np.bitwise_and: "bitwise_and", np.bitwise_or: "bitwise_or", np.prod: "multiply"}
for _name, _fn in BINARY.items():  # every binary ufunc (nl.not_equal(x, 2.0) passes np.not_equal)
    if isinstance(_fn, np.ufunc):
        _NP_NAMES.setdefault(_fn, _name)


def op_name(op):
    """Canonical name of an op given as an nl.* Op, a NumPy function or a string."""
    if isinstance(op, str):
        return op
    name = getattr(op, "op_name", None)
    if name is not None:
        return name
    if op in _NP_NAMES:
        return _NP_NAMES[op]
    raise ValueError(f"unsupported op {op!r}")


def binary(op):
    """NumPy binary function for ``op``."""
    return BINARY[op_name(op)]


def unary(op):
    """NumPy unary function for ``op`` (activation table)."""
    return UNARY[op_name(op)]


def reducer(op):
    """NumPy reduction for ``op`` (``nl.add`` -> np.sum, ``nl.max`` -> np.max)."""
    return REDUCE[op_name(op)]

"""How a candidate's input sets are split into worker passes (issue 14, peak memory).

The trusted host sends a candidate's input sets (five published seeds and the
hidden set) to the worker in *passes*: one worker call per pass, each on a
fresh candidate process, whose outputs come back, are judged and are freed
before the next pass is sent. A pass's sets share one batched emulator call
(accelopt.batched_runs), so small problems keep one pass for all six sets,
while problems whose sets hold hundreds of MB (bmm: 1 GiB of output per set)
run one set per pass and never hold six sets' data in the worker or the host.

The plan depends only on the problem (the byte sizes of one set's inputs and
reference outputs), never on what a candidate reports, so a candidate cannot
steer it (docs/isolation.md).
"""
import hashlib
import os

import numpy as np

# Default bytes of input and output data one pass may hold (all its sets together).
# 256 MiB runs every full-size NKIBench problem whose set holds more than 128 MiB (bmm,
# bmm_softmax, matmul, lora, adamw, rope, silu, transpose_matmul) one set per pass, near
# the per-set peaks of docs/benchmarks/emulator-speed.txt (issue 14: silu, 235 MB a set,
# 720 MB worker peak at 512 MiB with two sets per pass, 383 MB at 256 MiB, wall 14.7 vs
# 15.3 s; docs/benchmarks/candidate-memory.txt).
DEFAULT_PASS_BYTES = 256 << 20
# Environment override of the default (bytes), for experiments and the C++ tests.
PASS_BYTES_ENV = "ACCELOPT_PASS_BYTES"
# Output fingerprints hash at most this many bytes of each output (a strided sample
# beyond it): they only tell identical outputs of different passes apart.
FINGERPRINT_BYTES = 4 << 20


def pass_bytes(options=None):
    """The byte budget of one pass: ``options["pass_bytes"]`` (int > 0) if given, else
    the ACCELOPT_PASS_BYTES environment variable (if not empty), else DEFAULT_PASS_BYTES.
    Raises ValueError when a given value is not a positive integer."""
    value = (options or {}).get("pass_bytes")
    if value is None:
        value = os.environ.get(PASS_BYTES_ENV) or None  # set but empty: the default
    if value is None:
        return DEFAULT_PASS_BYTES
    try:
        number = int(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"pass_bytes must be a positive integer, got {value!r}") from exc
    if isinstance(value, bool) or number <= 0:
        raise ValueError(f"pass_bytes must be a positive integer, got {value!r}")
    return number


def plan(count, set_bytes, budget):
    """Consecutive passes over positions ``0..count-1``.

    ``set_bytes``: bytes of one set's inputs plus outputs (int >= 0); ``budget``:
    bytes one pass may hold. Every pass holds at most ``max(1, budget // set_bytes)``
    sets and the passes are as even as possible (6 sets at 4 per pass: 3 + 3).
    Returns a list of lists of positions, in order.
    """
    if count <= 0:
        return []
    per_pass = count if set_bytes <= 0 else max(1, min(count, budget // set_bytes))
    passes = -(-count // per_pass)
    base, extra = divmod(count, passes)
    out, start = [], 0
    for index in range(passes):
        size = base + (1 if index < extra else 0)
        out.append(list(range(start, start + size)))
        start += size
    return out


def data_bytes(values):
    """Bytes of the arrays in ``values`` (nested lists/tuples; scalars count 0)."""
    total = 0
    for value in values:
        if isinstance(value, (tuple, list)):
            total += data_bytes(value)
        elif isinstance(value, np.ndarray):
            total += int(value.nbytes)
    return total


def fingerprint(values):
    """A digest (hex) of a run's outputs: dtype, shape and bytes of each (an evenly
    strided sample of FINGERPRINT_BYTES for larger outputs). Equal outputs always get
    equal fingerprints; the judge uses it to recognise an output identical to one of an
    earlier pass, whose arrays are freed by then."""
    h = hashlib.sha256()
    for value in values:
        array = np.asarray(value)
        h.update(f"{array.dtype.str}{array.shape}".encode())
        flat = array.reshape(-1)
        if array.nbytes > FINGERPRINT_BYTES:
            step = -(-array.nbytes // FINGERPRINT_BYTES)
            flat = flat[::step]
        h.update(np.ascontiguousarray(flat).view(np.uint8).data)
    return h.hexdigest()

"""Correctness judgement of one seed (accelopt-facts §2.3, with its defects fixed).

Pass iff ``||out - ref||_2 < rel_tol * ||ref||_2`` (norms in float64) for every
output. Differences from AccelOpt: output-count and shape problems, and
NaN/Inf in the kernel output, are distinct errors checked before the norm test;
an all-zero reference passes only on an exact match (AccelOpt can never pass
it); the first failing output stops the check.
"""
import threading

import numpy as np

from . import result as R

# Largest float64 difference buffer kept per thread for the next judge (bytes): a fresh
# buffer of an output's size costs its page faults on every seed.
SCRATCH_BYTES = 256 << 20
# Outputs whose float64 copy exceeds this are judged chunk by chunk (bytes of float64 per
# chunk): a chunk's difference stays in the core's cache between its subtraction and its dot
# product, where a whole-output difference goes out to memory and back (2-3x slower on
# outputs of 100 MB and more; docs/benchmarks/candidate-cost.txt).
CHUNK_BYTES = 2 << 20
_SCRATCH = threading.local()


def as_tuple(value):
    """Returns ``value`` as a tuple (lists/tuples unchanged in order, else a 1-tuple)."""
    if isinstance(value, tuple):
        return value
    if isinstance(value, list):
        return tuple(value)
    return (value,)


def _is_array(value):
    return isinstance(value, np.ndarray) or (hasattr(value, "shape") and hasattr(value, "dtype")
                                             and not np.isscalar(value))


def l2_errors(out, ref):
    """Returns (L2 of out-ref, L2 of ref, max |out-ref|) in float64 for arrays of equal shape."""
    # One float64 temporary for the difference, dot products instead of
    # norm(): the judge runs once per seed for every candidate.
    out, ref = np.asarray(out), np.asarray(ref)
    if out.dtype.kind == "c" or ref.dtype.kind == "c":
        diff = (out.astype(np.complex128) - ref.astype(np.complex128)).ravel()
        return (float(np.linalg.norm(diff)), float(np.linalg.norm(ref.astype(np.complex128).ravel())),
                float(np.max(np.abs(diff))) if diff.size else 0.0)
    diff = np.subtract(out, ref, dtype=np.float64).ravel()
    ref64 = np.asarray(ref, dtype=np.float64).ravel()
    if not diff.size:
        return 0.0, float(np.sqrt(ref64 @ ref64)), 0.0
    return (float(np.sqrt(diff @ diff)), float(np.sqrt(ref64 @ ref64)), float(max(diff.max(), -diff.min())))


def _scratch(shape):
    """A float64 array of ``shape``: this thread's kept buffer when it is small enough."""
    size = int(np.prod(shape))
    if size * 8 > SCRATCH_BYTES:
        return np.empty(shape, np.float64)
    buffer = getattr(_SCRATCH, "buffer", None)
    if buffer is None or buffer.size < size:
        buffer = _SCRATCH.buffer = np.empty(size, np.float64)
    return buffer[:size].reshape(shape)


def _chunks(size):
    """(start, stop) of the chunks a large output is judged in (CHUNK_BYTES of float64 each)."""
    step = max(1, min(CHUNK_BYTES, SCRATCH_BYTES) // 8)
    return [(start, min(size, start + step)) for start in range(0, size, step)]


def _large(array):
    """True when ``array``'s float64 copy exceeds a chunk: it is then judged in chunks (one
    chunk's float64 difference at a time, never a copy of the whole)."""
    return array.size * 8 > min(CHUNK_BYTES, SCRATCH_BYTES)


def _ref_l2(ref):
    """L2 norm of a real reference array in float64 (chunked for large arrays)."""
    ref = np.asarray(ref)
    if not _large(ref):
        ref64 = np.asarray(ref, dtype=np.float64).ravel()
        return float(np.sqrt(ref64 @ ref64))
    flat, total = ref.reshape(-1), 0.0
    for start, stop in _chunks(flat.size):
        part = _scratch((stop - start,))
        part[...] = flat[start:stop]
        total += float(part @ part)
    return float(np.sqrt(total))


def reference_norms(refs):
    """The L2 norm (float64, as :func:`l2_errors` computes it) of each reference output
    that is an array (None for scalars): :func:`compare_outputs`'s ``ref_norms``."""
    out = []
    for ref in refs:
        if _is_array(ref) and np.asarray(ref).dtype.kind != "c":
            out.append(_ref_l2(ref))
        else:
            out.append(None)
    return out


def _judge_array(out_arr, ref, ref_l2, i, seed):
    """(L2 of out-ref, L2 of ref, a function giving max |out-ref|) for a real array
    output; raises nan_inf. One pass over the data: the difference in float64 (into a
    kept buffer; chunk by chunk for outputs larger than it) and its dot product; a
    non-finite sum means a non-finite output (the reference is finite), counted only
    then. Same values as l2_errors (up to the summation order of chunks)."""
    if not _large(out_arr):
        diff = _scratch(out_arr.shape)
        np.subtract(out_arr, ref, out=diff, dtype=np.float64)
        diff = diff.ravel()
        sq = float(diff @ diff) if diff.size else 0.0

        def max_abs():
            return float(max(diff.max(), -diff.min())) if diff.size else 0.0
    else:
        out_flat, ref_flat = out_arr.reshape(-1), np.asarray(ref).reshape(-1)
        sq = 0.0
        for start, stop in _chunks(out_flat.size):
            part = _scratch((stop - start,))
            np.subtract(out_flat[start:stop], ref_flat[start:stop], out=part, dtype=np.float64)
            sq += float(part @ part)

        def max_abs():
            worst = 0.0
            for start, stop in _chunks(out_flat.size):
                part = _scratch((stop - start,))
                np.subtract(out_flat[start:stop], ref_flat[start:stop], out=part, dtype=np.float64)
                worst = max(worst, float(part.max()), -float(part.min()))
            return worst
    if not np.isfinite(sq):
        bad = int(np.size(out_arr) - np.count_nonzero(np.isfinite(out_arr)))
        if bad:
            raise R.HarnessError(R.NAN_INF, f"output {i}: {bad} NaN/Inf value(s) in kernel output (seed {seed})")
    if ref_l2 is None:
        ref_l2 = _ref_l2(ref)
    return float(np.sqrt(sq)), ref_l2, max_abs


def check_reference_outputs(refs):
    """Raises HarnessError(reference_error) if a reference output is not finite."""
    for i, ref in enumerate(refs):
        if _is_array(ref) or isinstance(ref, (float, np.floating)):
            arr = np.asarray(ref)
            if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
                raise R.HarnessError(R.REFERENCE_ERROR,
                                     f"reference output {i} contains NaN or Inf")


def check_count(outs, refs, seed):
    """Raises HarnessError(shape_mismatch) if the kernel returned the wrong number of outputs."""
    if len(outs) != len(refs):
        raise R.HarnessError(R.SHAPE_MISMATCH,
                             f"kernel returned {len(outs)} output(s), reference has {len(refs)} "
                             f"(seed {seed})")


def compare_outputs(outs, refs, rel_tol, seed, ref_norms=None):
    """Checks kernel outputs against reference outputs for one seed.

    ``outs``/``refs``: sequences of equal length (arrays or scalars), the
    kernel's already reshaped by ``transform_nki_outputs``. ``rel_tol``: float.
    ``ref_norms``: :func:`reference_norms` of ``refs`` computed before (a cached
    draw's), or None. Returns the largest relative L2 error over the outputs (float).
    Raises HarnessError with kind shape_mismatch, nan_inf or wrong_result; a
    wrong_result error carries the failing output's ``rel_error`` (float).
    """
    check_count(outs, refs, seed)
    worst = 0.0
    for i, (out, ref) in enumerate(zip(outs, refs)):
        if _is_array(ref):
            out_arr = np.asarray(out)
            if out_arr.shape != ref.shape:
                raise R.HarnessError(R.SHAPE_MISMATCH,
                                     f"output {i}: kernel shape {tuple(out_arr.shape)} != reference "
                                     f"shape {tuple(ref.shape)} (seed {seed})")
            if out_arr.dtype.kind not in "biufc":
                raise R.HarnessError(R.SHAPE_MISMATCH,
                                     f"output {i}: kernel dtype {out_arr.dtype} is not numeric (seed {seed})")
        else:
            out_arr = np.asarray(out)
            if out_arr.size != 1:
                raise R.HarnessError(R.SHAPE_MISMATCH,
                                     f"output {i}: kernel returned shape {tuple(out_arr.shape)}, "
                                     f"reference is a scalar (seed {seed})")
            if not isinstance(ref, (float, np.floating)) and not np.issubdtype(out_arr.dtype, np.floating):
                if out_arr.reshape(()).item() != ref:
                    raise R.HarnessError(R.WRONG_RESULT,
                                         f"output {i}: {out_arr.reshape(()).item()!r} != {ref!r} (seed {seed})")
                continue
        max_abs_of = None
        if _is_array(ref) and out_arr.dtype.kind != "c" and np.asarray(ref).dtype.kind != "c":
            diff_l2, ref_l2, max_abs_of = _judge_array(out_arr, ref, ref_norms[i] if ref_norms else None, i, seed)
            max_abs = None
        else:
            if out_arr.dtype.kind in "fc" and not np.all(np.isfinite(out_arr)):
                bad = int(np.size(out_arr) - np.count_nonzero(np.isfinite(out_arr)))
                raise R.HarnessError(R.NAN_INF,
                                     f"output {i}: {bad} NaN/Inf value(s) in kernel output (seed {seed})")
            diff_l2, ref_l2, max_abs = l2_errors(out_arr, ref)
        rel = diff_l2 / ref_l2 if ref_l2 > 0 else (0.0 if diff_l2 == 0 else float("inf"))
        worst = max(worst, rel)
        passed = diff_l2 < rel_tol * ref_l2 or (ref_l2 == 0 and diff_l2 == 0)
        if not passed:
            if max_abs is None:
                max_abs = max_abs_of()
            error = R.HarnessError(R.WRONG_RESULT,
                                   f"output {i}: L2 relative error {rel:.3e} >= rel_tol {rel_tol:.1e} "
                                   f"(max abs diff {max_abs:.4e}, L2 diff {diff_l2:.4e}, "
                                   f"L2 ref {ref_l2:.4e}, seed {seed})")
            error.rel_error = rel
            raise error
    return worst

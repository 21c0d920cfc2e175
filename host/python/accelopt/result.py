"""Result records and error kinds of the profiling harness.

The result layout is the contract of docs/architecture.md ("Python profiling
harness"); every failure becomes ``result["error"] = {"kind", "message",
"traceback"}`` instead of an exception.
"""
import traceback as _traceback

COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
SHAPE_MISMATCH = "shape_mismatch"
NAN_INF = "nan_inf"
WRONG_RESULT = "wrong_result"
PRECISION_DOWNGRADE = "precision_downgrade"
REFERENCE_ERROR = "reference_error"
TIMING_ERROR = "timing_error"
# An output element no store/DMA wrote, or an output that is not an HBM tensor: work
# done outside the instruction stream (nki_emu.coverage, docs/isolation.md).
UNWRITTEN_OUTPUT = "unwritten_output"

ERROR_KINDS = (COMPILE_ERROR, RUNTIME_ERROR, SHAPE_MISMATCH, NAN_INF, WRONG_RESULT,
               PRECISION_DOWNGRADE, REFERENCE_ERROR, TIMING_ERROR, UNWRITTEN_OUTPUT)


class HarnessError(Exception):
    """A classified failure: ``kind`` is one of ERROR_KINDS.

    ``tb`` is the formatted traceback of the underlying exception ("" if none).
    """

    def __init__(self, kind, message, tb=""):
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.tb = tb


def format_exception(exc):
    """Returns the full traceback text of ``exc`` (str)."""
    return "".join(_traceback.format_exception(type(exc), exc, exc.__traceback__))


def new_result(backend, target):
    """Returns an empty result dict: nothing compiled, nothing measured yet."""
    return {
        "compiled": False,
        "correct": False,
        "latency_ms": None,
        "estimated": False,
        "backend": backend,
        "target": target,
        "metrics": {},
        "rel_errors": [],
        "error": None,
    }


def set_error(result, kind, message, tb=""):
    """Stores an error of ``kind`` in ``result`` (mutates and returns it)."""
    result["error"] = {"kind": kind, "message": str(message), "traceback": tb or ""}
    return result

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
# Hardware: the NeuronCore is held by another process (the environment's fault, not the
# kernel's; docs/trainium.md), and a kernel the installed SDK cannot run at all.
DEVICE_UNAVAILABLE = "device_unavailable"
CONFIG_ERROR = "config_error"

ERROR_KINDS = (COMPILE_ERROR, RUNTIME_ERROR, SHAPE_MISMATCH, NAN_INF, WRONG_RESULT,
               PRECISION_DOWNGRADE, REFERENCE_ERROR, TIMING_ERROR, UNWRITTEN_OUTPUT, DEVICE_UNAVAILABLE,
               CONFIG_ERROR)


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


# Longest exception message kept, in characters: a candidate's exception may
# carry hundreds of MiB, which must be cut before any copy or search of it.
MAX_MESSAGE = 64 * 1024


def cut_text(text, limit=MAX_MESSAGE):
    """``text`` (str) cut to ``limit`` characters, saying how many were cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit} more characters cut]"


def exception_text(exc):
    """``"Type: message"`` of ``exc`` with the message cut to MAX_MESSAGE characters."""
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a hostile __str__
        message = "<unprintable exception>"
    return f"{type(exc).__name__}: {cut_text(message)}"


def format_exception(exc):
    """Returns the traceback text of ``exc`` and its causes (str).

    Bounded whatever the exception holds: at most 8 chained exceptions, 64
    frames each, every message cut to MAX_MESSAGE characters.
    """
    chain, seen, current = [], set(), exc
    while current is not None and id(current) not in seen and len(chain) < 8:
        chain.append(current)
        seen.add(id(current))
        cause = current.__cause__
        current = cause if cause is not None else (None if current.__suppress_context__ else current.__context__)
    parts = []
    for index, item in enumerate(reversed(chain)):
        if index:
            parts.append("\nDuring handling of the above exception, another exception occurred:\n\n")
        frames = _traceback.extract_tb(item.__traceback__, limit=-64)
        if frames:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(_traceback.format_list(frames))
        parts.append(exception_text(item) + "\n")
    return "".join(parts)


def input_shapes(nki_inputs):
    """The shape of each kernel argument (list of lists of int; [] for a scalar argument), as
    the result's ``input_shapes`` reports it."""
    return [[int(n) for n in getattr(value, "shape", ())] for value in nki_inputs]


def new_result(backend, target):
    """Returns an empty result dict: nothing compiled, nothing measured yet."""
    return {
        "compiled": False,
        "correct": False,
        "latency_ms": None,
        "estimated": False,
        "backend": backend,
        "backend_reason": None,
        "sdk_version": None,
        "target": target,
        "metrics": {},
        "rel_errors": [],
        "input_shapes": [],
        "error": None,
        "timings": {},
    }


def set_backend(result, choice):
    """Records which backend runs the kernel and why (mutates and returns ``result``).

    ``choice``: accelopt.backends.choose_backend's dict. Sets "backend",
    "estimated" (True for the emulator's cost-model latency), "backend_reason"
    and "sdk_version" (None without the Neuron SDK).
    """
    result["backend"] = choice["backend"]
    result["estimated"] = choice["backend"] == "emulator"
    result["backend_reason"] = choice["reason"]
    result["sdk_version"] = choice.get("sdk_version")
    return result


def set_error(result, kind, message, tb=""):
    """Stores an error of ``kind`` in ``result`` (mutates and returns it)."""
    result["error"] = {"kind": kind, "message": str(message), "traceback": tb or ""}
    return result

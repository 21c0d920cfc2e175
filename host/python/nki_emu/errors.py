"""neuronxcc-style compile errors raised by the NKI emulator.

The error codes and message texts follow the NKI error reference of the AWS
Neuron SDK 2.24 (``general/nki/api/nki.errors.rst``), as summarised in
docs/nki-facts.md §4.
"""
import functools
import os
import sys

from . import runstack
from .program import state as program_state

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


class NKICompileError(Exception):
    """A kernel that neuronxcc would refuse.

    Attributes: ``code`` (e.g. ``"err_num_partition_exceed_arch_limit"``),
    ``message`` (the neuronxcc text), ``filename`` and ``lineno`` of the kernel
    source line that issued the offending call. ``str(e)`` reads
    ``"<file>:<line>: error: [<code>] <message>"``.
    """

    def __init__(self, code, message, filename="<unknown>", lineno=0):
        self.code = code
        self.message = message
        self.filename = filename
        self.lineno = lineno
        super().__init__(f"{filename}:{lineno}: error: [{code}] {message}")


@functools.lru_cache(maxsize=4096)
def _inside_package(filename):
    """True if ``filename`` (a code object's co_filename) belongs to nki_emu."""
    return os.path.abspath(filename).startswith(_PKG_DIR + os.sep)


def user_frame():
    """Returns (filename, lineno) of the innermost frame outside nki_emu.

    Runs for every allocation (tensor names), so the path test is cached
    per file name.
    """
    if program_state.REPLAY_LOCATION is not None:  # a replayed program has no kernel frames
        return program_state.REPLAY_LOCATION
    frame = sys._getframe(1)
    while frame is not None:
        if not _inside_package(frame.f_code.co_filename):
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back
    return "<unknown>", 0


def user_frame_object():
    """The innermost frame outside nki_emu (the kernel's), or None (loop liveness plans
    are keyed by the kernel's code object and line, nki_emu.liveness)."""
    if program_state.REPLAY_LOCATION is not None:
        return None  # replay: liveness comes from the program's release operations
    frame = sys._getframe(1)
    while frame is not None and _inside_package(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


class UnwrittenOutputError(Exception):
    """A kernel returned an output that its instructions did not produce: an HBM tensor
    with elements no store/DMA wrote, or a value that is not an HBM tensor (an SBUF
    tile, a NumPy array). Real neuronxcc runs only the instruction stream, so such an
    output would hold garbage (docs/isolation.md, ``unwritten_output``).

    Attributes: ``kind`` ("unwritten_output"), ``output`` (index among the returned
    values), ``missing`` (elements never written, or None when the value is not an
    HBM tensor), ``total`` (elements of the output, or None), ``first`` (index tuple
    of the first unwritten element, or None).
    """

    kind = "unwritten_output"

    def __init__(self, message, output, missing=None, total=None, first=None):
        super().__init__(message)
        self.output, self.missing, self.total, self.first = output, missing, total, first


def fail(code, message):
    """Raises NKICompileError(code, message) located at the kernel's source line.

    Inside a run the first error is also kept by the run (``Run.error``) and raised
    again when the kernel returns: neuronxcc refuses a kernel before it runs, so a
    kernel cannot catch a refusal and go on (nor use refusals that depend on data,
    such as an out-of-bound indirect index, as an oracle)."""
    filename, lineno = user_frame()
    exc = NKICompileError(code, message, filename, lineno)
    run = runstack.current()
    if run is not None and run.error is None:
        run.error = exc
    raise exc


def check(condition, code, message):
    """Calls fail(code, message) unless condition holds."""
    if not condition:
        fail(code, message)

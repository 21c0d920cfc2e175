"""Which failure of the Neuron SDK is whose: the kernel's compile error, a busy device, or the SDK's limit.

Classified by the exception's type, its traceback and the error codes as the SDK
documents them (docs/trainium.md, "Errors"), never by a loose word in the text:

* NKI errors: the identifiers of the NKI error manual (``err_num_partition_exceed_arch_limit``,
  general/nki/api/nki.errors.rst up to SDK 2.26) and their hyphenated HTML anchors
  (``.../nki.errors.html#err-num-partition-exceed-arch-limit``), which is how a public trn2
  traceback ends the ValueError of a kernel refused while it was traced;
* compiler error codes ``NCC_<4 letters><3 digits>`` (compiler/error-codes/index.rst, SDK 2.28);
* a ``neuronx-cc`` process that failed (subprocess.CalledProcessError naming it);
* an exception raised in the kernel's own body: the SDK runs the body only to trace it;
* the runtime's "NeuronCore(s) not available" line (neuron-runtime/nrt-troubleshoot.rst) and
  the status codes NRT_EXEC_NC_BUSY / NRT_LOAD_NOT_ENOUGH_NC (neuron-runtime/api/nrt_status.rst):
  the core is held by another process, not the kernel's fault;
* NotImplementedError from the SDK's own API (SDK 2.28: ``nki.baremetal`` "not available in
  this release", release-notes/components/nki.rst): a limit of the installed SDK.
"""
import re
import subprocess
import traceback

COMPILE_ERROR = "compile_error"
DEVICE_UNAVAILABLE = "device_unavailable"
CONFIG_ERROR = "config_error"

# err_<words> (the manual's identifiers) or #err-<words> (their anchors); at least two words.
_NKI_ERROR = re.compile(r"(?:#|\[|\b)err[-_][a-z0-9]+(?:[-_][a-z0-9]+)+")
_NCC_CODE = re.compile(r"\bNCC_[A-Z]{4}[0-9]{3}\b")
_BUSY = (re.compile(r"NeuronCore\(s\) not available"), re.compile(r"\bNRT_EXEC_NC_BUSY\b"),
         re.compile(r"\bNRT_LOAD_NOT_ENOUGH_NC\b"), re.compile(r"\bstatus=1005\b"))
_SDK_PACKAGES = ("neuronxcc", "nki")


def _text(exc):
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a hostile __str__ classifies as nothing special
        return ""


def _raised_in(exc, files):
    """True if a frame of ``exc``'s traceback runs code of one of ``files``."""
    if not files:
        return False
    wanted = set(files)
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename in wanted:
            return True
    return False


def _from_sdk(exc):
    module = getattr(type(exc), "__module__", "") or ""
    return module.split(".")[0] in _SDK_PACKAGES


def _compiler_process(exc):
    if not isinstance(exc, subprocess.CalledProcessError):
        return False
    command = exc.cmd if isinstance(exc.cmd, (list, tuple)) else [exc.cmd]
    return any("neuronx-cc" in str(part) for part in command[:1]) or \
        (len(command) > 1 and "neuronx-cc" in str(command[0]))


def classify(exc, kernel_files=()):
    """The error kind of ``exc`` raised while the neuron backend compiled or ran a kernel.

    ``kernel_files``: the kernel's source files (a frame there means the body was being
    traced). Returns "compile_error", "device_unavailable", "config_error", or None (the
    caller's default: runtime_error).
    """
    text = _text(exc)
    if any(pattern.search(text) for pattern in _BUSY):
        return DEVICE_UNAVAILABLE
    if isinstance(exc, NotImplementedError) and not _raised_in(exc, kernel_files) and \
            ("not available" in text or _from_sdk(exc)):
        return CONFIG_ERROR
    if _NKI_ERROR.search(text) or _NCC_CODE.search(text) or _compiler_process(exc):
        return COMPILE_ERROR
    if _raised_in(exc, kernel_files):
        return COMPILE_ERROR
    name = type(exc).__name__
    if _from_sdk(exc) and ("Compil" in name or "Trace" in name):
        return COMPILE_ERROR
    return None

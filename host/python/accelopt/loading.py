"""Loading reference and kernel modules from file paths.

Each path gets its own module name (``accelopt_<role>_<sha1 of the absolute
path>``), so two kernels with the same file name never share a module, and a
file is re-executed on every load (a rewritten kernel is never served stale).
"""
import hashlib
import linecache
import os
import sys
import traceback
import types

from . import result as R

REFERENCE_FUNCTIONS = ("get_inputs", "forward", "transform_to_nki_inputs", "transform_nki_outputs")
KERNEL_ATTRIBUTES = ("kernel", "optimized_kernel")


def module_name(path, role):
    """Returns the unique module name for ``path`` (str) used with ``role`` (str)."""
    digest = hashlib.sha1(os.path.abspath(path).encode("utf-8")).hexdigest()[:16]
    return f"accelopt_{role}_{digest}"


def remember_source(path, source):
    """Makes ``source`` (str, or UTF-8 bytes) what ``linecache``/``inspect`` return for
    ``path``, whatever the file holds now: tracebacks and the emulator's liveness analysis
    (nki_emu/liveness.py) must see the code that runs. Undecodable bytes are skipped."""
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError:
            return
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)


def load_module(path, role):
    """Executes the Python file ``path`` as a fresh module (bytecode never cached) and returns it.

    Raises FileNotFoundError if the file is missing and whatever executing
    the module raises (SyntaxError, ImportError, ...).
    """
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    name = module_name(path, role)
    # Compiled from the text every time: no __pycache__ (whose mtime check
    # can serve a stale kernel rewritten within the same second).
    with open(path, "rb") as handle:
        data = handle.read()
    remember_source(path, data)
    code = compile(data, path, "exec", dont_inherit=True)
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module  # some decorators look their module up
    try:
        exec(code, module.__dict__)  # noqa: S102 - running the kernel is the point
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_reference(path):
    """Loads a NKIBench reference module (the four functions of accelopt-facts §5.4).

    Raises HarnessError(reference_error) if the file cannot be executed or a
    required function is missing.
    """
    try:
        module = load_module(path, "reference")
    except Exception as exc:  # noqa: BLE001 - any failure is the reference's fault
        raise R.HarnessError(R.REFERENCE_ERROR, f"cannot load reference {path}: {exc}",
                             R.format_exception(exc)) from exc
    missing = [f for f in REFERENCE_FUNCTIONS if not callable(getattr(module, f, None))]
    if missing:
        raise R.HarnessError(R.REFERENCE_ERROR,
                             f"reference {path} lacks {', '.join(missing)}")
    return module


def kernel_location(exc, kernel_path):
    """Returns "file:line" of the innermost point of ``exc`` inside ``kernel_path``, or None.

    Looks at attributes a compile error may carry (``filename``/``file`` and
    ``lineno``/``line``, as SyntaxError and NKICompileError do), then at the
    traceback frames.
    """
    kernel_path = os.path.abspath(kernel_path)
    for file_attr, line_attr in (("filename", "lineno"), ("file", "line"), ("kernel_file", "kernel_line")):
        filename = getattr(exc, file_attr, None)
        lineno = getattr(exc, line_attr, None)
        if isinstance(filename, str) and isinstance(lineno, int) and filename \
                and os.path.abspath(filename) == kernel_path:
            return f"{kernel_path}:{lineno}"
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == kernel_path:
            found = f"{kernel_path}:{frame.lineno}"
    return found


def load_kernel(path):
    """Loads the kernel file and returns its ``kernel`` (else ``optimized_kernel``) callable.

    Raises HarnessError(compile_error) on a missing file, a syntax or import
    error, or when neither attribute exists; the message names file:line where
    known.
    """
    try:
        module = load_module(path, "kernel")
    except Exception as exc:  # noqa: BLE001 - classify every load failure
        where = kernel_location(exc, path) or path
        raise R.HarnessError(R.COMPILE_ERROR, f"{where}: {type(exc).__name__}: {exc}",
                             R.format_exception(exc)) from exc
    for attr in KERNEL_ATTRIBUTES:
        fn = getattr(module, attr, None)
        if fn is not None:
            return fn
    raise R.HarnessError(R.COMPILE_ERROR,
                         f"{path}: defines neither 'kernel' nor 'optimized_kernel'")

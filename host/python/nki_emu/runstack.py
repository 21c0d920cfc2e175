"""The stack of active runs (a leaf module: it imports nothing from the emulator).

:func:`nki_emu.run` pushes one :class:`nki_emu.runtime.Run` while a kernel
executes and pops it afterwards; everything that needs the active run
(allocation, tracing, ``errors.fail``) asks :func:`current`. Keeping the stack
here lets ``errors`` and ``tensor`` reach it without importing ``runtime``,
which imports them.
"""

_STACK = []


def current():
    """The active Run, or None outside a kernel run."""
    return _STACK[-1] if _STACK else None


def batch():
    """Number of input sets the active run executes at once (the leading axis of every
    storage array, nki_emu.tensor); 1 outside a run and for ordinary runs."""
    return _STACK[-1].batch if _STACK else 1


def computing():
    """False inside a cost-only run (``nki_emu.run(..., compute=False)``): the expensive
    arithmetic (matmuls, scans) is skipped and produces zeros."""
    return not _STACK or _STACK[-1].compute


def push(run):
    """Makes ``run`` the active run (until :func:`pop`)."""
    _STACK.append(run)


def pop():
    """Ends the active run; the previous one (if any) is active again."""
    _STACK.pop()

"""Functions the C++ worker tests call through the pool's plain path
(tests/host/worker/worker_test.cc). They are not test_* functions: the
Python runner does not collect them. Each does one thing a candidate might try."""
import os
import socket
import time


def echo(arg):
    return {"echo": arg, "pid": os.getpid(), "cwd": os.getcwd()}


def spin(arg):
    while True:
        pass


def sleep(arg):
    time.sleep(float(arg))
    return "woke"


def segfault(arg):
    import ctypes
    return ctypes.string_at(0)


def exit_now(arg):
    os._exit(int(arg))


def allocate(arg):
    import numpy as np
    hoard = []
    while True:
        hoard.append(np.empty(1 << 27))


def fork(arg):
    return os.fork()


def write_file(arg):
    with open(arg, "w") as handle:
        handle.write("x")
    return "written"


def read_file(arg):
    with open(arg) as handle:
        return handle.read()


def connect(arg):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect(("127.0.0.1", int(arg)))
    return "connected"


def kill_parent(arg):
    os.kill(os.getppid(), 9)
    return "killed"


def environment(arg):
    return dict(os.environ)


def thread_count(arg):
    import numpy as np
    a = np.ones((256, 256))
    return float((a @ a).sum())


def patch_numpy(arg):
    import numpy as np
    np.allclose = lambda *a, **k: True
    return "patched"


# --- signals by routes other than kill/tkill/tgkill -------------------------

def _syscall(number, *args):
    """Raw system call through libc; raises OSError(errno) on failure."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


SYS_RT_SIGQUEUEINFO = 129      # x86-64
SYS_RT_TGSIGQUEUEINFO = 297
SYS_PIDFD_OPEN = 434
SYS_PIDFD_SEND_SIGNAL = 424
SYS_IO_URING_SETUP = 425


def sigqueue(arg):
    """rt_sigqueueinfo(arg, SIGKILL, &info): arg is a pid (the host's, or 1)."""
    import ctypes
    info = ctypes.create_string_buffer(128)
    ctypes.memmove(info, (ctypes.c_int * 3)(9, 0, -1), 12)  # si_signo, si_errno, si_code = SI_QUEUE
    import signal
    _syscall(SYS_RT_SIGQUEUEINFO, int(arg), int(signal.SIGKILL), ctypes.addressof(info))
    return "signalled"


def tgsigqueue(arg):
    import ctypes
    info = ctypes.create_string_buffer(128)
    ctypes.memmove(info, (ctypes.c_int * 3)(9, 0, -1), 12)
    _syscall(SYS_RT_TGSIGQUEUEINFO, int(arg), int(arg), 9, ctypes.addressof(info))
    return "signalled"


def pidfd_signal(arg):
    fd = _syscall(SYS_PIDFD_OPEN, int(arg), 0)
    _syscall(SYS_PIDFD_SEND_SIGNAL, fd, 9, 0, 0)
    return "signalled"


def kill_pid(arg):
    os.kill(int(arg), 9)
    return "killed"


def kill_group(arg):
    os.kill(0, 9)
    return "killed"


def visible_pids(arg):
    """The candidate's own pid and whether the host's pid answers kill(pid, 0)."""
    try:
        os.kill(int(arg), 0)
        host_reachable = True
    except OSError as exc:
        host_reachable = exc.errno
    return {"pid": os.getpid(), "ppid": os.getppid(), "host_reachable": host_reachable}


# --- network by routes other than socket() ----------------------------------

def io_uring(arg):
    import ctypes
    params = ctypes.create_string_buffer(120)
    fd = _syscall(SYS_IO_URING_SETUP, 8, ctypes.addressof(params))
    return f"io_uring fd {fd}"


def socketpair(arg):
    import socket as s
    a, b = s.socketpair()
    return "socketpair"


# --- state that must not survive a candidate ---------------------------------

def leave_state(arg):
    """Leaves every kind of state a later candidate could be poisoned by."""
    import atexit
    import signal
    import sys
    import threading
    import nki_emu.cost.targets as targets
    sys.settrace(lambda *a: None)
    sys.setprofile(lambda *a: None)
    threading.settrace(lambda *a: None)
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *a: None)
    atexit.register(lambda: None)
    handle = open("leaked.txt", "w")
    handle.write("x")
    sys.modules["leaked_fd"] = handle  # keeps the descriptor open
    targets.TRN1.clock_ghz["tensor"] = 1000.0  # in place: identity checks do not see it
    return "left"


def edit_cost_tables(arg):
    import nki_emu.cost.targets as targets
    targets.TRN1.clock_ghz["tensor"] = 1000.0
    return "edited"


def state_report(arg):
    """What a fresh candidate process sees."""
    import atexit
    import signal
    import sys
    import threading
    import nki_emu.cost.targets as targets
    open_fds = []
    for fd in range(64):
        try:
            os.fstat(fd)
            open_fds.append(fd)
        except OSError:
            pass
    return {"trace": sys.gettrace() is not None, "profile": sys.getprofile() is not None,
            "threading_trace": getattr(threading, "_trace_hook", None) is not None,
            "threads": threading.active_count(), "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
            "atexit": atexit._ncallbacks(), "fds": len(open_fds), "files": sorted(os.listdir(".")),
            "leaked_module": "leaked_fd" in sys.modules, "tensor_clock": targets.TRN1.clock_ghz["tensor"]}


# --- floods -------------------------------------------------------------------

def flood_print(arg):
    """Prints `arg` MiB in one line."""
    print("x" * (int(arg) << 20), flush=True)
    return "printed"


def flood_exception(arg):
    raise ValueError("y" * (int(arg) << 20))

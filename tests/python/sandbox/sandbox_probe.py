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

"""The host holds the GIL one way only: python::Gil (PyGILState_Ensure), never
pybind11's gil_scoped_acquire (host/src/python/gil.h says why: torch 2.9's own
pybind11 3.0 crashes beside a 2.10 gil_scoped_acquire on non-main threads)."""
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SOURCES = ("host", "plugins", "flashinfer", "tests")


def _cxx_files():
    for top in SOURCES:
        for root, _dirs, files in os.walk(os.path.join(REPO, top)):
            for name in files:
                if name.endswith((".cc", ".h", ".hpp", ".cpp")):
                    yield os.path.join(root, name)


def test_no_cxx_file_takes_the_gil_through_pybind11():
    offenders = []
    pattern = re.compile(r"gil_scoped_acquire\s+\w+")
    for path in _cxx_files():
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                code = line.split("//", 1)[0]
                if pattern.search(code):
                    offenders.append(f"{os.path.relpath(path, REPO)}:{number}: {line.strip()}")
    assert not offenders, "use accelopt::python::Gil (host/src/python/gil.h):\n" + "\n".join(offenders)


def test_the_scanner_sees_a_declaration():
    # The check above is only as good as its pattern: it must match the form the code used.
    assert re.search(r"gil_scoped_acquire\s+\w+", "    py::gil_scoped_acquire gil;")

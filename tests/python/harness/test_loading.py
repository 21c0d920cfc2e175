"""Module loading: one module per path, re-executed on every load."""
import os
import tempfile

from accelopt import loading
from accelopt import result as R

_KERNEL = "def kernel():\n    return {value}\n"


def _write(path, text):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def test_same_file_name_in_two_directories():
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        _write(os.path.join(a, "k.py"), _KERNEL.format(value=1))
        _write(os.path.join(b, "k.py"), _KERNEL.format(value=2))
        assert loading.load_kernel(os.path.join(a, "k.py"))() == 1
        assert loading.load_kernel(os.path.join(b, "k.py"))() == 2
        assert loading.module_name(os.path.join(a, "k.py"), "kernel") != \
            loading.module_name(os.path.join(b, "k.py"), "kernel")


def test_rewritten_file_is_reloaded():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.py")
        _write(path, _KERNEL.format(value=1))
        assert loading.load_kernel(path)() == 1
        _write(path, _KERNEL.format(value=3))
        assert loading.load_kernel(path)() == 3


def test_inspection_sees_the_loaded_text_even_after_a_same_size_rewrite():
    import inspect
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.py")
        _write(path, _KERNEL.format(value=1))
        stat = os.stat(path)
        assert inspect.getsource(loading.load_kernel(path)) == _KERNEL.format(value=1)
        _write(path, _KERNEL.format(value=4))  # same size; same mtime below: linecache cannot tell
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert inspect.getsource(loading.load_kernel(path)) == _KERNEL.format(value=4)


def test_import_error_is_compile_error_with_location():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.py")
        _write(path, "import os\nimport no_such_module_xyz\n")
        try:
            loading.load_kernel(path)
        except R.HarnessError as exc:
            assert exc.kind == R.COMPILE_ERROR
            assert f"{path}:2" in exc.message and "no_such_module_xyz" in exc.message
            assert "ModuleNotFoundError" in exc.tb
        else:
            raise AssertionError("import error not reported")


def test_reference_must_define_the_interface():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "r.py")
        _write(path, "def get_inputs():\n    return []\n\nforward = 3\n")
        try:
            loading.load_reference(path)
        except R.HarnessError as exc:
            assert exc.kind == R.REFERENCE_ERROR
            assert "forward" in exc.message and "transform_to_nki_inputs" in exc.message
        else:
            raise AssertionError("incomplete reference accepted")

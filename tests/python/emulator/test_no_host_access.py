"""Kernels cannot reach the NumPy storage of emulator tensors, and every returned HBM
output element must have been written by a store (issue 12, "work outside the
instruction stream"; docs/isolation.md, ``unwritten_output``)."""
import types

import numpy as np

from emulator.emu_helpers import rand
import nki_emu
from nki_emu.errors import UnwrittenOutputError
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def _run(kernel, *args):
    return nki_emu.run(kernel, list(args), trace=False)


def _refused(kernel, *args, kind=UnwrittenOutputError):
    try:
        _run(kernel, *args)
    except kind as exc:
        return exc
    raise AssertionError(f"{kernel.__name__} was not refused with {kind.__name__}")


# --- what a kernel can reach ---------------------------------------------------------
_INTROSPECTION = {"__globals__", "__closure__", "__code__", "__func__", "__self__", "__wrapped__",
                  "__defaults__", "__kwdefaults__", "__builtins__", "__subclasses__", "__base__", "__bases__",
                  "__mro__", "__class__", "__init_subclass__", "__subclasshook__"}


def _attributes(obj):
    """(name, value) of what plain attribute access yields on ``obj``, dunders that are
    data (``__dict__``, ``__slots__``) included, function introspection excluded."""
    names = set(dir(obj))
    for name in sorted(names - _INTROSPECTION):
        if name.startswith("__") and name not in ("__dict__", "__slots__", "__array_interface__",
                                                  "__array_struct__", "__weakref__", "__doc__"):
            continue
        try:
            yield name, getattr(obj, name)
        except Exception:  # noqa: BLE001 - a refusing attribute is what we want
            continue


def _emulator_object(value):
    module = getattr(type(value), "__module__", "") or ""
    return module.startswith("nki_emu") or isinstance(value, (types.ModuleType, tuple, list, dict, set)) \
        or (isinstance(value, type) and (value.__module__ or "").startswith("nki_emu"))


def _reachable_arrays(roots, limit=20000):
    """NumPy arrays reachable from ``roots`` through attributes, class dictionaries and
    container items, descending only into emulator objects (not into NumPy itself)."""
    seen, arrays, todo = set(), [], list(roots)
    while todo and len(seen) < limit:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            arrays.append(obj)
            continue
        if isinstance(obj, types.ModuleType) and not obj.__name__.startswith(("neuronxcc", "nki")):
            continue
        children = []
        if isinstance(obj, dict):
            children += list(obj.values())
        elif isinstance(obj, (tuple, list, set, frozenset)):
            children += list(obj)
        if not isinstance(obj, (dict, tuple, list, set, frozenset)):
            children += [value for _, value in _attributes(obj)]
            for klass in type(obj).__mro__[:-1]:
                if (klass.__module__ or "").startswith("nki_emu"):
                    for name, attr in vars(klass).items():
                        get = getattr(attr, "__get__", None)
                        if get is not None and not isinstance(attr, types.FunctionType):
                            try:
                                children.append(get(obj, type(obj)))
                            except Exception:  # noqa: BLE001
                                pass
        todo += [c for c in children if isinstance(c, np.ndarray) or _emulator_object(c)]
    return arrays


def test_no_attribute_route_from_kernel_objects_reaches_storage():
    found = {}

    def k(x, idx):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        tile = nl.load(x)
        doubled = nl.multiply(tile, 2.0)
        psum = nisa.nc_matmul(tile[0:4, 0:4], tile[0:4, 0:4])
        ids = nl.load(idx)
        gathered = x[ids[nl.arange(4)[:, None], 0], nl.arange(4)[None, :]]
        nl.store(out, value=doubled)
        for i in nl.affine_range(1):
            loop_index = i
        found["roots"] = [x, out, tile, doubled, psum, ids, gathered, gathered.gather, x[0:2, 1:3], loop_index,
                          nl.arange(4)[:, None], nl.mgrid[0:2, 0:2], nl, nisa, nt, nki]
        found["arrays"] = _reachable_arrays(found["roots"])
        return out
    for traced in (False, True):  # with cost tracing, tiles also carry their trace records
        x, idx = rand(4, 4), np.array([[1], [0], [3], [2]], np.int32)
        out = nki_emu.run(k, [x, idx], trace=traced).outputs
        storage = [x, idx, out]
        assert len(found["arrays"]) < 50, len(found["arrays"])  # masks and index grids only
        for array in found["arrays"]:
            assert not any(np.may_share_memory(array, s) for s in storage), array
            assert not (array.shape == x.shape and array.dtype == x.dtype), array  # no copy of the values either


def test_tensor_refuses_host_conversions():
    def k(x):
        tile = nl.load(x)
        for name, attempt in (("asarray", lambda t: np.asarray(t)), ("array", lambda t: np.array(t)),
                              ("list", list), ("memoryview", memoryview), ("vars", vars),
                              ("nested", lambda t: np.array([t, t])), ("ufunc", lambda t: np.add(t, 1.0))):
            for t in (x, tile, x[0:2, 0:2]):
                try:
                    attempt(t)
                except TypeError:
                    continue
                raise AssertionError(f"{name} of {t!r} did not raise TypeError")
        for t in (x, tile):
            for name in ("data", "arr", "_data", "_blocks", "_cow", "_written", "blocks", "cow", "written",
                         "tolist", "__dict__", "__array_interface__", "__array_struct__", "write",
                         "update_in_place", "_adopt"):
                assert not hasattr(t, name), name
            state = t.__reduce_ex__(4)  # what copy and pickle see: metadata only
            assert not any(isinstance(v, np.ndarray) and v.size > 1 for v in state[2][1].values()), state
        scaled = np.float32(2.0) * tile  # NumPy defers to the tile operator (an instruction)
        assert isinstance(scaled, nki_emu.tensor.NkiTensor) and scaled.buffer == "sbuf"
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=scaled)
        return out
    x = rand(4, 4)
    assert np.allclose(_run(k, x).outputs, 2 * x)


def test_kernel_namespaces_export_only_the_nki_api():
    for module in (nl, nisa, nt, nki):
        names = dir(module)
        for name in names:
            value = getattr(module, name)
            if name in ("language", "isa", "typing", "trace") and module is nki:
                continue  # nki.trace is the NKI name of nki.jit
            assert not isinstance(value, types.ModuleType), (module.__name__, name)
            assert not name.startswith("_") or (name.startswith("__") and name.endswith("__")), (module.__name__, name)
        for internal in ("np", "numpy", "sys", "os", "math", "runtime", "trace", "ops", "dtypes", "values",
                         "on_chip", "tensor_values", "tensor_write", "NkiTensor", "fail"):
            assert internal not in names or (module is nki and internal == "trace"), (module.__name__, internal)
    assert nki.language is nl and nki.isa is nisa and nki.typing is nt
    assert callable(nl.load) and callable(nisa.nc_matmul) and nl.par_dim(4).size == 4


def test_indirect_access_keeps_index_values_out_of_reach():
    seen = {}

    def k(x, idx):
        ids = nl.load(idx)
        view = x[ids[nl.arange(4)[:, None], 0], nl.arange(8)[None, :]]
        seen["attributes"] = dict(_attributes(view.gather))
        try:
            nl.load(view)
        except nki_emu.NKICompileError as err:
            seen["message"] = str(err)
    _refused(k, rand(16, 8), np.array([[3], [0], [915], [7]], np.int32), kind=nki_emu.NKICompileError)
    assert not any(isinstance(v, np.ndarray) and v.size > 1 for v in seen["attributes"].values()), seen
    assert "915" not in seen["message"] and "out-of-bound" in seen["message"].lower(), seen["message"]


# --- output coverage ---------------------------------------------------------------
def test_partial_and_masked_stores_are_unwritten_outputs():
    def half(x):
        out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out[0:64, 0:8], value=nl.load(x[0:64, 0:8]))
        return out
    err = _refused(half, rand(128, 8))
    assert (err.output, err.missing, err.total, err.first) == (0, 512, 1024, (64, 0))
    assert "output 0" in str(err) and "512 of 1024" in str(err) and "[64, 0]" in str(err)

    def masked(x):
        out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.arange(128)[:, None], nl.arange(8)[None, :]
        nl.store(out[i_p, i_f], value=nl.load(x[i_p, i_f]), mask=(i_f < 7))
        return out
    err = _refused(masked, rand(128, 8))
    assert err.missing == 128 and err.first == (0, 7)


def test_second_output_and_views_are_checked():
    def two(x):
        a = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        b = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(a, value=nl.load(x))
        nl.store(b[0:4, 0:2], value=nl.load(x[0:4, 0:2]))
        return a, b
    err = _refused(two, rand(4, 4))
    assert err.output == 1 and err.missing == 8

    def view_of_written_part(x):
        b = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(b[0:4, 0:2], value=nl.load(x[0:4, 0:2]))
        return b[0:4, 0:2]
    x = rand(4, 4)
    assert np.array_equal(_run(view_of_written_part, x).outputs, x[:, 0:2])


def test_every_store_route_counts_as_written():
    def routes(x, idx):
        out = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        tile = nl.load(x[0:4, 0:8])
        nl.store(out[0:1, 0:8], value=tile[0:1, 0:8])  # nl.store
        out[1:2, 0:8] = tile[1:2, 0:8]  # assignment of a tile into HBM
        out[2:3, 0:8] = 0.0  # scalar assignment
        out[2:3, 0:8] += tile[2:3, 0:8]  # accumulation
        ids = nl.load(idx)
        nl.store(out[ids[nl.arange(1)[:, None], 0], nl.arange(8)[None, :]], value=tile[3:4, 0:8])  # indirect DMA
        return out
    x = rand(4, 8)
    out = _run(routes, x, np.array([[3]], np.int32)).outputs
    assert np.allclose(out, x)


def test_host_values_on_chip_tiles_and_constants_are_not_outputs():
    def sbuf(x):
        return nl.load(x)
    assert "SBUF tile" in str(_refused(sbuf, rand(4, 4)))

    def host(x):
        return np.zeros((4, 4), np.float32)
    assert "host value of type ndarray" in str(_refused(host, rand(4, 4)))

    def constant(x):
        return nl.shared_constant(np.ones((4, 4), np.float32))
    assert _refused(constant, rand(4, 4)).missing == 16


def test_returned_input_and_no_output_are_left_to_the_harness():
    def same(x):
        return x

    def nothing(x: nt.mutable_tensor):
        nl.store(x, value=nl.multiply(nl.load(x), 2.0))
    x = rand(4, 4)
    assert _run(same, x).outputs is x  # the harness's aliasing rule reports it
    y = x.copy()
    assert _run(nothing, y).outputs is None and np.allclose(y, 2 * x)


def test_tensors_made_from_host_data_are_not_outputs():
    def injected(x):
        return type(x).allocate((4, 4), np.float32, "shared_hbm", data=np.ones((4, 4), np.float32))
    err = _refused(injected, rand(4, 4))
    assert err.missing == 16 and "no store/DMA" in str(err)


def test_nested_simulation_inside_a_kernel_hands_back_tensors_not_storage():
    seen = {}

    def inner(x):
        return x

    def outer(x):
        seen["value"] = nki.simulate_kernel(inner, x)
        seen["jit"] = nki.jit(inner)(x)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out
    x = rand(4, 4)
    _run(outer, x)
    assert seen["value"] is seen["jit"] and isinstance(seen["value"], nki_emu.tensor.NkiTensor)


def test_arrays_inside_tuple_arguments_arrive_as_hbm_tensors():
    seen = {}

    def k(pair):
        seen["types"] = [type(v).__name__ for v in pair[0]] + [type(pair[1]).__name__]
        out = nl.ndarray(pair[1].shape, dtype=pair[1].dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(pair[0][1]))
        return out
    a, b = rand(4, 4), rand(4, 4, seed=1)
    out = _run(k, ([a, b], a)).outputs
    assert seen["types"] == ["NkiTensor"] * 3 and np.array_equal(out, b)

    def element(pair):
        return pair[0][1]  # an input handed back: left to the harness's aliasing rule
    assert _run(element, ([a, b], a)).outputs is b


def test_a_caught_refusal_still_refuses_the_kernel():
    def probing(x, idx):
        ids = nl.load(idx)
        try:  # an out-of-bound indirect index as a one-bit oracle on the index values
            nl.load(x[ids[nl.arange(1)[:, None], 0], nl.arange(8)[None, :]])
        except nki_emu.NKICompileError:
            pass
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out
    err = _refused(probing, rand(16, 8), np.array([[99]], np.int32), kind=nki_emu.NKICompileError)
    assert err.code == "err_tensor_access_out_of_bound"

"""HBM, SBUF and PSUM tensors, tiles and views.

A root :class:`NkiTensor` owns one C-contiguous NumPy array of its declared
shape, block dimensions included (nki-facts §2.1: dims left of ``par_dim`` are
block dims; the emulator does not size-check them). Indexing returns a view
tensor that shares the root's memory through an affine :class:`Layout`
(no copy), or a gather view for out-of-bound / non-affine indices.
Compute results are fresh SBUF (or PSUM) root tensors.

Storage is not reachable from a tensor object (docs/isolation.md, "Work
outside the instruction stream"): a kernel holds :class:`NkiTensor` objects,
whose attributes are metadata only. The NumPy arrays live in hidden slots of
the root: slots whose descriptors are taken out of the class after it is
built, so that no attribute lookup (``getattr``, ``vars``, ``type(t).__dict__``,
copy/pickle state) finds them; only this module's accessors hold the
descriptors. The emulator reads and writes storage through :func:`values`,
:func:`root_data`, :func:`write` and :func:`update_in_place`. Hidden slots add
no object per tensor, so the garbage collector's work is unchanged. ``np.asarray(t)``, iteration and
the buffer protocol raise TypeError. Every HBM tensor the kernel allocates
keeps a mask of the elements a store has written (:func:`unwritten`).
"""
import math
import weakref

import numpy as np

from . import batch, dtypes, runstack, sentinel
from .errors import fail, user_frame
from .layout import Gather, Layout, gather_flat, gather_inb, gather_members, gather_oob_message, hide_indices
from .layout import resolve, stack_gathers

HBM_BUFFERS = ("shared_hbm", "private_hbm", "hbm")
ON_CHIP = ("sbuf", "psum")
MAX_PARTITIONS = 128  # nl.tile_size.pmax [D S3 programming model]
NAN_FILL_LIMIT = 64 << 20  # bytes; larger dense copies of block-dim roots are zero-filled lazily


class par_dim:
    """``nl.par_dim(n)``: marks the partition axis inside a shape tuple."""

    def __init__(self, size):
        self.size = int(size)

    def __index__(self):
        return self.size

    def __int__(self):
        return self.size

    def __repr__(self):
        return f"par_dim({self.size})"


def split_shape(shape):
    """Returns (plain int shape, partition axis) for a shape that may hold a par_dim."""
    if isinstance(shape, (int, np.integer, par_dim)):
        shape = (shape,)
    par_axis = 0
    out = []
    for axis, d in enumerate(shape):
        if isinstance(d, par_dim):
            par_axis = axis
        out.append(int(d))
    return tuple(out), par_axis


_UID = [0]
_OWNERS = {}  # id(array) -> weakref of the fresh root owning it (cleared per run)

# Storage slots of a root (hidden: see the module docstring). Every array has a leading
# batch axis of S members (nki_emu.batch; S = 1 for an ordinary run). ``_data``: the
# C-contiguous array of shape (S,) + declared shape, a Members tuple (a batched kernel
# argument: one array per member, never copied), or None while a block-dim root keeps
# ``_blocks`` ({block index: (S, block elements) array}, allocated on first touch);
# ``_cow``: False, True (``_data`` was adopted by a block) or the set of block indices
# adopted from fresh results (copy-on-write); ``_written``: bool mask of the declared
# shape (of shape (S,) + declared shape once members diverge: indirect stores) for an
# HBM tensor the kernel allocated (nki_emu.coverage), or BY_SENTINEL (an uninitialised
# float one: its unwritten elements hold nki_emu.sentinel's NaN), else None. Views leave them unset.
_HIDDEN_SLOTS = ("_data", "_blocks", "_cow", "_written")
BY_SENTINEL = "by_sentinel"  # the ``_written`` of a root whose data is its own mask


class Members(tuple):
    """Storage of a batched, immutable kernel argument: one C-contiguous array of the
    argument's shape per member (the harness's own, possibly read-only, arrays: no
    copy). Reads stack the members' views; writes are refused (immutable)."""

    __slots__ = ()


class NkiTensor:
    """A tensor or a view of one (metadata only; values are reached through :func:`values`).

    ``buffer``: "shared_hbm"/"private_hbm"/"hbm"/"sbuf"/"psum"; ``dtype``: NumPy
    dtype or dtypes.NkiDType; ``shape``: tuple; ``root``: the owning tensor;
    ``layout``: Layout of this view in the root (element units) or None when
    ``gather`` (layout.Gather) is used. ``producer``: trace record of the
    instruction that computed a fresh result; ``valid``: boolean mask of the
    elements a masked instruction produced (None = all).
    """

    __slots__ = ("_owner", "layout", "gather", "buffer", "dtype", "name", "par_axis", "immutable",
                 "producer", "valid", "uid", "depth", "version", "placed", "site", "scope",
                 "block_elems", "fill", "__weakref__") + _HIDDEN_SLOTS
    __array_ufunc__ = None  # NumPy defers: `np.float32(2) * t` is the tile operator, never a host array

    @property
    def root(self):
        """The root tensor owning this tensor's storage: the tensor itself for a root.

        A root does not refer to itself (``_owner`` is None; a view's ``_owner`` is its
        root), so a dead tile is freed at once by reference counting. A self-reference
        made every root a reference cycle that only the cyclic garbage collector freed:
        dozens of dead tiles stayed resident between collections (mamba: +0.5 GB per
        input set, docs/benchmarks/candidate-memory.txt)."""
        owner = self._owner
        return self if owner is None else owner

    # --- construction ---------------------------------------------------------------
    @classmethod
    def allocate(cls, shape, dtype, buffer="sbuf", name="", fill=None, data=None, immutable=False,
                 track_writes=None):
        """New root tensor. ``fill``: None (uninitialised: NaN if small) or a value;
        ``data``: the array to hold (kernel arguments, constants, results): batched
        (shape ``(S,) + shape``, or :class:`Members`) or static (``shape``: the same
        for every member, copied S times); ``track_writes``: keep a written-element
        mask (default: an HBM tensor allocated without ``data``, i.e. by the kernel)."""
        shape, par_axis = split_shape(shape)
        dtype = dtypes.resolve(dtype if dtype is not None else np.float32)
        if buffer in ON_CHIP and shape and shape[par_axis] > MAX_PARTITIONS:
            fail("err_num_partition_exceed_arch_limit",
                 f"number of partitions {shape[par_axis]} exceed architecture limitation of {MAX_PARTITIONS}.")
        if track_writes is None:
            track_writes = data is None and buffer in HBM_BUFFERS
        sdtype = dtypes.storage(dtype)
        blocks = None
        # coverage without a mask (nki_emu.sentinel): an uninitialised float HBM tensor
        by_sentinel = track_writes and data is None and fill is None and sentinel.supports(sdtype) \
            and buffer in HBM_BUFFERS
        if data is None and buffer in ON_CHIP and par_axis > 0:
            blocks = {}  # block-dim tensor: blocks are allocated when first touched
        elif data is None:
            # np.full, never np.zeros: calloc'd memory is faulted in 4 KiB pages on first
            # write (28 673 faults, 2.5x slower for a 117 MB output), while NumPy's own
            # allocation of large arrays asks for transparent huge pages.
            full = (runstack.batch(),) + shape
            if by_sentinel:
                data = np.full(full, sentinel.fill_value(sdtype), dtype=sdtype)
            elif fill is None and sdtype.kind == "f":
                data = np.full(full, np.nan, dtype=sdtype)
            elif fill is None or fill == 0:
                data = np.full(full, 0, dtype=sdtype)
            else:
                data = np.full(full, dtypes.round_to(np.asarray(fill, dtype=sdtype), dtype), dtype=sdtype)
        elif not isinstance(data, Members) and np.ndim(data) == len(shape):
            data = batch.static(data)  # one member's values: the same for every member
        t = cls.__new__(cls)
        t._owner, t.buffer, t.dtype, t.name = None, buffer, dtype, name or f"t{_UID[0] + 1}"
        t.block_elems = math.prod(shape[par_axis:]) if blocks is not None else 0
        t.fill = fill
        strides, acc = [], 1
        for d in reversed(shape):
            strides.append(acc)
            acc *= d
        t.layout = Layout(0, shape, tuple(reversed(strides)))
        t.gather, t.par_axis, t.immutable = None, par_axis, immutable
        t.producer, t.valid, t.placed, t.version = None, None, False, 0
        _UID[0] += 1
        t.uid = _UID[0]
        _set_data(t, data)
        _set_blocks(t, blocks)
        _set_cow(t, False)
        # np.full: see `data` above
        _set_written(t, BY_SENTINEL if by_sentinel else np.full(shape, False) if track_writes else None)
        run = runstack.current()
        t.depth = len(run.loops) if run is not None else 0
        t.scope = run.loops[-1] if (run is not None and run.loops) else None
        t.site = None
        if run is not None and run.tracer is not None and buffer in ON_CHIP:
            # allocation site for the cost model's buffer rings: source line + loop kind
            filename, lineno = user_frame()
            kind = run.loops[-1].kind if run.loops else "sequential"
            t.site = (filename, lineno, "sequential" if kind == "sequential" else "affine")
        return t

    @classmethod
    def fresh(cls, values, dtype, buffer="sbuf", producer=None, valid=None):
        """Root tensor holding a batched compute result ``values`` (``(S,) + tile``;
        a rank-1 tile becomes (P, 1))."""
        values = np.asarray(values)
        if values.ndim == 2:
            values = values.reshape(values.shape + (1,))
        dtype = dtypes.resolve(dtype)
        sdtype = dtypes.storage(dtype)
        if isinstance(dtype, dtypes.NkiDType):
            values = dtypes.round_to(values, dtype)
        values = np.ascontiguousarray(values, dtype=sdtype)
        t = cls.allocate(values.shape[1:], dtype, buffer, data=values)
        t.producer, t.valid = producer, valid
        if values.base is None:
            _OWNERS[id(values)] = weakref.ref(t)  # candidates for zero-copy block adoption
        return t

    def _view(self, layout):
        v = NkiTensor.__new__(NkiTensor)
        v._owner, v.buffer, v.dtype, v.name = self.root, self.buffer, self.dtype, self.root.name
        v.par_axis, v.immutable, v.producer, v.valid = 0, self.root.immutable, None, None
        v.block_elems, v.fill = 0, None
        v.uid, v.depth, v.version, v.placed, v.site = self.root.uid, self.root.depth, 0, True, None
        v.scope = self.root.scope
        if isinstance(layout, Gather):
            v.layout, v.gather = None, layout
        else:
            if len(layout.shape) == 1 and self.buffer in ON_CHIP:
                layout = Layout(layout.offset, (layout.shape[0], 1), (layout.strides[0], 0))
            v.layout, v.gather = layout, None
        return v

    # --- shape/dtype ----------------------------------------------------------------
    @property
    def shape(self):
        return self.layout.shape if self.layout is not None else self.gather.shape

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def itemsize(self):
        return dtypes.itemsize(self.dtype)

    @property
    def is_root(self):
        return self.root is self

    # --- no host access ---------------------------------------------------------------
    def __array__(self, dtype=None):
        raise TypeError(f"{_NO_HOST_ACCESS} (np.asarray of '{self.root.name}')")

    def __iter__(self):
        raise TypeError(f"{_NO_HOST_ACCESS} (iterating over '{self.root.name}')")

    def check_bounds(self, where):
        """Raises err_tensor_access_out_of_bound unless ``where`` masks every OOB element
        (of every member, when the members' indices differ)."""
        if self.gather is None:
            return
        per_member = gather_members(self.gather)
        inb = gather_inb(self.gather) if per_member is None else per_member[1]
        if inb is not None:
            if where is None or np.any(np.broadcast_to(where, self.shape) & ~inb):
                if per_member is not None:
                    runstack.current().data_dependent = True
                fail("err_tensor_access_out_of_bound", gather_oob_message(self.gather))

    # --- indexing -------------------------------------------------------------------
    def __getitem__(self, key):
        if self.gather is not None:
            raise IndexError("indexing a gathered (out-of-bound) view is not supported")
        keys = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, NkiTensor) for k in keys):
            return self._indirect(keys)
        return self._view(resolve(self.layout, key, self.root.name))

    def _indirect(self, keys):
        """Indirect (runtime-index) access ``t[idx_tile[i_p, 0], i_f]`` (nki-facts §2.2): only on
        the partition/block dimension of an HBM tensor, for nl.load/nl.store (DMA)."""
        for axis, k in enumerate(keys):
            if isinstance(k, NkiTensor) and axis != 0:
                fail("err_indirect_indices_free_dim",
                     "Dynamic indexing for load/store only supports the indirect indexing to be on the "
                     "partition or block dimension.")
        if self.buffer not in HBM_BUFFERS:
            fail("err_copy_dynamic_indirect_indices_not_natively_supported",
                 "If indices are dynamic (i.e. known only at runtime), copying indirect memory references "
                 "is not natively supported.")
        idx = keys[0]
        vals = np.asarray(values(idx)).astype(np.int64)  # (S,) + index tile: one index set per member
        rest = tuple(np.asarray(k) if not isinstance(k, (int, np.integer)) else k for k in keys[1:])
        if vals.shape[0] == 1:
            view = self._view(resolve(self.layout, (vals[0],) + rest, self.root.name))
        else:
            run = runstack.current()
            parts = [resolve(self.layout, (member,) + rest, self.root.name) for member in vals]
            view = self._view(stack_gathers(parts, run.trace_member if run is not None else 0))
        if view.gather is not None:
            hide_indices(view.gather, f"Out-of-bound indirect access for tensor `{self.root.name}`: an index "
                                      f"on dimension 0 exceeds dimension size of {self.shape[0]}")
        return view

    def __setitem__(self, key, value):
        _assign(self[key], value)

    def reshape(self, shape):
        """HBM view with a new shape (no copy); nki-facts §2.2."""
        shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot reshape tensor of shape {self.shape} into {shape}")
        if self.layout is None or not _contiguous(self.layout):
            raise ValueError("reshape needs a contiguous tensor")
        strides, acc = [], 1
        for d in reversed(shape):
            strides.append(acc)
            acc *= d
        return self._view(Layout(self.layout.offset, shape, tuple(reversed(strides))))

    def broadcast_to(self, shape):
        """``nl.broadcast_to(self, shape)``: a new SBUF tile (see nki_emu.language)."""
        return _broadcast_to(self, shape)

    def astype(self, dtype):
        """``nl.copy(self, dtype=dtype)``: a new SBUF tile cast to ``dtype``."""
        return _copy(self, dtype=dtype)

    def expand_dims(self, axis):
        """``nl.expand_dims(self, axis)``: a new tile with a length-1 axis inserted."""
        return _expand_dims(self, axis)

    def view(self, dtype):
        return NkiTensor.fresh(np.ascontiguousarray(values(self)).view(dtypes.storage(dtype)), dtype, self.buffer)

    # --- operators ------------------------------------------------------------------
    def _binop(self, other, op, reverse=False):
        a, b = (other, self) if reverse else (self, other)
        return _elementwise(op, a, b, operator=True)

    def __add__(self, o):
        return self._binop(o, np.add)

    def __radd__(self, o):
        return self._binop(o, np.add, True)

    def __sub__(self, o):
        return self._binop(o, np.subtract)

    def __rsub__(self, o):
        return self._binop(o, np.subtract, True)

    def __mul__(self, o):
        return self._binop(o, np.multiply)

    def __rmul__(self, o):
        return self._binop(o, np.multiply, True)

    def __truediv__(self, o):
        return self._binop(o, np.divide)

    def __rtruediv__(self, o):
        return self._binop(o, np.divide, True)

    def __neg__(self):
        return self._binop(-1.0, np.multiply)

    def _inplace(self, other, op):
        _accumulate(self, other, op)
        return self

    def __iadd__(self, o):
        return self._inplace(o, np.add)

    def __isub__(self, o):
        return self._inplace(o, np.subtract)

    def __imul__(self, o):
        return self._inplace(o, np.multiply)

    def __itruediv__(self, o):
        return self._inplace(o, np.divide)

    def __bool__(self):
        if self.size != 1:
            fail("err_ambiguous_tensor_truth_value", "Cannot evaluate truth value of a multi-element tensor/array")
        fail("err_dynamic_control_flow_not_supported", "Control flow depending on tensor values is not supported.")

    def _to_python(self, *_args):
        # A tensor's values never become Python values: the instruction stream must not
        # depend on data (neuronxcc traces the kernel once, nki-facts §2.4).
        fail("err_dynamic_control_flow_not_supported",
             "Converting a tensor's values to a Python number is not supported: control flow and "
             "shapes cannot depend on tensor values.")

    __int__ = __float__ = __complex__ = __index__ = __round__ = __trunc__ = __floor__ = __ceil__ = _to_python

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"NkiTensor({self.root.name}, shape={self.shape}, dtype={dtypes.name(self.dtype)}, buffer={self.buffer})"


def _hide(name):
    """Takes slot ``name``'s descriptor out of NkiTensor; returns its (get, set)."""
    descriptor = NkiTensor.__dict__[name]
    delattr(NkiTensor, name)
    return descriptor.__get__, descriptor.__set__


_data_of, _set_data = _hide("_data")
_blocks_of, _set_blocks = _hide("_blocks")
_cow_of, _set_cow = _hide("_cow")
_written_of, _set_written = _hide("_written")


# --- operator dispatch table -------------------------------------------------------------
# The operators of NkiTensor are NKI instructions implemented by modules that import this
# one: nki_emu.language (element-wise ops, conversions) and nki_emu.assign (``t[k] = v``,
# ``t op= v``). They fill this table once, at import, through bind_operators(); the package
# imports both before any kernel runs. The entries are module globals, so a call costs one
# global lookup (a function-level import cost ~1 us per operator) and the worker's
# integrity snapshot (docs/isolation.md, rule R5) sees any rebinding.
_OPERATORS = ("elementwise", "broadcast_to", "copy", "expand_dims", "assign", "accumulate")


def _unbound(*_args, **_kwargs):
    raise RuntimeError("NkiTensor operators are not bound: import nki_emu (it loads nki_emu.language "
                       "and nki_emu.assign, which implement them)")


_elementwise = _broadcast_to = _copy = _expand_dims = _assign = _accumulate = _unbound


def bind_operators(**implementations):
    """Fills the operator dispatch table. Keys: ``elementwise(op, a, b, operator=True)``
    (``+ - * /``, unary minus), ``broadcast_to(t, shape)``, ``copy(t, dtype=)``
    (``astype``), ``expand_dims(t, axis)``, ``assign(view, value)`` (``t[k] = v``) and
    ``accumulate(view, value, op)`` (``t op= v``). Raises KeyError for another name."""
    table = globals()
    for name, function in implementations.items():
        if name not in _OPERATORS:
            raise KeyError(f"unknown NkiTensor operator {name!r}; expected one of {_OPERATORS}")
        table["_" + name] = function


_NO_HOST_ACCESS = ("NKI tensors have no host-side values: kernels read and write them only through "
                   "NKI instructions (nl.load, nl.store, nisa.*)")


# --- storage (emulator-internal) ------------------------------------------------------
def forget_owners():
    """Forgets which fresh results own their arrays (the zero-copy adoption candidates);
    :func:`nki_emu.run` calls it when a run starts and ends."""
    _OWNERS.clear()


def blocks_of(root):
    """{block index: flat array} of a block-dim root whose blocks are not made dense yet,
    else None (internal: never hand it to a kernel)."""
    return _blocks_of(root)


def cow_of(root):
    """Copy-on-write state of a root: False, True or a set of block indices (internal)."""
    return _cow_of(root)


def _fill_value(t, sdtype):
    if t.fill is None:
        return np.nan if sdtype.kind == "f" else 0
    return dtypes.round_to(np.asarray(t.fill, dtype=sdtype), t.dtype)


def _block(root, blocks, b):
    """(S, block elements) array of block ``b`` of a block-dim root (allocated and filled
    on first use)."""
    blk = blocks.get(b)
    if blk is None:
        sdtype = dtypes.storage(root.dtype)
        blk = blocks[b] = np.full((runstack.batch(), root.block_elems), _fill_value(root, sdtype), dtype=sdtype)
    return blk


def _block_index(root, lay):
    """Block index holding the whole affine view ``lay`` of a block-dim root, or None."""
    be = root.block_elems
    lo, hi = lay.span()
    b = lo // be
    return b if hi // be == b else None


def _contiguous(lay):
    """True if affine layout ``lay`` is C-contiguous in its root (a reshape needs no copy)."""
    acc = 1
    for n, st in zip(reversed(lay.shape), reversed(lay.strides)):
        if n != 1 and st != acc:
            return False
        acc *= n
    return True


def root_data(root):
    """The root's values as one array of shape (S,) + declared shape (a block-dim root is
    made dense on this call; the members of a batched argument are stacked: a copy)."""
    blocks = _blocks_of(root)
    if blocks is None:
        data = _data_of(root)
        return np.stack(data) if type(data) is Members else data
    sdtype = dtypes.storage(root.dtype)
    shape = (runstack.batch(),) + root.layout.shape
    nbytes = math.prod(shape) * sdtype.itemsize
    fill = _fill_value(root, sdtype)
    dense = np.zeros(shape, sdtype) if (fill == 0 or nbytes > NAN_FILL_LIMIT) else np.full(shape, fill, sdtype)
    flat = dense.reshape(shape[0], math.prod(shape[1:]))  # not -1: a run may have 0 members
    be = root.block_elems
    for b, blk in blocks.items():
        flat[:, b * be:(b + 1) * be] = blk
    _set_data(root, dense)
    _set_blocks(root, None)
    _set_cow(root, False)
    return dense


def _strided(data, lay, member_elems, offset=0):
    """Batched view ``(S,) + lay.shape`` of layout ``lay`` into ``data`` (S members of
    ``member_elems`` elements each, C order), ``offset`` elements subtracted."""
    if data.shape[0] == 0:  # a run of no members (tracing a program: nki_emu.program)
        return np.empty((0,) + lay.shape, data.dtype)
    size = data.itemsize
    return np.ndarray((data.shape[0],) + lay.shape, data.dtype, buffer=data, offset=(lay.offset - offset) * size,
                      strides=(member_elems * size,) + tuple(s * size for s in lay.strides))


def _member_view(member, lay):
    """One member's view of layout ``lay`` (a Members root's array)."""
    size = member.itemsize
    return np.ndarray(lay.shape, member.dtype, buffer=member, offset=lay.offset * size,
                      strides=tuple(s * size for s in lay.strides))


def _stack_members(members, lay):
    """A fresh (S,) + lay.shape array of every member's view of ``lay`` (one copy)."""
    first = members[0]
    out = np.empty((len(members),) + lay.shape, first.dtype)
    size = first.itemsize
    offset, strides = lay.offset * size, tuple(s * size for s in lay.strides)
    for index, member in enumerate(members):
        out[index] = np.ndarray(lay.shape, member.dtype, buffer=member, offset=offset, strides=strides)
    return out


def values(t):
    """Current values of tensor or view ``t`` as a NumPy array of shape (S,) + t.shape:
    a view of the storage for roots and affine views, a copy for gathers and for the
    members of a batched kernel argument. Internal: kernels never get it."""
    root = t.root
    if root is t:
        data = _data_of(t)
        if _blocks_of(t) is not None or type(data) is Members:
            return root_data(root)
        return data
    lay = t.layout
    if lay is not None:
        blocks = _blocks_of(root)
        if blocks is not None:
            b = _block_index(root, lay)
            if b is not None:
                be = root.block_elems
                return _strided(_block(root, blocks, b), lay, be, b * be)
            data = root_data(root)
        else:
            data = _data_of(root)
            if type(data) is Members:
                return _stack_members(data, lay)
        return _strided(data, lay, data.size // max(1, data.shape[0]))
    return _gathered(t)


def _gathered(t):
    """Values (S,) + grid of a gather view (out-of-bound elements read as 0)."""
    g, root = t.gather, t.root
    data = _data_of(root) if _blocks_of(root) is None else root_data(root)
    per_member = gather_members(g)
    if per_member is None:
        idx, inb = gather_flat(g), gather_inb(g)
        if type(data) is Members:
            out = np.stack([m.reshape(-1)[idx] for m in data])
        else:
            out = data.reshape(data.shape[0], math.prod(data.shape[1:]))[:, idx]
    else:
        idx, inb = per_member
        if type(data) is Members:
            out = np.stack([m.reshape(-1)[i] for m, i in zip(data, idx)])
        else:
            n = data.shape[0]
            out = np.take_along_axis(data.reshape(n, math.prod(data.shape[1:])), idx.reshape(n, math.prod(idx.shape[1:])),
                                      axis=1).reshape(idx.shape)
    if inb is not None:
        out = np.where(inb, out, 0).astype(out.dtype)
    return out


def read(t):
    """A fresh C-contiguous copy of ``t``'s values, (S,) + t.shape (one copy whatever the
    storage: what a load reads)."""
    root = t.root
    if t.layout is not None and _blocks_of(root) is None and type(_data_of(root)) is Members:
        return values(t)  # already a fresh stack of the members' views
    return np.array(values(t), copy=True)


def _mask_view(mask, t):
    """The part of a root's written-mask that view ``t`` covers (affine views); batched
    (S,) + t.shape when the mask has diverged per member."""
    if t.root is t:
        return mask
    lay = t.layout
    if mask.ndim > len(t.root.layout.shape):
        return _strided(mask, lay, mask.size // max(1, mask.shape[0]))
    return np.ndarray(lay.shape, np.bool_, buffer=mask, offset=lay.offset, strides=lay.strides)


def write(t, vals, where=None, batched=True):
    """Stores ``vals`` into tensor or view ``t`` where ``where`` (a static mask of
    t.shape) is true (the write of every emulated instruction); marks the elements
    written. ``vals``: batched, (S,) + a shape that fits t.shape, or static
    (``batched=False``: one member's value, the same for all).
    Raises err_cannot_update_immutable_parameter / err_tensor_access_out_of_bound."""
    root = t.root
    if root.immutable:
        fail("err_cannot_update_immutable_parameter", "Cannot update immutable parameter")
    t.check_bounds(where)
    if isinstance(t.dtype, dtypes.NkiDType):
        vals = dtypes.round_to(vals, t.dtype)
    vals = np.asarray(vals)
    lay = t.layout
    blocks = _blocks_of(root)
    if lay is not None and blocks is not None:
        if where is None and batched and _adopt(t, blocks, vals):
            root.version += 1
            return
        b = _block_index(root, lay)
        cow = _cow_of(root)
        if b is not None and b in blocks and isinstance(cow, set) and b in cow:
            blocks[b] = blocks[b].copy()  # copy-on-write of an adopted block
            cow.discard(b)
    if _cow_of(root) is True:
        _set_data(root, _data_of(root).copy())  # copy-on-write: the array was adopted by a block
        _set_cow(root, False)
    written = _written_of(root)
    if lay is not None:
        dst = values(t)
        vals = batch.fit(vals, dst.shape, batched)
        if where is None:
            dst[...] = vals
            written = _stored(root, written, dst)
            if written is not None:
                _mask_view(written, t)[...] = True
        else:
            np.copyto(dst, np.broadcast_to(vals, dst.shape), where=np.broadcast_to(where, dst.shape))
            written = _stored(root, written, dst, where)
            if written is not None:
                m = _mask_view(written, t)
                np.logical_or(m, np.broadcast_to(where, m.shape), out=m)
    else:
        _write_gather(t, vals, where, batched, written)
    root.version += 1


def _write_gather(t, vals, where, batched, written):
    """The write of :func:`write` through a gather view (indirect or masked out-of-bound
    stores): only in-bound, selected elements; per member when the members' indices differ."""
    g, root = t.gather, t.root
    data = root_data(root)
    n = data.shape[0]
    flat = data.reshape(n, math.prod(data.shape[1:]))
    src = np.broadcast_to(batch.fit(vals, (n,) + g.shape, batched), (n,) + g.shape)
    sel = np.ones(g.shape, bool) if where is None else np.broadcast_to(where, g.shape).copy()
    per_member = gather_members(g)
    if per_member is None:
        inb = gather_inb(g)
        if inb is not None:
            sel &= inb
        idx = gather_flat(g)[sel]
        stored = src[:, sel]
        flat[:, idx] = stored
        written = _stored(root, written, stored)
        if written is not None:
            _flat_mask(written, root)[..., idx] = True
        return
    indices, inb = per_member
    if written is not None:
        runstack.current().data_dependent = True  # the members' written elements may differ now
    if isinstance(written, np.ndarray) and written.ndim == len(root.layout.shape):
        written = np.ascontiguousarray(np.broadcast_to(written, (n,) + written.shape))  # members diverge now
        _set_written(root, written)
    for member in range(n):
        chosen = sel if inb is None else sel & inb[member]
        idx = indices[member][chosen]
        stored = src[member][chosen]
        flat[member, idx] = stored
        written = _stored(root, written, stored)
        if written is not None:
            if written.ndim == len(root.layout.shape):  # a mask made from the data: per member now
                written = np.ascontiguousarray(np.broadcast_to(written, (n,) + written.shape))
                _set_written(root, written)
            written[member].reshape(-1)[idx] = True


def _stored(root, written, stored, where=None):
    """The written-mask to mark after values ``stored`` (selected by ``where``) were
    written into ``root``: ``written`` itself (a mask, or None: untracked), None for a
    root tracked by sentinel whose stored values are not the sentinel (the data marks
    itself), else the exact mask made from the data now (nki_emu.sentinel), which the
    root keeps from then on (the caller marks this write's elements in it)."""
    if written is not BY_SENTINEL:
        return written
    if not sentinel.holds(stored, where):
        return None
    mask = sentinel.mask_from(_data_of(root))
    _set_written(root, mask)
    return mask


def _flat_mask(written, root):
    """A root's written-mask flattened: (elements,) when shared, (S, elements) per member."""
    lead = written.shape[:written.ndim - len(root.layout.shape)]
    return written.reshape(lead + (math.prod(written.shape[len(lead):]),))  # not -1: 0 members


def update_in_place(t, fn, operand, batched=True):
    """``t = fn(t, operand)`` computed into view ``t``'s memory (``fn`` a NumPy ufunc;
    ``operand`` batched, or static with ``batched=False``); saves the temporary and the
    copy of :func:`write`. Returns False (nothing done) where only :func:`write` applies:
    gathers, emulated dtypes, copy-on-write blocks, immutable roots."""
    root = t.root
    cow = _cow_of(root)
    if t.layout is None or root.immutable or cow is True or isinstance(t.dtype, dtypes.NkiDType):
        return False
    if _blocks_of(root) is not None:
        b = _block_index(root, t.layout)
        if b is None or (isinstance(cow, set) and b in cow):
            return False
    dst = values(t)
    fn(dst, batch.fit(operand, dst.shape, batched), out=dst, casting="unsafe")
    written = _stored(root, _written_of(root), dst)
    if written is not None:
        _mask_view(written, t)[...] = True
    root.version += 1
    return True


def _adopt(t, blocks, vals):
    """Zero-copy write: a fresh result array covering exactly one whole block of ``t``'s
    root becomes that block (both sides copy-on-write afterwards). Returns True if adopted."""
    root, lay = t.root, t.layout
    be = root.block_elems
    n = vals.shape[0] if vals.ndim else 0
    if vals.size != n * be or n != runstack.batch() or vals.base is not None or not vals.flags.c_contiguous \
            or vals.dtype != dtypes.storage(root.dtype) or lay.offset % be:
        return False
    if _block_index(root, lay) is None or not _contiguous(lay) or math.prod(lay.shape) != be:
        return False
    src = _OWNERS.get(id(vals))
    src = src() if src is not None else None
    if src is None or _data_of(src) is not vals:
        return False
    b = lay.offset // be
    blocks[b] = vals.reshape(n, be)
    cow = _cow_of(root)
    if not isinstance(cow, set):
        cow = set()
        _set_cow(root, cow)
    cow.add(b)
    _set_cow(src, True)
    return True


def unwritten(t):
    """Coverage of HBM tensor or view ``t`` by stores: None when its root keeps no
    written-mask (kernel arguments), else (number of elements never written, index of
    the first one as a tuple, or None when all were written). With a per-member mask
    (indirect stores), an element counts as written only if every member wrote it."""
    written = _written_of(t.root)
    if written is None:
        return None
    if written is BY_SENTINEL:
        if t.layout is not None:
            count, first = sentinel.missing(values(t))
            return (0, None) if count == 0 else (count, first)
        written = sentinel.mask_from(_data_of(t.root))  # a gather view: its indices on an exact mask
    if t.layout is not None:
        m = _mask_view(written, t)
    else:
        per_member = gather_members(t.gather)
        flat = _flat_mask(written, t.root)
        if per_member is None:
            m = flat[..., gather_flat(t.gather)]
        else:
            m = np.stack([(flat[i] if flat.ndim > 1 else flat)[idx] for i, idx in enumerate(per_member[0])])
    if m.ndim > len(t.shape):
        m = m.all(axis=0)
    missing = m.size - int(np.count_nonzero(m))
    if missing == 0:
        return 0, None
    first = np.unravel_index(int(np.argmin(m.reshape(-1))), m.shape)
    return missing, tuple(int(i) for i in first)


def to_host(t):
    """A returned tensor's values, (S,) + t.shape (what :func:`nki_emu.run` hands back):
    the root's own array, a copy of a view's values, or, for a kernel argument given as
    :class:`Members`, the members' own arrays (so that an output aliasing an input stays
    visible to the harness)."""
    root = t.root
    data = _data_of(root) if _blocks_of(root) is None else None
    if type(data) is Members:
        if t is root:
            return data
        if t.layout is not None:
            return Members(_member_view(m, t.layout) for m in data)
    return root_data(t) if t.root is t else np.array(values(t))


def from_numpy(array, name, immutable=True, batched=False):
    """Kernel argument: an immutable shared-HBM tensor wrapping ``array`` (no copy if
    contiguous). ``batched``: ``array`` holds every member, (S,) + shape or
    :class:`Members`; else it is the one member of an ordinary run."""
    if not batched and not isinstance(array, Members):
        array = np.ascontiguousarray(array)
        # the caller's own array: a returned input is that array (aliasing stays visible);
        # a mutable one is written in place
        array = Members((array,)) if immutable else array.reshape((1,) + array.shape)
    if isinstance(array, Members):
        shape, dtype = array[0].shape, array[0].dtype
    else:
        array = np.ascontiguousarray(array)
        shape, dtype = array.shape[1:], array.dtype
    return NkiTensor.allocate(shape, dtype, "shared_hbm", name=name, data=array, immutable=immutable)


def start_partition(t):
    """First partition a view of an on-chip tensor starts at (0 for roots and gathers)."""
    if t.root is t or t.layout is None:
        return 0
    root = t.root
    stride = root.layout.strides[root.par_axis]
    return (t.layout.offset // stride) % root.layout.shape[root.par_axis]


def as_tile(x, what="operand"):
    """Checks that ``x`` is an on-chip tile and returns it."""
    if not isinstance(x, NkiTensor):
        fail("err_failed_to_infer_tile_from_local_tensor", f"Failed to infer tile from tensor '{what}'")
    return x

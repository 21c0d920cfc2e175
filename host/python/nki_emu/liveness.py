"""Block liveness: frees the blocks of block-dim SBUF/PSUM tensors once dead.

A kernel in NKIBench style declares every buffer once at the top with block
dimensions covering the whole problem (``(32, 7, par_dim(128), 1024)``) and
touches block ``[i0, i1]`` only inside iteration ``(i0, i1)`` of its loops.
neuronxcc maps such a tensor onto a few physical SBUF buffers because each
block is dead after its iteration (nki-facts §2.1). The emulator has to hold the
values, and kept every block alive until the kernel returned: it wrote as
much fresh memory as the declared buffers (3 GB for bmm), and page faults
dominated its run time.

This module proves from the kernel's source, as the compiler's liveness
analysis would, that a block cannot be touched after a loop iteration ends,
and :func:`release` drops it then; freed memory is reused by the next
blocks. The proof (:func:`analyse`) is conservative. A tensor ``V`` takes
part only if

* ``V`` is bound once, by a top-level ``V = nl.<alloc>(...)`` statement of
  the kernel function, and is never used whole (no ``V.shape``, ``f(V)``,
  ``return V``, no use inside nested functions or comprehensions);
* every use is a subscript ``V[...]`` without ``...``/``None``/starred elements that
  is an assignment target or is consumed on the spot: an argument of an
  ``nl``/``nisa`` call or an operand of an arithmetic operator (a view bound
  to a name or passed to a user helper could outlive its iteration);
* for each loop ``M1 .. Mk`` enclosing all uses (outermost first), every use
  indexes the same position with the bare loop variable of ``Mj`` (names of
  the enclosing loops are distinct and never assigned except by their ``for``).

Then blocks touched in iteration ``(m1 .. mk)`` have coordinate ``mj`` at
position ``pj`` and are touched in no other iteration: when iteration
``mk`` of loop ``Mk`` ends, they are dead. Only ``nl.*_range`` loops are
observed (``runtime.loop_range`` calls :func:`release` after each
iteration); kernels without source (``exec``) or whose file no longer matches
their code are not analysed.
"""
import ast
import inspect
import textwrap

from . import tensor
from .program import state as program_state

_ALLOCATORS = {"ndarray", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like"}
_RANGE_CALLS = {"affine_range", "sequential_range", "static_range"}
_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp,
                  ast.DictComp, ast.GeneratorExp, ast.ClassDef)

_PLANS = {}  # code object -> {line of a range call: [(tensor name, ((loop var, position), ...))]}


def plan_for(code, lineno):
    """Releases due after each iteration of the ``nl.*_range`` loop called at ``lineno``
    of the function whose code object is ``code``: a list of
    ``(tensor name, ((loop variable, block position), ...))`` or None. The
    analysis runs once per code object."""
    plans = _PLANS.get(code)
    if plans is None:
        plans = _PLANS[code] = analyse(code)
    return plans.get(lineno)


def bind(frame, releases):
    """Resolves ``releases`` (see :func:`plan_for`) against the kernel's ``frame`` when its
    loop starts: the tensors and the indices of the enclosing loops are fixed for the
    whole loop. Returns [(root, block strides, [(position, value or None)], complete)],
    None standing for the loop's own index and ``complete`` telling that every block
    dimension is fixed (one block per iteration)."""
    local = frame.f_locals
    bound = []
    for name, slots in releases:
        root = program_state.unwrap(local.get(name))  # a traced kernel holds recording handles
        if not isinstance(root, tensor.NkiTensor) or root.root is not root \
                or tensor.blocks_of(root) is None:
            continue
        block_shape = root.layout.shape[:root.par_axis]
        if any(pos >= len(block_shape) for _, pos in slots[:-1]) or slots[-1][1] >= len(block_shape):
            continue
        if any(var not in local for var, _ in slots[:-1]):
            continue
        strides = []
        for pos in range(len(block_shape)):
            stride = 1
            for d in block_shape[pos + 1:]:
                stride *= d
            strides.append((stride, block_shape[pos]))
        fixed = [(pos, int(program_state.unwrap(local[var]))) for var, pos in slots[:-1]] + [(slots[-1][1], None)]
        complete = len({pos for pos, _ in fixed}) == len(strides)  # one block per iteration
        bound.append((root, strides, fixed, complete))
    return bound


def release(bound, iteration):
    """Drops the blocks that iteration ``iteration`` of the loop owned (``bound`` from
    :func:`bind`)."""
    for root, strides, fixed, complete in bound:
        blocks = tensor.blocks_of(root)
        if not blocks:
            continue
        if complete:  # every block dim is fixed: exactly one block dies
            b = sum(strides[pos][0] * (iteration if v is None else v) for pos, v in fixed)
            dead = [b] if b in blocks else []
        else:
            wanted = [(strides[pos][0], strides[pos][1], iteration if v is None else v) for pos, v in fixed]
            dead = [b for b in blocks if all((b // s) % n == v for s, n, v in wanted)]
        if dead and program_state.RECORDER is not None:
            program_state.RECORDER.released(root, dead)  # the replayed program frees them at the same point
        for b in dead:
            del blocks[b]
        cow = tensor.cow_of(root)
        if dead and isinstance(cow, set):
            cow.difference_update(dead)


def analyse(function):
    """Liveness plan of a kernel function or code object (see module docstring):
    {line of a range call: releases}; {} when it cannot be analysed (no source,
    syntax the analysis does not cover)."""
    code = getattr(function, "__code__", function)
    try:
        source = textwrap.dedent(inspect.getsource(code))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return {}
    if not tree.body or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    func = tree.body[0]
    if func.name != code.co_name:
        return {}  # the file changed since the code was compiled
    offset = code.co_firstlineno - 1
    declared = _top_level_allocations(func)
    if not declared:
        return {}
    uses = _Uses(set(declared))
    for stmt in func.body:
        uses.visit(stmt)
    rebound = _rebound_names(func)
    plans = {}
    for name in declared:
        if name in uses.disqualified or not uses.sites.get(name):
            continue
        loop, slots = _common_slots(uses.sites[name])
        if loop is not None and any(var in rebound for var, _ in slots):
            continue  # a loop index assigned in the body no longer names the iteration
        if loop is not None:
            plans.setdefault(loop.iter.lineno + offset, []).append((name, slots))
    return plans if _matches(code, plans) else {}


def _matches(code, plans):
    """Guards against source that is not the code's (file edited after import): every
    planned tensor and loop variable must be a local of ``code`` and every planned loop
    line one of its lines."""
    local_names = set(code.co_varnames) | set(code.co_cellvars)
    lines = {line for _, _, line in code.co_lines() if line is not None}
    for lineno, releases in plans.items():
        if lineno not in lines:
            return False
        for name, slots in releases:
            if name not in local_names or any(var not in local_names for var, _ in slots):
                return False
    return True


def _rebound_names(func):
    """Names assigned anywhere in ``func`` other than as the target of a ``for``."""
    for_targets = {id(node.target) for node in ast.walk(func) if isinstance(node, ast.For)}
    return {node.id for node in ast.walk(func)
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del))
            and id(node) not in for_targets}


def _top_level_allocations(func):
    """Names bound exactly once in ``func``, by a top-level ``name = <module>.<alloc>(...)``."""
    stores = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.arg):
            stores[node.arg] = stores.get(node.arg, 0) + 1
    names = []
    for stmt in func.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)
                and stmt.value.func.attr in _ALLOCATORS and stores.get(stmt.targets[0].id) == 1):
            names.append(stmt.targets[0].id)
    return names


class _Uses(ast.NodeVisitor):
    """Collects, per candidate tensor, each subscript use with its enclosing loops."""

    def __init__(self, names):
        self.names = names
        self.sites = {}          # name -> [(loops, subscript)]
        self.disqualified = set()
        self.loops = []          # enclosing ast.For nodes, outermost first
        self.parents = []

    def generic_visit(self, node):
        self.parents.append(node)
        super().generic_visit(node)
        self.parents.pop()

    def visit_For(self, node):
        self.parents.append(node)
        self.visit(node.target)
        self.visit(node.iter)
        self.loops.append(node)
        for stmt in node.body:
            self.visit(stmt)
        self.loops.pop()
        for stmt in node.orelse:
            self.visit(stmt)
        self.parents.pop()

    def _nested(self, node):
        # names used inside nested scopes are disqualified outright
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in self.names:
                self.disqualified.add(sub.id)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _nested
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _nested

    def visit_Name(self, node):
        if node.id not in self.names or isinstance(node.ctx, ast.Store) and not self.loops and \
                self.parents and isinstance(self.parents[-1], ast.Assign):
            return  # the declaration itself
        parent = self.parents[-1] if self.parents else None
        if not (isinstance(parent, ast.Subscript) and parent.value is node and self._consumed(parent)):
            self.disqualified.add(node.id)
            return
        elements = parent.slice.elts if isinstance(parent.slice, ast.Tuple) else [parent.slice]
        if any(isinstance(e, ast.Starred) or (isinstance(e, ast.Constant) and e.value in (Ellipsis, None))
               for e in elements):
            self.disqualified.add(node.id)
            return
        self.sites.setdefault(node.id, []).append((tuple(self.loops), elements))

    def _consumed(self, subscript):
        """True if the view made by ``subscript`` cannot outlive the statement."""
        holder = self.parents[-2] if len(self.parents) >= 2 else None
        if isinstance(subscript.ctx, ast.Store):
            return True
        if isinstance(holder, ast.AugAssign) and holder.target is subscript:
            return True
        if isinstance(holder, ast.keyword):
            holder = self.parents[-3] if len(self.parents) >= 3 else None
        if isinstance(holder, ast.Call):
            return _is_api_call(holder) and subscript is not holder.func
        return isinstance(holder, (ast.BinOp, ast.UnaryOp, ast.Compare))


def _is_api_call(call):
    """``nl.x(...)``, ``nisa.x(...)``, ``nki.language.x(...)``: module-qualified calls."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    base = func.value
    while isinstance(base, ast.Attribute):
        base = base.value
    return isinstance(base, ast.Name) and base.id in {"nl", "nisa", "nki", "language", "isa", "neuronxcc"}


def _common_slots(sites):
    """(deepest ast.For whose iterations own disjoint blocks, ((var, position), ...)) or (None, ())."""
    chains = [loops for loops, _ in sites]
    common = []
    for level in zip(*chains):
        if all(node is level[0] for node in level):
            common.append(level[0])
        else:
            break
    slots, deepest = [], None
    for loop in common:
        if not (isinstance(loop.target, ast.Name) and _is_range_call(loop.iter)):
            break
        var = loop.target.id
        positions = None
        for loops, elements in sites:
            if [n.target.id for n in loops if isinstance(n.target, ast.Name)].count(var) != 1:
                positions = set()
                break
            here = {i for i, e in enumerate(elements) if isinstance(e, ast.Name) and e.id == var}
            positions = here if positions is None else positions & here
        if not positions:
            break
        slots.append((var, min(positions)))
        deepest = loop
    return (deepest, tuple(slots)) if deepest is not None else (None, ())


def _is_range_call(node):
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in _RANGE_CALLS)

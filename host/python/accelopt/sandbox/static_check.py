"""Static anti-cheat scan of a candidate kernel's source (docs/isolation.md, rules S1-S4).

The scan walks the AST before any of the kernel runs and reports:

* ``forbidden_import`` (S1): importing a module that gives access to the
  process, the file system, the network, the interpreter's internals, timers
  or the emulator/harness itself (:data:`FORBIDDEN_MODULES`), including
  ``__import__`` and ``importlib``.
* ``forbidden_access`` (S2-S4): calling builtins that execute or open things
  (:data:`FORBIDDEN_NAMES`), touching dunder attributes (``__globals__``,
  ``__class__``, ``__dict__`` ...) or private ones (``np._x``), names that
  reach interpreter or emulator state (:data:`FORBIDDEN_ATTRIBUTES`: frames,
  ``sys.modules``, NumPy file I/O, the cost model, host-side tensor values
  such as ``.data``/``.tolist()``), ``getattr``/``hasattr`` other than called
  directly with a constant public name (``g = getattr`` is an alias), and
  storing into an imported module (``np.allclose = ...``, ``nl.x[...] = ...``).

The scan is a filter, not a proof: the worker's runtime limits (seccomp,
Landlock, rlimits, integrity check) contain what slips through.
"""
import ast

FORBIDDEN_IMPORT = "forbidden_import"
FORBIDDEN_ACCESS = "forbidden_access"

# Top-level module names a kernel may not import (S1).
FORBIDDEN_MODULES = frozenset({
    # process, OS and files
    "os", "posix", "nt", "sys", "subprocess", "shutil", "pathlib", "tempfile", "glob", "io", "fcntl",
    "mmap", "pty", "tty", "termios", "resource", "signal", "platform", "sysconfig", "site", "atexit",
    "faulthandler", "pwd", "grp", "shelve", "dbm", "sqlite3",
    # foreign code and the interpreter's machinery
    "ctypes", "_ctypes", "cffi", "importlib", "imp", "pkgutil", "runpy", "zipimport", "builtins",
    "__builtin__", "gc", "inspect", "types", "code", "codeop", "marshal", "pickle", "copyreg", "dis",
    "traceback", "weakref", "_thread", "threading", "multiprocessing", "concurrent", "asyncio",
    # attribute access and imports by runtime strings (string.Formatter().get_field,
    # pydoc.locate), debuggers and tracers
    "string", "pydoc", "pdb", "bdb", "trace", "tracemalloc", "unittest", "doctest", "linecache",
    "fileinput",
    # network
    "socket", "_socket", "ssl", "select", "selectors", "http", "urllib", "urllib3", "requests",
    "ftplib", "smtplib", "telnetlib", "xmlrpc", "socketserver",
    # timers
    "time", "timeit", "datetime", "sched",
    # the emulator, the harness and the host
    "nki_emu", "accelopt", "_accelopt_host", "runner",
})

# Builtins a kernel may not name at all (S2).
FORBIDDEN_NAMES = frozenset({
    "__import__", "open", "exec", "eval", "compile", "globals", "locals", "vars", "breakpoint",
    "input", "setattr", "delattr", "__builtins__", "__loader__", "__spec__", "memoryview", "exit", "quit",
})

# Attribute names that reach state a kernel has no business with (S3).
FORBIDDEN_ATTRIBUTES = frozenset({
    # interpreter internals
    "modules", "f_globals", "f_locals", "f_back", "f_code", "gi_frame", "cr_frame", "tb_frame",
    "_getframe", "environ", "system", "popen", "ctypeslib",
    # NumPy file I/O (reading reference outputs, replaying results)
    "load", "save", "savez", "savez_compressed", "fromfile", "tofile", "memmap", "loadtxt",
    "savetxt", "genfromtxt", "fromregex", "DataSource",
    # the emulator's runtime and cost model
    "runtime", "cost", "tracer", "Tracer", "scheduler", "formulas", "residency", "last_profile",
    "benchmark_result",
    # host-side values of tensors (work outside the instruction stream; the emulator's
    # tensors expose none of these, so only a hostile kernel names them)
    "data", "arr", "tolist", "tobytes",
    # attribute access by computed name
    "attrgetter", "methodcaller",
})

# Builtins that take an attribute name: called directly with a constant name only (S2).
_ATTRIBUTE_BUILTINS = frozenset({"getattr", "hasattr"})

# `nl.load` is the NKI load instruction: allowed on NKI modules only.
_NKI_ROOTS = ("neuronxcc", "nki")
_NKI_ALLOWED_ATTRIBUTES = frozenset({"load", "save"})

# Profile "fib" (FlashInfer-Bench solutions: ordinary PyTorch/Triton code, several
# files): relative imports between the solution's own files are allowed, and the
# NKI-only names (the emulator's storage and cost model) are not refused; `tl.load`
# and `tl.store` are Triton's instructions (docs/flashinfer.md).
_FIB_ALLOWED_ATTRIBUTES = frozenset({"data", "arr", "tolist", "tobytes", "runtime", "cost", "tracer", "Tracer",
                                     "scheduler", "formulas", "residency", "last_profile", "benchmark_result"})
_FIB_LOAD_ROOTS = ("triton",)


class Violation:
    """One finding: ``kind`` (forbidden_import|forbidden_access), ``line`` (1-based) and ``message``."""

    __slots__ = ("kind", "line", "message")

    def __init__(self, kind, line, message):
        self.kind, self.line, self.message = kind, line, message

    def __repr__(self):
        return f"Violation({self.kind!r}, {self.line}, {self.message!r})"


def _is_dunder(name):
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


class _Scanner(ast.NodeVisitor):
    def __init__(self, profile="nki"):
        self.fib = profile == "fib"
        self.forbidden_attributes = FORBIDDEN_ATTRIBUTES - _FIB_ALLOWED_ATTRIBUTES if self.fib else FORBIDDEN_ATTRIBUTES
        self.found = []
        self.module_aliases = {}  # local name -> imported module path

    def _add(self, kind, node, message):
        self.found.append(Violation(kind, getattr(node, "lineno", 0), message))

    def _check_module(self, node, name):
        root = name.split(".")[0]
        if root in FORBIDDEN_MODULES:
            self._add(FORBIDDEN_IMPORT, node, f"import of '{name}' is not allowed in a kernel")
            return False
        return True

    def visit_Import(self, node):
        for alias in node.names:
            if self._check_module(node, alias.name):
                local = alias.asname or alias.name.split(".")[0]
                self.module_aliases[local] = alias.name if alias.asname else alias.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        if node.level and self.fib:
            for alias in node.names:
                if alias.name.startswith("_") and not _is_dunder(alias.name):
                    self._add(FORBIDDEN_ACCESS, node, f"'from . import {alias.name}' is not allowed")
        elif node.level:
            self._add(FORBIDDEN_IMPORT, node, "relative imports are not allowed in a kernel")
        elif self._check_module(node, node.module or ""):
            for alias in node.names:
                if alias.name == "*":
                    # a star import binds names the scan cannot see (`from operator import *`
                    # brings attrgetter under its own name): allowed from the NKI API only
                    if (node.module or "").split(".")[0] not in _NKI_ROOTS:
                        self._add(FORBIDDEN_ACCESS, node, f"'from {node.module} import *' is not allowed in a kernel "
                                                          "(star imports are allowed from the NKI API only)")
                    continue
                if alias.name.startswith("_") or alias.name in self.forbidden_attributes - _NKI_ALLOWED_ATTRIBUTES:
                    self._add(FORBIDDEN_ACCESS, node, f"'from {node.module} import {alias.name}' is not allowed")
                self.module_aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in FORBIDDEN_NAMES:
            self._add(FORBIDDEN_ACCESS, node, f"use of '{node.id}' is not allowed in a kernel")
        elif node.id in _ATTRIBUTE_BUILTINS:  # reached only when not called directly: an alias
            self._add(FORBIDDEN_ACCESS, node, f"'{node.id}' may only be called directly (no aliases)")
        self.generic_visit(node)

    def _attribute_root(self, node):
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    def visit_Attribute(self, node):
        name = node.attr
        if _is_dunder(name):
            self._add(FORBIDDEN_ACCESS, node, f"access to '{name}' is not allowed in a kernel")
        elif name.startswith("_"):
            self._add(FORBIDDEN_ACCESS, node, f"access to private attribute '{name}' is not allowed in a kernel")
        elif name in self.forbidden_attributes:
            root = self._attribute_root(node)
            module = self.module_aliases.get(root, "") if root else ""
            nki = module.split(".")[0] in (_NKI_ROOTS + _FIB_LOAD_ROOTS if self.fib else _NKI_ROOTS)
            if not (nki and name in _NKI_ALLOWED_ATTRIBUTES):
                self._add(FORBIDDEN_ACCESS, node, f"access to '.{name}' is not allowed in a kernel")
        self.generic_visit(node)

    def visit_Call(self, node):
        # getattr(x, "name") / hasattr(...): only with a constant, ordinary attribute name.
        if isinstance(node.func, ast.Name) and node.func.id in _ATTRIBUTE_BUILTINS:
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                self._add(FORBIDDEN_ACCESS, node, f"{node.func.id}() with a computed attribute name is not allowed")
            elif name.value.startswith("_") or name.value in self.forbidden_attributes:
                self._add(FORBIDDEN_ACCESS, node, f"{node.func.id}(..., {name.value!r}) is not allowed in a kernel")
            for child in list(node.args) + list(node.keywords):
                self.visit(child)
            return
        self.generic_visit(node)

    def _check_store(self, target):
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_store(element)
            return
        if isinstance(target, ast.Starred):
            self._check_store(target.value)
            return
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            root = self._attribute_root(target)
            if root in self.module_aliases:
                self._add(FORBIDDEN_ACCESS, target,
                          f"assigning into the imported module '{self.module_aliases[root]}' is not allowed")

    def visit_Assign(self, node):
        for target in node.targets:
            self._check_store(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._check_store(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._check_store(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node):
        for target in node.targets:
            self._check_store(target)
        self.generic_visit(node)

    def visit_MatchClass(self, node):
        # `case object(__globals__=g)` reads attributes by keyword name: the names are
        # strings in the pattern, not Attribute nodes, so they are checked here
        for name in node.kwd_attrs:
            if name.startswith("_"):
                self._add(FORBIDDEN_ACCESS, node, f"a class pattern reading '{name}' is not allowed in a kernel")
            elif name in self.forbidden_attributes:
                self._add(FORBIDDEN_ACCESS, node, f"a class pattern reading '.{name}' is not allowed in a kernel")
        self.generic_visit(node)

    def visit_Global(self, node):
        for name in node.names:
            if name in self.module_aliases:
                self._add(FORBIDDEN_ACCESS, node, f"rebinding the imported module name '{name}' is not allowed")
        self.generic_visit(node)


def scan(source, filename="<kernel>", profile="nki"):
    """Returns the list of :class:`Violation` in ``source`` (str), in source order.

    ``profile``: "nki" (NKI kernels, the default) or "fib" (FlashInfer-Bench
    solutions: relative imports within the solution and the NKI-only names
    allowed). A source that does not parse yields no violations (the loader
    reports the SyntaxError as a compile error).
    """
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError):
        return []
    scanner = _Scanner(profile)
    scanner.visit(tree)
    return sorted(scanner.found, key=lambda v: (v.line, v.kind))


def first_violation(source, filename="<kernel>", profile="nki"):
    """Returns the first :class:`Violation` (imports before accesses on a tie), or None."""
    found = scan(source, filename, profile)
    return found[0] if found else None

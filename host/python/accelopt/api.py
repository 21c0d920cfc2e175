"""The declared boundary between the host's C++ and this Python tree (docs/architecture.md,
"The C++/Python boundary").

Every Python function the host or a built-in plugin calls is an entry of ``ENTRIES``: its
name, the module and function that implement it, the version of its contract and the JSON
schema of its argument. host/include/accelopt/api_entries.hpp declares the same entries for
C++ (tests/python/structure/test_api_boundary.py keeps the two identical, and fails on any
other "accelopt." string in C++). Before a run the host calls :func:`check` with its own table,
so a host built for other contracts than the Python tree it loads stops with the difference
instead of failing somewhere in a stage. Everything else in accelopt is internal: it may change
without a version, as long as the entries keep their contracts.
"""
import collections
import importlib

Entry = collections.namedtuple("Entry", "module function version schema doc")

_OBJECT = {"type": "object"}
_ANY = {}
_NONE = {"type": "null"}
_STRING = {"type": "string"}
_PACKED = {"description": "packed: (JSON value, list of buffers), accelopt.sandbox.codec"}


def _obj(*required, **properties):
    schema = {"type": "object"}
    if required:
        schema["required"] = list(required)
    if properties:
        schema["properties"] = properties
    return schema


ENTRIES = {
    # rules, moves and edits
    "rules.propose": Entry("accelopt.rules", "propose", 1, _obj("source"),
                           "applicable rule plans of a kernel, ranked (docs/rules.md)"),
    "rules.apply": Entry("accelopt.rules", "apply", 1, _obj("source", "plan"), "one plan applied to a kernel"),
    "edits.resolve": Entry("accelopt.edits", "resolve", 1, _OBJECT,
                           "a reply's search/replace edits applied to the parent kernel (docs/llm.md)"),
    "vocabulary.describe": Entry("accelopt.search.vocabulary", "describe", 1, _OBJECT,
                                 "the move vocabulary for one kernel (docs/search.md, LLM moves)"),
    "vocabulary.resolve_move": Entry("accelopt.search.vocabulary", "resolve_move", 1, _OBJECT,
                                     "a planner's move kind matched to an applicable move"),
    "bottleneck.weigh": Entry("accelopt.search.bottleneck", "weigh", 1, _OBJECT,
                              "profile priors of a node's moves (docs/search.md)"),
    "canon.state_hashes": Entry("accelopt.search.canon", "state_hashes", 1,
                                {"type": "object", "anyOf": [{"required": ["paths"]}, {"required": ["sources"]}],
                                 "properties": {"paths": {"type": "array"}, "sources": {"type": "array"}}},
                                "canonical AST hashes of kernels, from files or sources (graph search transpositions)"),
    # problems, peaks and prompts
    "peak.describe": Entry("accelopt.peak", "describe", 1, _OBJECT, "% of peak of a latency (nkibench/README.md)"),
    "launch_cost.describe": Entry("accelopt.launch_cost", "describe", 1, _OBJECT,
                                  "the launch cost shown in prompts"),
    # evaluation
    "nki.profile": Entry("accelopt.profile", "profile_kernel", 1, _OBJECT,
                         "profile one NKI kernel against its reference (docs/architecture.md)"),
    "fib.trial": Entry("accelopt.fib.evaluate", "trial", 1, _OBJECT,
                       "one FlashInfer-Bench trial of a solution or reference (docs/flashinfer.md)"),
    "sandbox.prepare": Entry("accelopt.sandbox.trusted", "prepare", 1, _PACKED,
                             "first step of an isolated call: the evaluator prepares the worker's job"),
    "sandbox.ahead": Entry("accelopt.sandbox.trusted", "ahead", 1, _PACKED, "a later pass sent early"),
    "sandbox.finish": Entry("accelopt.sandbox.trusted", "finish", 1, _PACKED, "the evaluator judges the worker"),
    "sandbox.discard": Entry("accelopt.sandbox.trusted", "discard", 1, _obj("token"), "an abandoned call"),
    "sandbox.settle_draws": Entry("accelopt.sandbox.draws", "settle_store", 1, _NONE,
                                  "waits for the draw store's writes (end of a profile command)"),
    # the worker process
    "worker.startup": Entry("accelopt.sandbox.worker_entry", "startup", 1, _OBJECT, "a worker zygote's start"),
    "worker.warm_up": Entry("accelopt.sandbox.worker_entry", "warm_up", 1, _ANY, "lazy imports and caches"),
    "worker.handle": Entry("accelopt.sandbox.worker_entry", "handle", 1, _PACKED, "one candidate request"),
    "worker.use_native_content_check": Entry("accelopt.sandbox.worker_entry", "use_native_content_check", 1,
                                             {"type": "boolean"}, "the C++ content check replaces Python's"),
    "worker.identity_changes": Entry("accelopt.sandbox.worker_entry", "identity_changes", 1, _ANY,
                                     "rule R5: what a call changed in the watched modules"),
    "worker.digest_changes": Entry("accelopt.sandbox.worker_entry", "digest_changes", 1, _ANY,
                                   "what a call changed in the cost model's content"),
    "integrity.watched_modules": Entry("accelopt.sandbox.integrity", "watched_modules", 1, _NONE,
                                       "(name, module) of the modules whose identity is watched"),
    "integrity.content_watch": Entry("accelopt.sandbox.integrity", "content_watch", 1, _NONE,
                                     "the cost model's content the C++ check digests"),
    "hardware.neuron_paths": Entry("accelopt.sandbox.hardware_profile", "neuron_paths", 1, _ANY,
                                   "paths a hardware worker may read (docs/trainium.md)"),
    "hardware.extra_paths": Entry("accelopt.sandbox.hardware_profile", "extra_paths", 1, _NONE,
                                  "extra paths a worker may read"),
    # backends and devices
    "backends.choose": Entry("accelopt.backends", "choose_backend", 1, _STRING, "the backend a name selects"),
    "backends.doctor": Entry("accelopt.backends.doctor", "doctor", 1, _OBJECT, "the doctor command's checks"),
    "neuron_cores.discover": Entry("accelopt.backends.neuron_cores", "discover", 1, _ANY,
                                   "the NeuronCores of this machine"),
    "gpus.discover": Entry("accelopt.backends.gpus", "discover", 1, _ANY, "the GPUs of this machine"),
    "device_profile.artifacts": Entry("accelopt.backends.device_profile", "profile_artifacts", 1, _OBJECT,
                                      "NEFF/NTFF artifacts of a hardware profile"),
    # FlashInfer-Bench
    "fib.torch_available": Entry("accelopt.fib.evaluate", "torch_available", 1, _NONE, "whether torch imports"),
    "fib.environment": Entry("accelopt.fib.evaluate", "environment", 1, _NONE, "a trace's environment"),
    "fib.open_workload": Entry("accelopt.fib.evaluate", "open_workload", 1, _OBJECT, "a workload session"),
    "fib.close_workload": Entry("accelopt.fib.evaluate", "close_workload", 1, _obj("baseline"),
                                "closes a workload session"),
    "fib.run_cuda": Entry("accelopt.fib.gpu", "run_cuda", 1, _OBJECT, "a CUDA solution on a GPU"),
    "fib.run_triton": Entry("accelopt.fib.gpu", "run_triton", 1, _OBJECT, "a Triton solution on a GPU"),
    "fib.gpu_python": Entry("accelopt.fib.gpu", "gpu_python", 1, _OBJECT, "the GPU worker's interpreter"),
    "fib.check_module": Entry("accelopt.fib.syntax", "check_module", 1, _STRING,
                              "Python syntax of a reference (None or the error)"),
    "fib.check_expression": Entry("accelopt.fib.syntax", "check_expression", 1, _STRING,
                                  "Python syntax of a constraint"),
    # runs, reports and Lua
    "report.summarize_run": Entry("accelopt.report", "summarize_run", 1, _obj("run_dir"), "a run's index entry"),
    "report.render": Entry("accelopt.report", "render_report", 1, _obj("run_dir", "out"), "a run's HTML report"),
    "report.compare_runs": Entry("accelopt.report", "compare_runs", 1, _OBJECT, "runs compared"),
    "lua.call": Entry("accelopt.lua_calls", "call", 1, {"type": "array"},
                      "accel.python_call of a Lua stage (docs/lua-stages.md)"),
}


def target(name):
    """The function behind entry ``name``; KeyError for an unknown entry."""
    entry = ENTRIES[name]
    return getattr(importlib.import_module(entry.module), entry.function)


def validate_call(module, function, arg):
    """Checks ``arg`` against the schema of the entry that ``module.function`` implements.

    The host calls this before every JSON call when ``ACCELOPT_API_VALIDATE=1`` (the test suite
    sets it; docs/architecture.md, "The C++/Python boundary"). A function that is no entry (this
    module's own ``check``, a test's module) is not checked. Raises ``ValueError`` naming the
    entry, the failing part of the argument and the rule it breaks; returns None when it holds.
    Needs ``jsonschema`` (Debian python3-jsonschema)."""
    import jsonschema

    for name, entry in ENTRIES.items():
        if (entry.module, entry.function) != (module, function):
            continue
        try:
            jsonschema.validate(arg, entry.schema)
        except jsonschema.ValidationError as error:
            where = "/".join(str(p) for p in error.absolute_path) or "(the argument)"
            raise ValueError(f"accelopt.api: the call of {name} ({module}.{function}) breaks its contract "
                             f"(version {entry.version}): at {where}: {error.message}") from None
        return None
    return None


def check(host_entries):
    """Compares the host's table with ``ENTRIES``.

    ``host_entries``: [{"name", "module", "function", "version"}] as the host was built
    (host/include/accelopt/api_entries.hpp). Returns a list of differences (one sentence each;
    empty when the host and this Python tree agree). Never raises."""
    problems = []
    seen = set()
    for item in host_entries if isinstance(host_entries, list) else []:
        name = item.get("name") if isinstance(item, dict) else None
        entry = ENTRIES.get(name)
        seen.add(name)
        if entry is None:
            problems.append(f"the host calls {name!r}, which this Python tree does not declare")
            continue
        if (item.get("module"), item.get("function")) != (entry.module, entry.function):
            problems.append(f"{name}: the host calls {item.get('module')}.{item.get('function')}, this Python tree "
                            f"declares {entry.module}.{entry.function}")
        if item.get("version") != entry.version:
            problems.append(f"{name}: the host was built for version {item.get('version')}, this Python tree "
                            f"declares version {entry.version}")
    for name in sorted(set(ENTRIES) - seen):
        problems.append(f"{name}: declared here but unknown to the host")
    return problems

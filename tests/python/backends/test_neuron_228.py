"""The neuron backend against an SDK 2.28 layout (both namespaces) and the documented
interfaces of its tools (issue 39; tests/fixtures/README.md, docs/trainium.md).

Whatever imports the stand-in SDK runs in a child interpreter (test_neuron_sdk._child):
the suite's own interpreter must keep seeing no Neuron SDK.
"""
import json
import os
import subprocess
import sys
import tempfile

from accelopt.backends import neuron_cores, neuron_errors

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from test_neuron_sdk import HOST_PYTHON, SDK, SDK_228, STANDIN_BIN, _child  # noqa: E402
FIXTURES = os.path.join(HERE, "fixtures")

# Loads a fixture kernel as the harness does and runs it on the neuron backend; prints
# {"ok", "out"?, "kind"?, "message"?}. Needs FIXTURE, TARGET and CORE in the environment.
_RUN = """
import os, numpy as np
from accelopt import loading
from accelopt.backends.neuron import NeuronBackend, kernel_namespace
os.environ["NEURON_RT_VISIBLE_CORES"] = os.environ.get("CORE", "0")
backend = NeuronBackend(os.environ.get("TARGET", "trn1"))
backend.prepare()
kernel = loading.load_kernel(os.environ["FIXTURE"])
x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
answer = {"namespace": kernel_namespace(kernel), "options": backend.compile_options()}
try:
    out = backend.run(kernel, [x])
    answer.update(ok=bool(np.array_equal(np.asarray(out), 2 * x)))
except Exception as exc:
    answer.update(ok=False, kind=backend.error_kind(exc), message=str(exc)[-600:], type=type(exc).__name__)
print(json.dumps(answer))
"""


def _run(fixture, paths, **env):
    return _child(_RUN, paths, dict({"FIXTURE": os.path.join(FIXTURES, fixture)}, **env))


def test_the_namespace_follows_the_kernels_decorator_not_the_sdk():
    # SDK 2.28 ships nki and neuronxcc.nki; the NKIBench baselines use neuronxcc.nki.
    legacy = _run("legacy_double.py", [SDK_228, SDK])
    assert legacy["namespace"] == "neuronxcc.nki", legacy
    assert legacy["ok"], legacy
    only_legacy = _run("legacy_double.py", [SDK])
    assert only_legacy["ok"], only_legacy
    # A Beta 2 kernel goes through nki.baremetal, which 2.28 documents as not available:
    # the environment's limit, never a wrong or uncompilable kernel.
    beta2 = _run("beta2_double.py", [SDK_228, SDK])
    assert beta2["namespace"] == "nki", beta2
    assert not beta2["ok"] and beta2["kind"] == "config_error", beta2
    assert "nki.baremetal" in beta2["message"] and "neuronxcc.nki" in beta2["message"], beta2


def test_tracing_errors_are_compile_errors():
    # The SDK ends a tracing error with the documented hyphenated anchor (a ValueError).
    anchored = _run("legacy_too_many_partitions.py", [SDK_228, SDK])
    assert anchored["type"] == "ValueError" and "#err-num-partition-exceed-arch-limit" in anchored["message"], anchored
    assert anchored["kind"] == "compile_error", anchored
    # Any exception raised in the kernel's own body happened while it was traced.
    asserted = _run("legacy_assert.py", [SDK])
    assert asserted["type"] == "AssertionError" and asserted["kind"] == "compile_error", asserted
    # neuronx-cc refusing the trace with a documented error code.
    refused = _run("legacy_double.py", [SDK], NEURON_STANDIN_COMPILE_FAIL="EVRF007")
    assert "NCC_EVRF007" in refused["message"] and refused["kind"] == "compile_error", refused


def test_each_documented_error_form_is_classified():
    url = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/nki/api/nki.errors.html"
    compile_forms = [
        ValueError(f"number of partitions 256 exceed architecture limitation of 128. Info on how to fix: "
                   f"{url}#err-num-partition-exceed-arch-limit"),
        TypeError(f"Info on how to fix: {url}#err-tensor-access-out-of-bound"),
        RuntimeError("error: [err_unsupported_memory] Expected operand 'src' to be in SBUF"),
        RuntimeError("ERROR [NCC_EVRF009] The combined memory needed exceeds the high-bandwidth memory limit"),
        RuntimeError("ERROR [NCC_EARG001] Unsupported Logical Neuron Core (LNC) configuration"),
        subprocess.CalledProcessError(70, ["/venv/lib/neuronxcc/starfish/bin/neuronx-cc", "compile", "x"]),
    ]
    for exc in compile_forms:
        assert neuron_errors.classify(exc) == "compile_error", exc
    # nrt_init's documented console line for a core another process holds, and the status codes.
    busy = [RuntimeError("ERROR   NRT:nrt_allocate_neuron_cores   NeuronCore(s) not available - "
                         "Requested:nc1-nc1 Available:0"),
            RuntimeError("nrt_execute status=1005 (NRT_EXEC_NC_BUSY)"),
            RuntimeError("nrt_load failed: NRT_LOAD_NOT_ENOUGH_NC")]
    for exc in busy:
        assert neuron_errors.classify(exc) == "device_unavailable", exc
    assert neuron_errors.classify(NotImplementedError("nki.baremetal is not available in this release")) \
        == "config_error"
    # The device ran and failed: the kernel's fault (runtime_error is the caller's default).
    for exc in (RuntimeError("nrt_execute status=1006 (NRT_EXEC_OOB)"), FloatingPointError("nan"),
                RuntimeError("Errors compiling? no: execution completed with errors")):
        assert neuron_errors.classify(exc) is None, exc
    # A kernel frame in the traceback means the body was being traced.
    try:
        compile("raise KeyError('x')", "/tmp/cand_kernel.py", "exec")
        exec(compile("raise KeyError('x')", "/tmp/cand_kernel.py", "exec"), {})
    except KeyError as exc:
        assert neuron_errors.classify(exc, kernel_files=["/tmp/cand_kernel.py"]) == "compile_error"
        assert neuron_errors.classify(exc, kernel_files=["/tmp/other.py"]) is None


# The documented `neuron-ls -j` of a trn2n.48xlarge at LNC 2 (tools/neuron-sys-tools/neuron-ls.rst, 2.28),
# two devices of it, the first held by a process.
TRN2_LISTING = [
    {"neuron_device": 0, "bdf": "cc:00.0", "cpu_affinity": "48-95,144-191", "numa_node": "1",
     "connected_to": [12, 3, 4, 1], "nc_count": 4, "logical_neuroncore_config": 2, "memory_size": 103079215104,
     "neuroncore_ids": [0, 1, 2, 3],
     "neuron_processes": [{"pid": 113985, "command": "neuron-bench exec --run-as-cc-neff --...",
                           "neuron_runtime_version": "2.0.0"}]},
    {"neuron_device": 1, "bdf": "b5:00.0", "cpu_affinity": "48-95,144-191", "numa_node": "1",
     "connected_to": [13, 0, 5, 2], "nc_count": 4, "logical_neuroncore_config": 2, "memory_size": 103079215104,
     "neuroncore_ids": [4, 5, 6, 7], "neuron_processes": []},
]
TRN2_HEADER = "instance-type: trn2n.48xlarge\ninstance-id: i-aabbccdd123456789\nlogical-neuroncore-config: 2\n"


def test_neuron_ls_fields_busy_devices_lnc_and_instance_type():
    text = json.dumps(TRN2_LISTING)
    at_lnc2 = neuron_cores.read_listing(text, TRN2_HEADER, lnc=2)
    assert at_lnc2["cores"] == [4, 5, 6, 7]  # device 0 is held by pid 113985
    assert at_lnc2["busy"][0]["device"] == 0 and at_lnc2["busy"][0]["processes"][0]["pid"] == 113985
    assert at_lnc2["instance_type"] == "trn2n.48xlarge" and at_lnc2["family"] == "trn2"
    # At LNC 1 every physical core is its own NeuronCore: device 1's four logical cores are eight.
    at_lnc1 = neuron_cores.read_listing(text, TRN2_HEADER, lnc=1)
    assert at_lnc1["cores"] == list(range(8, 16)), at_lnc1["cores"]
    assert at_lnc1["device_of"][8] == 1 and at_lnc1["device_of"][15] == 1
    # Without the header, the family follows the trn2-only field.
    assert neuron_cores.read_listing(text, None, lnc=1)["family"] == "trn2"
    trn1 = [{"neuron_device": 0, "nc_count": 2, "neuroncore_ids": [0, 1], "neuron_processes": []},
            {"neuron_device": 1, "nc_count": 2, "neuroncore_ids": [2, 3], "neuron_processes": []}]
    plain = neuron_cores.read_listing(json.dumps(trn1), "instance-type: trn1.32xlarge\n", lnc=1)
    assert plain["cores"] == [0, 1, 2, 3] and plain["family"] == "trn1" and plain["busy"] == []
    everything_busy = [dict(d, neuron_processes=[{"pid": 7, "command": "python"}]) for d in trn1]
    try:
        neuron_cores.read_listing(json.dumps(everything_busy), None, lnc=1)
    except ValueError as exc:
        assert "pid 7" in str(exc) and "--neuron-cores" in str(exc)
    else:
        raise AssertionError("every device busy, yet cores were handed out")


def test_discovery_asks_the_stand_in_neuron_ls_and_follows_the_instance():
    env = {"PATH": STANDIN_BIN + os.pathsep + os.environ.get("PATH", ""), "ACCELOPT_NEURON_CORES": "",
           "STANDIN_NEURON_DEVICES": "2", "NEURON_STANDIN_INSTANCE_TYPE": "trn2.48xlarge",
           "NEURON_STANDIN_PROCESSES": "0:4242:python other_job.py"}
    found = _child("from accelopt.backends import neuron_cores; print(json.dumps(neuron_cores.discover(lnc=1)))",
                   [], env)
    assert found["cores"] == list(range(8, 16)) and found["family"] == "trn2", found
    assert found["busy"][0]["processes"][0]["command"] == "python other_job.py"
    assert "device 0" in found["source"]
    target = _child("from accelopt.backends import resolve_target; "
                    "print(json.dumps([resolve_target('auto', 'neuron'), resolve_target('trn1', 'neuron'), "
                    "resolve_target('auto', 'emulator')]))", [], env)
    assert target == ["trn2", "trn1", "trn1"]


def test_trn2_compile_option_and_runtime_lnc_agree():
    code = """
import os
from accelopt.backends.neuron import NeuronBackend
backend = NeuronBackend(os.environ["TARGET"])
backend.prepare()
print(json.dumps({"opt": backend.compile_options()["additional_compile_opt"],
                  "env": os.environ.get("NEURON_LOGICAL_NC_CONFIG"),
                  "platform": os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE")}))
"""
    trn2 = _child(code, [SDK_228, SDK], {"TARGET": "trn2", "NEURON_LOGICAL_NC_CONFIG": "2"})
    assert trn2["opt"] == "--disable-dge --logical-nc-config=1" and trn2["env"] == "1", trn2
    assert trn2["platform"] == "trn2"
    lnc2 = _child(code, [SDK], {"TARGET": "trn2", "ACCELOPT_NEURON_LNC": "2"})
    assert lnc2["opt"].endswith("--logical-nc-config=2") and lnc2["env"] == "2", lnc2
    trn1 = _child(code, [SDK], {"TARGET": "trn1", "NEURON_LOGICAL_NC_CONFIG": ""})
    assert trn1["opt"] == "--disable-dge --logical-nc-config=1" and not trn1["env"], trn1
    # The stand-in runtime refuses a NEFF whose LNC differs from its own, as the SDK documents.
    ran = _run("legacy_double.py", [SDK_228, SDK], TARGET="trn2", NEURON_STANDIN_INSTANCE_TYPE="trn2.48xlarge")
    assert ran["ok"], ran


def test_a_worker_opens_only_its_own_device_node():
    from accelopt.sandbox import hardware_profile
    with tempfile.TemporaryDirectory() as dev:
        for index in range(3):
            open(os.path.join(dev, f"neuron{index}"), "w").close()
        saved = (hardware_profile.DEV_DIR, os.environ.get("ACCELOPT_NEURON_DEVICE"))
        hardware_profile.DEV_DIR = dev
        try:
            os.environ["ACCELOPT_NEURON_DEVICE"] = "1"
            assert [p for p in hardware_profile.neuron_paths()["write"] if p.startswith(dev)] == \
                [os.path.join(dev, "neuron1")]
            os.environ["ACCELOPT_NEURON_DEVICE"] = ""
            assert len([p for p in hardware_profile.neuron_paths()["write"] if p.startswith(dev)]) == 3
        finally:
            hardware_profile.DEV_DIR = saved[0]
            if saved[1] is None:
                os.environ.pop("ACCELOPT_NEURON_DEVICE", None)
            else:
                os.environ["ACCELOPT_NEURON_DEVICE"] = saved[1]


def test_capture_runs_a_compiled_neff_on_the_pinned_core():
    # The host-side timing path: one NEFF, run by neuron-profile capture as often as needed.
    from accelopt.backends import device_profile
    with tempfile.TemporaryDirectory() as scratch:
        with open(os.path.join(scratch, "kernel_0123456789ab.neff"), "w", encoding="utf-8") as handle:
            json.dump({"standin_neff": 1, "target": "trn1", "lnc": 1, "kernel": "k", "estimate_ms": 0.1}, handle)
        log = os.path.join(scratch, "..", os.path.basename(scratch) + ".captures")
        env = {"PATH": STANDIN_BIN + os.pathsep + os.environ.get("PATH", ""), "NEURON_STANDIN_CAPTURE_LOG": log}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            out = device_profile.profile_artifacts({"scratch": scratch, "core": 3, "target": "trn1",
                                                    "artifacts": [{"neff": "kernel_0123456789ab.neff"}]})
            busy = dict(os.environ)
            os.environ["NEURON_STANDIN_BUSY_CORES"] = "3"
            with open(os.path.join(scratch, "kernel_0123456789ab.neff"), "w", encoding="utf-8") as handle:
                json.dump({"standin_neff": 1, "target": "trn1", "lnc": 1, "kernel": "k", "estimate_ms": 0.1}, handle)
            refused = device_profile.profile_artifacts({"scratch": scratch, "core": 3, "target": "trn1",
                                                        "artifacts": [{"neff": "kernel_0123456789ab.neff"}]})
            del busy
        finally:
            os.environ.pop("NEURON_STANDIN_BUSY_CORES", None)
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        assert out["error"] is None, out
        assert len(out["samples_ms"]) == 10 and out["mode"] == "capture"
        assert abs(out["stats"]["latency_ms"] - (0.1 * 1.5 + 0.002)) < 1e-9
        with open(log, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        os.remove(log)
        assert len(lines) == 12 and all(line.endswith("core=3") for line in lines)  # 2 warm-ups + 10 timed
        assert os.listdir(scratch) == []
        assert refused["kind"] == "device_unavailable" and "not available" in refused["error"], refused

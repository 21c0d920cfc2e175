"""The peers' profiling protocol on the emulator, unmodified (issue 20): a harness of ours
that does what AccelOpt's ``NKIKernel.profile()`` and nki-kernel-agent's
``get_latency`` do: ``nki.baremetal(kernel, save_neff_name=..., save_trace_name=...,
additional_compile_opt=...)(*inputs)``, then the shell command ``neuron-profile view
--output-format summary-json -n NEFF -s NTFF > summary.json`` and
``summary[first key]["total_time"] * 1e3`` ms plus the profile_list.json fields."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import nki_emu

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPTS = os.path.join(REPO, "scripts")

# nki-kernel-agent prompts/profile_list.json @ bbb5a3b (AccelOpt's 16 + 2 Trn2 fields)
PROFILE_LIST = ["hbm_read_bytes", "hbm_write_bytes", "psum_read_bytes", "psum_write_bytes", "sbuf_read_bytes",
                "sbuf_write_bytes", "spill_reload_bytes", "spill_save_bytes", "hardware_flops", "transpose_flops",
                "peak_flops_bandwidth_ratio", "mm_arithmetic_intensity", "hfu_estimated_percent",
                "scalar_engine_active_time_percent", "vector_engine_active_time_percent",
                "gpsimd_engine_active_time_percent", "tensor_engine_active_time_percent", "dma_active_time"]

KERNEL_SOURCE = '''
import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        x = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        y = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=y, src=b[i * 128:(i + 1) * 128, :])
        z = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.multiply)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=z)
    return out
'''


def _env(extra_path=()):
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(list(extra_path) + [SCRIPTS, env.get("PATH", "")])
    return env


def _load_kernel(folder):
    path = os.path.join(folder, "kernel_mod.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(KERNEL_SOURCE)
    import importlib.util
    spec = importlib.util.spec_from_file_location("peer_kernel_mod", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def _profile(folder, kernel_fn, inputs, env, platform_target=None):
    """One get_latency() step of the peers' wrappers; returns (outputs, summary dict)."""
    import nki
    neff, ntff = os.path.join(folder, "kernel_file.neff"), os.path.join(folder, "kernel_profile.ntff")
    options = dict(save_neff_name=neff, save_trace_name=ntff, additional_compile_opt="--disable-dge "
                                                                                     "--logical-nc-config=1")
    if platform_target:
        options["platform_target"] = platform_target
    outputs = nki.baremetal(kernel_fn, **options)(*inputs)
    summary_path = os.path.join(folder, "summary.json")
    status = subprocess.run(f"neuron-profile view --output-format summary-json -n {neff} -s {ntff} > {summary_path}",
                            shell=True, env=env, check=False).returncode
    assert status == 0
    with open(summary_path, encoding="utf-8") as handle:
        summary = json.load(handle)
    return outputs, summary[next(iter(summary))]


def test_accelopt_protocol_on_the_emulator():
    nki_emu.install()
    a = np.random.default_rng(0).normal(size=(256, 64)).astype(np.float32)
    b = np.random.default_rng(1).normal(size=(256, 64)).astype(np.float32)
    with tempfile.TemporaryDirectory() as folder:
        kernel_fn = _load_kernel(folder)
        for target in ("trn1", "trn2"):
            outputs, fields = _profile(folder, kernel_fn, [a, b], _env(), platform_target=target)
            assert np.array_equal(outputs, a * b)
            expected = nki_emu.run(kernel_fn, [a, b], target=target).profile
            assert abs(fields["total_time"] * 1e3 - expected["latency_ms"]) <= 1e-9 * expected["latency_ms"]
            assert fields["target"] == target and fields["hbm_read_bytes"] == expected["hbm_read_bytes"]
            missing = [f for f in PROFILE_LIST if f not in fields]
            assert not missing, missing
            assert fields["dma_active_time"] > 0 and 0 < fields["dma_active_time_percent"] <= 1
        with open(os.path.join(folder, "kernel_file.neff"), encoding="utf-8") as handle:
            neff = json.load(handle)
        assert neff["additional_compile_opt"] == "--disable-dge --logical-nc-config=1"


def test_platform_target_from_the_simulator_variable():
    from nki_emu import profile_files
    assert profile_files.target_of(None, {"NEURON_PLATFORM_TARGET_OVERRIDE": "gen3"}) == "trn2"
    assert profile_files.target_of("trn1", {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"}) == "trn1"
    assert profile_files.target_of(None, {}) == "trn1"
    try:
        profile_files.target_of("trn3", {})
    except ValueError as err:
        assert "trn3" in str(err)
    else:
        raise AssertionError("trn3 accepted")


def test_stand_in_hands_real_neffs_to_the_real_profiler():
    with tempfile.TemporaryDirectory() as folder:
        real_dir = os.path.join(folder, "real")
        os.makedirs(real_dir)
        real = os.path.join(real_dir, "neuron-profile")
        with open(real, "w", encoding="utf-8") as handle:
            handle.write("#!/bin/sh\necho \"real profiler: $*\"\n")
        os.chmod(real, 0o755)
        neff = os.path.join(folder, "device.neff")
        with open(neff, "wb") as handle:
            handle.write(b"\x7fNEFF binary")
        env = _env()
        env["PATH"] = os.pathsep.join([SCRIPTS, real_dir, "/usr/bin", "/bin"])
        done = subprocess.run([os.path.join(SCRIPTS, "neuron-profile"), "view", "--output-format", "summary-json",
                               "-n", neff, "-s", neff], env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0 and done.stdout.startswith("real profiler: view"), done
        env["PATH"] = os.pathsep.join([SCRIPTS, "/usr/bin", "/bin"])
        done = subprocess.run([sys.executable, os.path.join(SCRIPTS, "neuron-profile"), "view", "-n", neff, "-s", neff],
                              env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 2 and "no real neuron-profile" in done.stderr


def test_stand_in_refuses_mismatched_files():
    nki_emu.install()
    a = np.ones((128, 8), np.float32)
    with tempfile.TemporaryDirectory() as folder:
        kernel_fn = _load_kernel(folder)
        import nki
        nki.baremetal(kernel_fn, save_neff_name=os.path.join(folder, "one.neff"),
                      save_trace_name=os.path.join(folder, "one.ntff"))(a, a)
        nki.baremetal(kernel_fn, save_neff_name=os.path.join(folder, "two.neff"),
                      save_trace_name=os.path.join(folder, "two.ntff"))(a, a)
        done = subprocess.run([sys.executable, os.path.join(SCRIPTS, "neuron-profile"), "view", "--output-format",
                               "summary-json", "-n", os.path.join(folder, "one.neff"), "-s",
                               os.path.join(folder, "two.ntff")], capture_output=True, text=True, check=False)
        assert done.returncode == 3 and "was not written with" in done.stderr


# A get_latency()/profile() step as the peers write it, run as its own program with only
# PYTHONPATH and PATH pointing at the emulator (host/python/nki_emu_shim, scripts/).
PEER_SCRIPT = '''
import json, os, sys
import numpy as np
import {namespace} as nki
sys.path.insert(0, sys.argv[1])
from kernel_mod import kernel
folder = sys.argv[1]
neff, ntff = os.path.join(folder, "k.neff"), os.path.join(folder, "k.ntff")
a = np.random.default_rng(0).normal(size=(256, 64)).astype(np.float32)
out = nki.baremetal(kernel, save_neff_name=neff, save_trace_name=ntff,
                    additional_compile_opt="--disable-dge --logical-nc-config=1")(a, a)
assert np.array_equal(out, a * a)
summary_path = os.path.join(folder, "summary.json")
os.system(f"neuron-profile view --output-format summary-json -n {{neff}} -s {{ntff}} > {{summary_path}}")
summary = json.load(open(summary_path))
print(json.dumps({{"latency_ms": summary[next(iter(summary))]["total_time"] * 1e3,
                  "fields": sorted(summary[next(iter(summary))])}}))
'''


def test_unmodified_peer_program_through_the_shim():
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "kernel_mod.py"), "w", encoding="utf-8") as handle:
            handle.write(KERNEL_SOURCE)
        for namespace in ("nki", "neuronxcc.nki"):
            script = os.path.join(folder, "peer.py")
            with open(script, "w", encoding="utf-8") as handle:
                handle.write(PEER_SCRIPT.format(namespace=namespace))
            env = _env()
            env["PYTHONPATH"] = os.path.join(REPO, "host", "python", "nki_emu_shim")
            env["NEURON_PLATFORM_TARGET_OVERRIDE"] = "trn2"
            done = subprocess.run([sys.executable, script, folder], env=env, capture_output=True, text=True,
                                  check=False)
            assert done.returncode == 0, done.stderr
            report = json.loads(done.stdout.strip().splitlines()[-1])
            assert report["latency_ms"] > 0 and not [f for f in PROFILE_LIST if f not in report["fields"]]

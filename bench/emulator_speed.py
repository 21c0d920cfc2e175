"""Emulator speed vs the NumPy references on the full-size published NKIBench kernels.

Usage: /usr/bin/python3.11 bench/emulator_speed.py PUBLISHED_NKIBENCH_DIR [kernel ...]

Runs each kernel once in the emulator (with cost tracing, as the harness does)
and its NumPy reference once; prints the time ratio per problem, the median
ratio (target <= 3) and the peak resident memory of this process.
"""
import importlib.util
import json
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host", "python"))
import nki_emu  # noqa: E402


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv):
    root, wanted = argv[0], argv[1:]
    nki_emu.install()
    summary = json.load(open(os.path.join(root, "summary.json")))
    ratios = []
    for name, entry in summary.items():
        if wanted and name not in wanted:
            continue
        impl = next(iter(entry["cases"].values()))["impls"][0]
        ref = _load(os.path.join(root, impl["task"]), "ref_" + name)
        ker = _load(os.path.join(root, impl["kernel"]), "ker_" + name)
        np.random.seed(0)
        inputs = ref.get_inputs()
        t0 = time.perf_counter()
        ref.forward(*inputs)
        t_ref = time.perf_counter() - t0
        kin = ref.transform_to_nki_inputs(inputs)
        t0 = time.perf_counter()
        nki_emu.run(ker.kernel, kin)
        t_emu = time.perf_counter() - t0
        ratios.append(t_emu / t_ref)
        print(f"{name:24s} reference {t_ref:7.2f} s  emulator {t_emu:7.2f} s  ratio {t_emu / t_ref:5.2f}", flush=True)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"median ratio {np.median(ratios):.2f}   peak RSS {peak_gb:.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

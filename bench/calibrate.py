"""Compares the emulator's trn1 latency estimate with the published NKIBench baselines.

Usage: /usr/bin/python3.11 bench/calibrate.py PUBLISHED_NKIBENCH_DIR [kernel ...]

PUBLISHED_NKIBENCH_DIR holds AccelOpt's NKIBench layout (summary.json,
kernels/, reference/). Prints per kernel the measured latency (spec 5.1,
AccelOpt experiments/full_complete_local/profile_results.csv), the estimate,
the error in percent and measured vs estimated HBM bytes, then the median and
worst |error| and the Spearman rank correlation (targets: <= 15 %, <= 35 %, >= 0.9).
"""
import importlib.util
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host", "python"))
import nki_emu  # noqa: E402

# name: (latency ms, HBM read MB, HBM write MB) [M spec 5.1]
MEASURED = {
    "swiglu": (4.222, 141.6, 83.9), "matmul_add_rmsnorm": (2.667, 98.1, 33.6),
    "add_rmsnorm_matmul": (1.222, 42.0, 33.6), "matmul": (35.200, 9059.8, 201.3),
    "gqa_full": (19.111, 1194.4, 1133.0), "rmsnorm_matmul": (1.056, 39.4, 33.6),
    "rope_single_freq_apply": (4.333, 268.4, 134.2), "bmm": (4.611, 67.4, 1086.3),
    "bmm_softmax": (12.000, 794.4, 1827.4), "transpose_matmul": (9.610, 392.2, 179.3),
    "lora": (30.166, 2341.8, 1269.6), "adamw": (2.000, 358.6, 89.7), "silu": (1.333, 117.4, 117.4),
    "mamba": (2.889, 181.7, 62.4),
}


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ranks(values):
    order = np.argsort(values)
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    return ranks


def main(argv):
    root = argv[0]
    wanted = argv[1:]
    nki_emu.install()
    summary = json.load(open(os.path.join(root, "summary.json")))
    rows = []
    for name, entry in summary.items():
        if wanted and name not in wanted:
            continue
        impl = next(iter(entry["cases"].values()))["impls"][0]
        ref = _load(os.path.join(root, impl["task"]), "ref_" + name)
        ker = _load(os.path.join(root, impl["kernel"]), "ker_" + name)
        np.random.seed(0)
        inputs = ref.transform_to_nki_inputs(ref.get_inputs())
        prof = nki_emu.run(ker.kernel, inputs, target="trn1").profile
        ms, rd, wr = MEASURED[name]
        est = prof["latency_ms"]
        err = (est - ms) / ms * 100
        rows.append((name, ms, est, err))
        print(f"{name:24s} measured {ms:8.3f} ms  estimated {est:8.3f} ms  error {err:+7.1f} %  "
              f"HBM rd {rd:8.1f}/{prof['hbm_read_bytes'] / 1e6:8.1f} MB  wr {wr:7.1f}/{prof['hbm_write_bytes'] / 1e6:7.1f} MB  "
              f"bottleneck {prof['bottleneck']}", flush=True)
    errs = np.abs([r[3] for r in rows])
    print(f"median |error| {np.median(errs):.1f} %   worst |error| {np.max(errs):.1f} %")
    if len(rows) > 2:
        a, b = _ranks([r[1] for r in rows]), _ranks([r[2] for r in rows])
        print(f"Spearman rank correlation {np.corrcoef(a, b)[0, 1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Mid-size NKIBench cases for the worker benchmarks (bench/worker_bench.cc).

Each problem at roughly 2-4x the element count of its "small" test case:
large enough that evaluating a candidate is real emulator work, small enough
that 20 candidates take seconds. References are rendered from the seeds
(nkibench/tools/make_references.py) into a scratch folder, never into the
repository; kernels are our baselines in nkibench/kernels/.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "nkibench", "tools"))

import make_references  # noqa: E402 - needs the path above

MID = {
    "silu": {"M": 512, "N": 2048},
    "matmul": {"K": 512, "M": 512, "N": 1024},
    "rmsnorm_matmul": {"K": 512, "M": 512, "N": 1024},
    "add_rmsnorm_matmul": {"K": 512, "M": 512, "N": 1024},
    "bmm": {"B": 4, "K": 64, "M": 512, "N": 512},
    "bmm_softmax": {"B": 4, "K": 64, "M": 256, "N": 1024},
    "gqa_full": {"B": 1, "D": 128, "KH": 2, "N": 1024, "QH": 4},
    "lora": {"K": 512, "M": 512, "N": 1024, "R": 64},
    "mamba": {"C": 128, "M": 2048, "S": 8},
    "matmul_add_rmsnorm": {"K": 512, "M": 512, "N": 1024},
    "rope_single_freq_apply": {"B": 1, "D": 128, "H": 4, "N": 1024},
    "swiglu": {"K": 512, "M": 256, "N": 1024},
    "transpose_matmul": {"K": 512, "M": 512, "N": 1408},
    "adamw": {"M": 384, "N": 2048},
}


def write_cases(arg):
    """Renders the references into ``arg["dir"]``; returns [{"problem", "kernel", "reference", "rel_tol"?}]."""
    folder = arg["dir"]
    os.makedirs(folder, exist_ok=True)
    cases = []
    for problem, values in MID.items():
        relative, text = make_references.render_reference(problem, values)
        path = os.path.join(folder, os.path.basename(relative))
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        case = {"problem": problem, "kernel": os.path.join(ROOT, "nkibench", "kernels", f"{problem}_0.py"),
                "reference": path}
        if "rel_tol" in make_references.PROBLEMS[problem]:
            case["rel_tol"] = make_references.PROBLEMS[problem]["rel_tol"]
        cases.append(case)
    return cases

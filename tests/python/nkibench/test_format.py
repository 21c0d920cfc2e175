"""nkibench/: AccelOpt's file format, the published cases, generated references, kernels."""
import ast
import importlib.util
import os
import re

import yaml

from accelopt import nkibench, peak, precision

ROOT = nkibench.default_root()

# AccelOpt's published full-size cases (accelopt-facts §5.3): id and values.
PUBLISHED = {
    "swiglu": ("2", {"K": 1024, "M": 4096, "N": 3072}),
    "matmul_add_rmsnorm": ("1", {"K": 2048, "M": 4096, "N": 2048}),
    "add_rmsnorm_matmul": ("2", {"K": 1024, "M": 4096, "N": 2048}),
    "matmul": ("3", {"K": 5120, "M": 4096, "N": 12288}),
    "gqa_full": ("0", {"B": 1, "D": 128, "KH": 8, "N": 4096, "QH": 16}),
    "rmsnorm_matmul": ("2", {"K": 1024, "M": 4096, "N": 2048}),
    "rope_single_freq_apply": ("1", {"B": 1, "H": 64, "N": 4096, "D": 128}),
    "bmm": ("2", {"B": 16, "K": 64, "M": 4096, "N": 4096}),
    "bmm_softmax": ("2", {"B": 16, "K": 64, "M": 4096, "N": 4096}),
    "transpose_matmul": ("2", {"K": 2048, "M": 4096, "N": 10944}),
    "lora": ("2", {"K": 5120, "M": 4096, "N": 12288, "R": 128}),
    "adamw": ("2", {"M": 10944, "N": 2048}),
    "silu": ("2", {"M": 4096, "N": 7168}),
    "mamba": ("2", {"C": 256, "M": 7168, "S": 16}),
}
TUNABLE = re.compile(r"^# accelopt: tunable (\w+) = (\S+) choices=\[([^\]]*)\]$")


def _load(path):
    spec = importlib.util.spec_from_file_location("nkibench_check_" + os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_summary_has_published_and_small_cases():
    summary = nkibench.load_summary()
    assert set(summary) == set(PUBLISHED)
    for problem, (case_id, values) in PUBLISHED.items():
        entry = summary[problem]
        assert entry["seed"] == f"./seeds/{problem}.yaml"
        assert set(entry["cases"]) == {case_id, "small"}, (problem, list(entry["cases"]))
        assert entry["cases"][case_id]["values"] == values, problem
        assert set(entry["cases"]["small"]["values"]) == set(values), problem
        for case in entry["cases"].values():
            assert len(case["impls"]) == 1
            impl = case["impls"][0]
            assert set(impl) == {"task", "kernel"}
            assert impl["task"].startswith("./reference/") and impl["kernel"] == f"./kernels/{problem}_0.py"
    assert summary["mamba"]["rel_tol"] == 3e-5
    assert all("rel_tol" not in e for p, e in summary.items() if p != "mamba")


def test_every_referenced_file_exists_and_cases_resolve():
    cases = nkibench.iter_cases()
    assert len(cases) == 2 * len(PUBLISHED)
    for case in cases:
        for path in (case.task, case.kernel, case.seed):
            assert os.path.isfile(path), path
    names = {c.case_name for c in nkibench.iter_cases(case_ids=[PUBLISHED["matmul"][0]], problems=["matmul"])}
    assert names == {"matmul_K5120_M4096_N12288"}


def test_seeds_have_accelopt_keys():
    for problem in PUBLISHED:
        with open(os.path.join(ROOT, "seeds", f"{problem}.yaml"), encoding="utf-8") as handle:
            seed = yaml.safe_load(handle)
        assert seed["test_name"] == problem
        assert set(seed) <= {"test_name", "parameters", "input", "impl", "comments"}
        assert set(seed["parameters"]) == set(PUBLISHED[problem][1])
        assert "return [" in seed["input"] and seed["impl"].lstrip().startswith("def forward(")


def test_references_are_generated_from_seeds():
    spec = importlib.util.spec_from_file_location("make_references", os.path.join(ROOT, "tools", "make_references.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.stale_files() == [], "run nkibench/tools/make_references.py"


def test_reference_modules_expose_interface_and_constants():
    for case in nkibench.iter_cases():
        module = _load(case.task)
        for fn in ("get_inputs", "forward", "transform_to_nki_inputs", "transform_nki_outputs"):
            assert callable(getattr(module, fn)), (case.task, fn)
        for dim, value in case.values.items():
            assert getattr(module, dim) == value, (case.task, dim)


def test_kernels_are_fp32_legacy_nki_with_tunables():
    for problem in PUBLISHED:
        path = os.path.join(ROOT, "kernels", f"{problem}_0.py")
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        assert "float16" not in source, path  # not even in comments
        assert not precision.uses_float16(source)
        assert "import neuronxcc.nki as nki" in source and "@nki.jit" in source
        assert "nl.shared_hbm" in source
        tree = ast.parse(source)
        assert any(isinstance(n, ast.FunctionDef) and n.name == "kernel" for n in tree.body), path
        lines = source.splitlines()
        assert any(TUNABLE.match(line) for line in lines), f"{path} declares no tunable"
        for index, line in enumerate(lines):
            match = TUNABLE.match(line)
            if not match:
                assert "accelopt:" not in line, (path, line)
                continue
            name, default, choices = match.groups()
            assert lines[index + 1] == f"{name} = {default}", (path, lines[index + 1])
            options = [int(c) for c in choices.split(",")]
            assert int(default) in options, (path, name)


def test_peak_model_covers_every_case():
    for case in nkibench.iter_cases():
        ms, bound = peak.peak_latency_ms(case.problem, case.values)
        assert ms > 0 and bound in ("vec", "mm", "memory")

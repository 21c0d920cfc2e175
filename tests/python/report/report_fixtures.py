"""Small run directories in the formats the pipelines write (profile, optimize beam search, other),
built in a temporary folder for the report tests, plus checks every page must pass."""
import json
import os
import re
import shutil
import tempfile
import xml.etree.ElementTree as ElementTree

BASE_KERNEL = """import neuronxcc.nki.language as nl


def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    e = nl.exp(t)
    nl.store(out, value=e)
    return out
"""
FAST_KERNEL = BASE_KERNEL.replace("    e = nl.exp(t)\n", "    e = nl.exp(t)  # fused\n    e = e * 1.0\n")


def _write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(content if isinstance(content, str) else json.dumps(content, indent=1))
    return path


def _metrics(latency, tensor=0.0, vector=0.01, dma=0.02):
    return {"latency_ms": latency, "engine_busy_ms": {"tensor": tensor, "vector": vector, "scalar": 0.004, "gpsimd": 0.0,
                                                      "dma": dma},
            "hbm_read_bytes": 2 << 20, "hbm_write_bytes": 1 << 20, "bottleneck": "dma"}


def _run_json(name, status="succeeded", llm=None):
    run = {"name": name, "pipeline": f"/src/pipelines/{name}.yaml", "status": status, "started_at": "2026-11-25T10:00:00Z",
           "finished_at": "2026-11-25T10:01:30Z", "sets": ["vars.cases=small"], "backend": {"backend": "emulator",
                                                                                             "reason": "requested"},
           "versions": {"accelopt_host": "0.1.0", "python": "3.11.2"}, "stages": {"load": {"status": "ok"}}}
    if llm:
        run["services"] = {"llm": {"usage": llm}}
    return run


def temp_root():
    """A fresh temporary folder (the caller removes it with shutil.rmtree)."""
    return tempfile.mkdtemp(prefix="accelopt-report-test-")


def profile_run(root, name="20261125-100000-nkibench-profile"):
    """A profile run: two correct kernels and one that failed to compile."""
    run_dir = os.path.join(root, name)
    _write(os.path.join(run_dir, "run.json"), _run_json("nkibench-profile"))
    rows = []
    for index, (problem, latency) in enumerate((("silu", 0.047), ("matmul", 0.044), ("adamw", None))):
        kernel = _write(os.path.join(root, "kernels", f"{problem}_0.py"), BASE_KERNEL)
        case = {"problem": problem, "case_name": f"{problem}_M256", "kernel": kernel, "values": {"M": 256}}
        profile = dict(_metrics(latency or 0.0), correct=latency is not None, compiled=latency is not None, estimated=True,
                       peak={"percent_of_peak": 10.0 + index, "bound": "memory"})
        if latency is None:
            profile["error"] = {"kind": "compile_error", "message": "ERROR 1: bad <tile> & more"}
            profile.pop("latency_ms")
        rows.append({"case": case, "profile": profile})
        item = os.path.join(run_dir, "stages", "03-profile", f"item-{index:04d}")
        _write(os.path.join(item, "outputs.json"), {"case": case, "ok": latency is not None})
        _write(os.path.join(item, "status.json"), {"status": "ok"})
    _write(os.path.join(run_dir, "stages", "03-profile", "status.json"), {"status": "ok", "items": 3, "seconds": 12.5})
    _write(os.path.join(run_dir, "profile_results.json"), rows)
    return run_dir


def beam_run(root, name="20261125-110000-nkibench-optimize", with_report=True, llm=True, speedup=1.25):
    """An optimization run: silu improved in two steps, adamw kept its baseline (no correct candidate)."""
    run_dir = os.path.join(root, name)
    usage = {"total": {"requests": 12, "failed_requests": 1, "prompt_tokens": 12000, "completion_tokens": 2400,
                       "cost_usd": 0.0168},
             "by_stage": {"plan": {"requests": 6, "prompt_tokens": 6000, "completion_tokens": 600, "cost_usd": 0.0072},
                          "execute": {"requests": 6, "failed_requests": 1, "prompt_tokens": 6000, "completion_tokens": 1800,
                                      "cost_usd": 0.0096}},
             "by_model": {"fake-model": {"requests": 12}}} if llm else None
    _write(os.path.join(run_dir, "run.json"), _run_json("nkibench-optimize", llm=usage))
    loop = os.path.join(run_dir, "stages", "06-optimize")
    kernels = os.path.join(loop, "iter-0", "02-execute", "kernels")
    base_latency = {"silu_M256": 0.05, "adamw_M192": 0.064}
    beam, records, profiles = [], [], []
    for case, problem in (("silu_M256", "silu"), ("adamw_M192", "adamw")):
        kernel = _write(os.path.join(root, "nkibench", f"{problem}_0.py"), BASE_KERNEL)
        # native:optimize_init keeps a copy inside the run: the report reads no file outside it.
        _write(os.path.join(run_dir, "stages", "04-init", "baselines", f"{case}.py"), BASE_KERNEL)
        beam.append({"id": f"{case}_ID0", "case_name": case, "problem": problem, "origin": "baseline", "kernel": kernel,
                     "latency_ms": base_latency[case], "baseline_latency_ms": base_latency[case], "lineage": [], "history": [],
                     "metrics": _metrics(base_latency[case])})
    step1 = {"candidate": "silu_M256-i0-b0p0-s0", "plan_id": "b0p0", "title": "fuse exp into one activation", "origin": "llm"}
    step2 = {"candidate": "silu_M256-i0-b0p1-s0", "plan_id": "b0p1", "title": "widen tiles", "origin": "llm",
             "rule": "widen"}
    silu_fast = 0.05 / speedup
    for i, (cid, status, latency, kind) in enumerate((("silu_M256-i0-b0p0-s0", "ok", 0.045, None),
                                                      ("silu_M256-i0-b0p1-s0", "ok", silu_fast, None),
                                                      ("silu_M256-i0-b0p2-s0", "failed", None, "compile_error"),
                                                      ("adamw_M192-i0-b1p0-s0", "failed", None, "no_code_block"),
                                                      ("adamw_M192-i0-b1p1-s0", "failed", None, "wrong_result"))):
        case = cid.split("-")[0]
        kernel = _write(os.path.join(kernels, cid + ".py"), FAST_KERNEL if status == "ok" else BASE_KERNEL + "# broken\n")
        _write(os.path.join(kernels, cid + ".json"), {"id": cid})
        history = [step1] if cid.endswith("p0-s0") else [step1, step2] if cid == "silu_M256-i0-b0p1-s0" else []
        record = {"id": cid, "case_name": case, "problem": case.split("_")[0], "iteration": 0, "status": status,
                  "parent": f"{case}_ID0", "kernel": kernel, "latency_ms": latency, "plan": {"title": f"plan {i}"},
                  "baseline_latency_ms": base_latency[case], "history": history, "lineage": [f"{case}_ID0"],
                  "speedup": base_latency[case] / latency if latency else None,
                  "speedup_vs_baseline": base_latency[case] / latency if latency else None,
                  "error": None if status == "ok" else {"kind": kind, "message": f"{kind}: see the log"}}
        records.append(record)
        profiles.append({"case": {"id": cid, "case_name": case}, "ok": status == "ok"})
        os.makedirs(os.path.join(loop, "iter-0", "03-profile", f"item-{i:04d}"), exist_ok=True)
    _write(os.path.join(loop, "iter-0", "03-profile", "outputs.json"), profiles)
    _write(os.path.join(run_dir, "optimize", "records.jsonl"), "".join(json.dumps(r) + "\n" for r in records))
    _write(os.path.join(run_dir, "stages", "04-init", "beam.json"), beam)
    best = {"silu_M256": dict(records[1], metrics=_metrics(silu_fast, vector=0.004), history=[step1, step2],
                              lineage=["silu_M256_ID0", "silu_M256-i0-b0p0-s0"]),
            "adamw_M192": beam[1]}
    _write(os.path.join(loop, "iter-0", "06-select", "best.json"), best)
    _write(os.path.join(loop, "iter-0", "01-plan", "status.json"), {"status": "ok", "seconds": 3.0})
    if with_report:
        rows = [{"case_name": "silu_M256", "problem": "silu", "original_latency_ms": 0.05, "best_latency_ms": silu_fast,
                 "speedup": speedup, "percent_of_peak_before": 10.0, "percent_of_peak_after": 12.5, "peak_bound": "memory",
                 "status": "improved", "kernel": best["silu_M256"]["kernel"],
                 "winner": {"id": "silu_M256-i0-b0p1-s0", "origin": "llm", "history": [step1, step2],
                            "lineage": ["silu_M256_ID0", "silu_M256-i0-b0p0-s0"]},
                 "llm": {"requests": 8, "failed": 0, "prompt_tokens": 8000, "completion_tokens": 1600, "cost_usd": 0.01}},
                {"case_name": "adamw_M192", "problem": "adamw", "original_latency_ms": 0.064, "best_latency_ms": 0.064,
                 "speedup": 1.0, "status": "no_improvement", "reason": "no correct candidate", "percent_of_peak_before": 13.9,
                 "percent_of_peak_after": 13.9, "winner": {"id": "adamw_M192_ID0", "origin": "baseline"},
                 "llm": {"requests": 4, "failed": 1, "prompt_tokens": 4000, "completion_tokens": 800, "cost_usd": 0.0068}}]
        geomean = (speedup * 1.0) ** 0.5
        _write(os.path.join(run_dir, "optimize_results.json"), {"rows": rows, "geomean_speedup": geomean,
                                                               "mode": "llm" if llm else "rules", "llm": {}})
    return run_dir


def generic_run(root, name="20261125-120000-other"):
    """A run of some other pipeline: run.json and one stage."""
    run_dir = os.path.join(root, name)
    _write(os.path.join(run_dir, "run.json"), _run_json("other", status="failed"))
    _write(os.path.join(run_dir, "stages", "01-a", "status.json"), {"status": "failed", "seconds": 0.5})
    return run_dir


def remove(root):
    """Removes a folder made by temp_root."""
    shutil.rmtree(root, ignore_errors=True)


_RESOURCE = re.compile(r"""(?:\b(?:src|href|action|poster|data)\s*=\s*["']?\s*([^"'\s>]+))|url\(\s*["']?([^"')]+)""", re.I)


def external_references(html):
    """Every resource reference (src/href/url()/@import) that is not a relative path, '#...' or data:."""
    found = []
    for match in _RESOURCE.finditer(html):
        target = (match.group(1) or match.group(2) or "").strip()
        if target.startswith(("#", "data:")):
            continue
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
            found.append(target)
    if "@import" in html:
        found.append("@import")
    return found


def check_page(html):
    """Asserts what every report page must hold; returns the parsed document.

    The page parses as XML (well-formed), has a <title>, at least one inline
    <svg> chart, no <script>, no external reference, unique ids, and every
    in-page link (#id) resolves.
    """
    assert html.startswith("<!DOCTYPE html>"), html[:80]
    root = ElementTree.fromstring(html[len("<!DOCTYPE html>"):])
    assert root.tag == "html"
    assert root.find("head/title") is not None and root.find("head/title").text
    assert not list(root.iter("script")), "no JavaScript"
    assert list(root.iter("svg")), "at least one chart"
    assert external_references(html) == [], external_references(html)
    assert "http://" not in html and "https://" not in html
    ids = [element.get("id") for element in root.iter() if element.get("id")]
    assert len(ids) == len(set(ids)), "duplicate ids"
    for element in root.iter("a"):
        href = element.get("href") or ""
        if href.startswith("#"):
            assert href[1:] in ids, f"dangling in-page link {href}"
    for element in root.iter():
        for key, value in element.attrib.items():
            if value.startswith("url(#"):
                assert value[5:-1] in ids, f"dangling {key}={value}"
    return root

"""Feasibility of the cost model against every measured Trainium result (issue 35).

Usage: /usr/bin/python3.11 bench/feasibility.py PUBLISHED_NKIBENCH_DIR [--accelopt DIR] [--set knob=value ...]

For each NKIBench problem the model's own lower bound on latency (its
"floor") must not exceed a latency the hardware measured: a model that calls a
measured kernel impossible cannot rank kernels near it. The floor is the
fixed launch cost plus the largest of

* the compulsory HBM traffic (every input read once, every output written once)
  at the fastest DMA rates the model allows: all 16 engines with loads and stores
  together at ``scheduler.dma_rate`` (the HBM share, 410 GB/s on trn1), and each
  direction at its queue rate (16 x 17 B/ns);
* the compulsory matmul FLOPs at the TensorE peak the model allows for fp32
  operands (the precision NKIBench's tolerance requires: docs/rules.md);
* one elementwise pass over every output element, spread over all the engines
  that can produce it at one element per partition per cycle (ScalarE, VectorE and,
  for SBUF-only work, GpSimd; PSUM results only through ScalarE/VectorE).

Measured: AccelOpt's trn1 baseline latency (experiments/full_complete_local/
profile_results.csv) and its best kernel of the published run
(results/11110904_best_plan_id.csv: baseline / best_speedup, and the best
kernel's own mean and fastest latency), read from AccelOpt's repository at run
time (``--accelopt``: a work tree or a bare git directory; default
$ACCELOPT_REPO or /work/.mirror/zhang677+AccelOpt/repo); plus the NKI fused-Mamba
tutorial's latencies (nki-facts §5.3) at their sizes. Prints per problem the
floor, what bounds it, the measured latencies and the margin (measured / floor);
exits 1 if any floor exceeds a measured mean latency, 2 on usage errors.
``--set`` changes a field of the trn1 target (as bench/calibrate.py does), e.g.
``--set dma_bytes_per_ns=17 --set dma_queue_bytes_per_ns=17`` for the rates of
the model before issue 35 (272 GB/s for loads and stores together).
"""
import csv
import io
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host", "python"))
from nki_emu.cost import scheduler, targets  # noqa: E402

PROFILE_CSV = "experiments/full_complete_local/profile_results.csv"
BEST_CSV = "experiments/full_complete_local/results/11110904_best_plan_id.csv"
DEFAULT_REPO = "/work/.mirror/zhang677+AccelOpt/repo"

# NKI fused-Mamba tutorial [D-M S3 tutorials/fused_mamba.rst, nki-facts §5.3]:
# (kernel, seq_len, channels, state, measured ms)
MAMBA_TUTORIAL = (("mamba_v1", 512, 256, 16, 0.17293), ("mamba_v1", 512, 4096, 16, 2.34),
                  ("mamba_v2", 512, 4096, 16, 1.61), ("mamba_v2", 8192, 4096, 16, 53.33),
                  ("mamba_v3", 8192, 4096, 16, 27.8))


def compulsory(problem, v):
    """Work every kernel of ``problem`` at dimension values ``v`` must do: {"read",
    "write"} HBM bytes (fp32 inputs once, outputs once), "mm_flops" (2 x MACs of the
    mathematically required matmuls), "out" (output elements) and "psum" (True when
    the outputs are matmul results, which leave PSUM through ScalarE/VectorE)."""
    g = v.get
    M, N, K = g("M"), g("N"), g("K")
    f = 4  # float32
    if problem == "silu":
        return dict(read=f * M * N, write=f * M * N, mm_flops=0, out=M * N, psum=False)
    if problem == "adamw":  # theta, g, m, v in; theta out
        return dict(read=4 * f * M * N, write=f * M * N, mm_flops=0, out=M * N, psum=False)
    if problem == "rope_single_freq_apply":  # x in, x out, cos and sin (half the head dim each)
        e = v["B"] * v["H"] * N * v["D"]
        return dict(read=2 * f * e, write=f * e, mm_flops=0, out=e, psum=False)
    if problem == "mamba":  # delta, u (C x M), A (C x S), B, C (S x M) in; C x M out
        C, S = v["C"], v["S"]
        return dict(read=f * (2 * C * M + C * S + 2 * S * M), write=f * C * M, mm_flops=0, out=C * M,
                    psum=False)
    if problem in ("matmul", "transpose_matmul"):
        return dict(read=f * (M * K + K * N), write=f * M * N, mm_flops=2 * M * N * K, out=M * N, psum=True)
    if problem == "rmsnorm_matmul":
        return dict(read=f * (M * K + K * N), write=f * M * N, mm_flops=2 * M * N * K, out=M * N, psum=True)
    if problem == "add_rmsnorm_matmul":  # x, residual (M x K), gamma (K), w (K x N)
        return dict(read=f * (2 * M * K + K + K * N), write=f * M * N, mm_flops=2 * M * N * K, out=M * N,
                    psum=True)
    if problem == "matmul_add_rmsnorm":  # x (M x K), w (K x N), residual (M x N), gamma (N)
        return dict(read=f * (M * K + K * N + M * N + N), write=f * M * N, mm_flops=2 * M * N * K, out=M * N,
                    psum=True)
    if problem == "swiglu":  # x (M x K), gate/up (K x N), down (N x K); out M x K
        return dict(read=f * (M * K + 3 * K * N), write=f * M * K, mm_flops=6 * M * N * K, out=M * K, psum=True)
    if problem in ("bmm", "bmm_softmax"):
        B = v["B"]
        return dict(read=f * B * (M * K + K * N), write=f * B * M * N, mm_flops=2 * B * M * N * K,
                    out=B * M * N, psum=True)
    if problem == "lora":  # x (M x K), W (K x N), A (K x R), B (R x N)
        R = v["R"]
        return dict(read=f * (M * K + K * N + K * R + R * N), write=f * M * N,
                    mm_flops=2 * M * N * K + 2 * M * K * R + 2 * M * R * N, out=M * N, psum=True)
    if problem == "gqa_full":  # q, out (B x QH x N x D); k, v (B x KH x N x D)
        B, QH, KH, D = v["B"], v["QH"], v["KH"], v["D"]
        return dict(read=f * B * N * D * (QH + 2 * KH), write=f * B * QH * N * D,
                    mm_flops=4 * B * QH * N * N * D, out=B * QH * N * D, psum=True)
    raise KeyError(f"no compulsory-work formula for {problem!r}")


def rates(target):
    """The fastest rates the model allows on ``target``: bytes/ns for DMA (both directions
    together, and one direction), FLOP/ns of TensorE with fp32 operands, output elements
    per ns of the engines that can write SBUF (and of those that can read PSUM)."""
    clock = target.clock_ghz
    return {
        "dma": scheduler.dma_rate(target) * target.dma_queues,
        "dma_direction": target.dma_queue_bytes_per_ns * target.dma_queues,
        # nc_matmul: 128 x 128 MACs per row of the moving tile, fp32 at fp32_matmul_factor cycles a row
        "mm": 2 * 128 * 128 * clock["tensor"] / target.fp32_matmul_factor,
        "elem_sbuf": 128 * (clock["scalar"] + clock["vector"] + clock["gpsimd"]),
        "elem_psum": 128 * (clock["scalar"] + clock["vector"]),
    }


def floor_ms(problem, values, target=None):
    """(floor ms, bound, {part: ms}) of ``problem`` at ``values`` on ``target`` (trn1)."""
    target = target or targets.get("trn1")
    w, r = compulsory(problem, values), rates(target)
    parts = {
        "hbm": (w["read"] + w["write"]) / r["dma"],
        "dma_direction": max(w["read"], w["write"]) / r["dma_direction"],
        "tensor": w["mm_flops"] / r["mm"],
        "elementwise": w["out"] / (r["elem_psum"] if w["psum"] else r["elem_sbuf"]),
    }
    parts = {k: ns * 1e-6 for k, ns in parts.items()}
    bound = max(parts, key=parts.get)
    return parts[bound] + target.launch_ns * 1e-6, bound, parts


def _git_show(repo, path):
    if os.path.isfile(os.path.join(repo, path)):
        with open(os.path.join(repo, path), encoding="utf-8") as f:
            return f.read()
    return subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], check=True, capture_output=True,
                          text=True).stdout


def problem_of(case_name, known):
    """AccelOpt's case name ('bmm_softmax_B16_K64_M4096_N4096') -> problem ('bmm_softmax')."""
    best = None
    for p in known:
        if case_name.startswith(p + "_") and (best is None or len(p) > len(best)):
            best = p
    return best


def measured(repo, known):
    """{problem: {"baseline", "baseline_min", "speedup", "best", "best_min"}} (ms) from AccelOpt's
    committed CSVs."""
    out = {}
    for row in csv.DictReader(io.StringIO(_git_show(repo, PROFILE_CSV))):
        prof = json.loads(row["profile"])
        out.setdefault(row["problem"], {}).update(baseline=prof["latency"], baseline_min=prof.get("min_ms"))
    for row in csv.DictReader(io.StringIO(_git_show(repo, BEST_CSV))):
        problem = problem_of(row["case_name"], known)
        if problem is None or problem not in out:
            continue
        meta = json.loads(row["kernel_metadata"])
        speedup = float(row["best_speedup"])
        m = out[problem]
        m.update(speedup=speedup, best=m["baseline"] / speedup, best_mean=meta.get("latency"),
                 best_min=meta.get("min_ms"))
    return out


def rows(root, repo, target=None):
    """[(label, floor ms, bound, [(what, measured ms)])] for the published problems and
    the Mamba tutorial's sizes."""
    summary = json.load(open(os.path.join(root, "summary.json")))
    meas = measured(repo, list(summary))
    out = []
    for problem, entry in summary.items():
        values = next(iter(entry["cases"].values()))["values"]
        fl, bound, _ = floor_ms(problem, values, target)
        m = meas.get(problem, {})
        got = [("baseline", m.get("baseline"))]
        if "best" in m:
            got += [(f"best {m['speedup']:.3f}x", m["best"]), ("best fastest run", m.get("best_min"))]
        out.append((problem, fl, bound, [(k, v) for k, v in got if v]))
    for name, seq, ch, st, ms in MAMBA_TUTORIAL:
        fl, bound, _ = floor_ms("mamba", {"M": seq, "C": ch, "S": st}, target)
        out.append((f"{name} seq {seq} ch {ch} (tutorial)", fl, bound, [("measured", ms)]))
    return out


def check(table):
    """Labels whose floor exceeds a measured mean latency (the fastest-run figures are
    printed, not judged: a single run's noise is not a kernel's latency)."""
    bad = []
    for label, fl, _, got in table:
        for what, ms in got:
            if what != "best fastest run" and fl > ms:
                bad.append(f"{label}: floor {fl:.3f} ms > {what} {ms:.3f} ms")
    return bad


def main(argv):
    args, repo, sets = [], os.environ.get("ACCELOPT_REPO", DEFAULT_REPO), {}
    it = iter(argv)
    for a in it:
        if a == "--accelopt":
            repo = next(it, None)
        elif a == "--set":
            key, _, value = (next(it, None) or "").partition("=")
            sets[key] = value
        else:
            args.append(a)
    if len(args) != 1 or not repo:
        print(__doc__, file=sys.stderr)
        return 2
    import dataclasses
    target = targets.get("trn1")
    for key, value in sets.items():
        if not hasattr(target, key):
            print(f"unknown knob {key!r}", file=sys.stderr)
            return 2
        target = dataclasses.replace(target, **{key: type(getattr(target, key))(float(value))})
    r = rates(target)
    print(f"model rates (trn1): DMA {r['dma']:.0f} GB/s both directions, {r['dma_direction']:.0f} GB/s one "
          f"direction; TensorE fp32 {r['mm'] / 1e3:.2f} TFLOP/s; elementwise {r['elem_sbuf']:.0f} G elem/s "
          f"(SBUF), {r['elem_psum']:.0f} (from PSUM); launch {target.launch_ns / 1e3:.0f} us")
    table = rows(args[0], repo, target)
    for label, fl, bound, got in table:
        tight = min(ms for what, ms in got if what != "best fastest run")
        meas = "  ".join(f"{what} {ms:.3f}" for what, ms in got)
        print(f"{label:38s} floor {fl:7.3f} ms ({bound:13s})  {meas}  margin {tight / fl:5.2f}x")
    bad = check(table)
    for line in bad:
        print("INFEASIBLE " + line)
    print("every floor is at or below the measured latencies" if not bad else f"{len(bad)} measured result(s) "
          "below the model's floor")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Shows that a refactoring left behaviour unchanged: two source trees, the same answers.

Usage: /usr/bin/python3.11 bench/behaviour_identity.py --tree OLD --tree NEW NKIBENCH_DIR [NKIBENCH_DIR ...]
           [--no-latency]

OLD and NEW are work trees of this repository (e.g. ``git worktree add /tmp/old <commit>``);
only their Python (host/python) is used, so neither needs a build. For every problem of every
NKIBench directory (AccelOpt's layout: summary.json, kernels/, reference/) each tree computes,
in its own process:

* the rule moves: every plan ``accelopt.rules.propose`` offers for the baseline kernel (no
  profile metrics, up to 100 plans, in the searches' order) and, per plan, the SHA-256 of the
  source ``accelopt.rules.apply`` returns;
* the emulated latency of the baseline kernel on trn1 and trn2 (seed-0 inputs, the cost-only
  path ``nki_emu.run(..., compute=False)``), unless ``--no-latency``.

Prints per problem whether the two trees agree and the first difference, then the totals.
Exits 1 when anything differs. The plans' order matters: the searches take them in it.
"""
import hashlib
import importlib.util
import json
import os
import subprocess
import sys


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def emit(dirs, latency):
    """In the tree whose host/python is first on sys.path: {problem key: answers} as JSON."""
    import numpy as np
    from accelopt import rules
    import nki_emu

    nki_emu.install()
    out = {}
    for root in dirs:
        summary = json.load(open(os.path.join(root, "summary.json")))
        for name, entry in summary.items():
            impl = next(iter(entry["cases"].values()))["impls"][0]
            label = os.path.join(*os.path.normpath(root).split(os.sep)[-2:])
            key = f"{label}:{name}"
            source = open(os.path.join(root, impl["kernel"])).read()
            answer = {"plans": []}
            proposed = rules.propose({"source": source, "metrics": {}, "max_plans": 100})
            for plan in proposed.get("plans", []):
                applied = rules.apply({"source": source, "plan": plan})
                digest = hashlib.sha256(applied["source"].encode()).hexdigest()[:16] if "source" in applied \
                    else "error:" + applied.get("error", {}).get("kind", "?")
                answer["plans"].append([plan.get("plan_id") or plan.get("id"), digest])
            if latency:
                ref = _load(os.path.join(root, impl["task"]), "ref_" + name)
                ker = _load(os.path.join(root, impl["kernel"]), "ker_" + name)
                for target in ("trn1", "trn2"):
                    np.random.seed(0)
                    inputs = ref.transform_to_nki_inputs(ref.get_inputs())
                    result = nki_emu.run(ker.kernel, inputs, target=target, compute=False)
                    answer[f"{target}_ms"] = round(float(result.profile["latency_ms"]), 9)
            out[key] = answer
            print(f"  {key}: {len(answer['plans'])} plans", file=sys.stderr, flush=True)
    return out


def run_tree(tree, dirs, latency):
    python_dir = os.path.join(os.path.abspath(tree), "host", "python")
    if not os.path.isdir(python_dir):
        raise SystemExit(f"{tree}: no host/python (not a work tree of this repository)")
    code = ("import sys, json; sys.path.insert(0, %r); sys.path.insert(0, %r); import behaviour_identity as b; "
            "print(json.dumps(b.emit(%r, %r)))" % (os.path.dirname(os.path.abspath(__file__)), python_dir, dirs, latency))
    env = dict(os.environ, PYTHONPATH="")
    print(f"{tree}:", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, check=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv):
    trees, dirs, latency = [], [], True
    it = iter(argv)
    for a in it:
        if a == "--tree":
            trees.append(next(it))
        elif a == "--no-latency":
            latency = False
        else:
            dirs.append(os.path.abspath(a))
    if len(trees) != 2 or not dirs:
        print(__doc__, file=sys.stderr)
        return 2
    old, new = (run_tree(t, dirs, latency) for t in trees)
    differ = 0
    plans = 0
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        plans += len((b or {}).get("plans", []))
        if a == b:
            extra = f"  trn1 {b['trn1_ms']:.6f} ms  trn2 {b['trn2_ms']:.6f} ms" if latency else ""
            print(f"{key:40s} same: {len(b['plans'])} plans{extra}")
            continue
        differ += 1
        if a is None or b is None:
            print(f"{key:40s} only in {'new' if a is None else 'old'}")
            continue
        for field in sorted(set(a) | set(b)):
            if a.get(field) != b.get(field):
                print(f"{key:40s} DIFFERS in {field}: {str(a.get(field))[:200]} -> {str(b.get(field))[:200]}")
                break
    print(f"{len(set(old) | set(new))} kernels, {plans} plans: "
          + ("identical" if not differ else f"{differ} kernel(s) differ"))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

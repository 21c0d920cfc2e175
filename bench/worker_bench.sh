#!/bin/sh
# Worker-pool benchmarks (docs/isolation.md): per-candidate overhead of the
# pool vs a fresh python3.11 per candidate, and 1 vs 2 workers scaling.
# Usage: bench/worker_bench.sh [BUILD_DIR]   (default build)
# Writes docs/benchmarks/worker-overhead.txt and worker-scaling.txt.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target accelopt-bench-worker -j2 >/dev/null
mkdir -p "$root/docs/benchmarks"
for mode in overhead scaling; do
  out="$root/docs/benchmarks/worker-$mode.txt"
  {
    echo "# accelopt-bench-worker $mode ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg))"
    "$build/bench/accelopt-bench-worker" "$mode"
  } | tee "$out"
done

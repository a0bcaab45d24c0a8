#!/usr/bin/env bash
# Runs the CPU cases of BENCH-CASES.md on nuvec, NumPy and MLX (CPU build) and prints one table.
#
#   bench/run_cpu.sh [--repeat N] [CASE...]
#
# Builds nuvec-bench in release, writes bench/results/{nuvec,numpy,mlx}-cpu.json (ignored by git)
# and prints bench/compare.py's table. Installs the peers (numpy, mlx[cpu], threadpoolctl) with
# pip when they are missing. A full run takes about three minutes on 2 cores.
set -euo pipefail
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$top"
out=bench/results
mkdir -p "$out"

if ! python3 -c 'import numpy, mlx.core, threadpoolctl' 2>/dev/null; then
  echo "run_cpu: installing the peers (numpy, mlx[cpu], threadpoolctl)" >&2
  python3 -m pip install --quiet numpy "mlx[cpu]" threadpoolctl
fi

echo "== building nuvec-bench (release)" >&2
cargo build --release -p nuvec-bench >&2
echo "== load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo "== nuvec" >&2
# nuvec-bench exits non-zero when a case fails (error or wrong result); still compare the rest.
target/release/nuvec-bench --device cpu --json "$out/nuvec-cpu.json" "$@" || status=$?

# The environment may set OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE for old OpenBLAS builds; they make
# a current NumPy pick a slower kernel, so the peers run without them (the JSON records which
# kernel ran).
peer() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 "$@"; }
echo "== numpy" >&2
peer bench/peers/numpy_bench.py --json "$out/numpy-cpu.json" "$@"
echo "== mlx" >&2
peer bench/peers/mlx_bench.py --json "$out/mlx-cpu.json" "$@"

echo "== comparison (load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
python3 bench/compare.py "$out/nuvec-cpu.json" "$out/numpy-cpu.json" "$out/mlx-cpu.json"
exit "${status:-0}"

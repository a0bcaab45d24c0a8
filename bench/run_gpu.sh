#!/usr/bin/env bash
# Runs the GPU cases of BENCH-CASES.md on nuvec, PyTorch (eager) and MLX's CUDA build on the
# device machine, and prints bench/compare.py's table. Everything is built here first:
#
#   ../shared/tools/gpu-pack --bench --peers      (nuvec-bench in release, MLX's CUDA build)
#
# then the device tool's run, from the repository root, with carry [".gpu"]:
#
#   bench/run_gpu.sh [CASE...]
#
# Results go to $OUT (the device tool's folder; bench/results/gpu here): nuvec.json, torch.json,
# mlx.json, the logs, and compare.txt with the table. Environment:
#   RUNNERS="nuvec torch mlx"   which to run (add "torch.compile" for PyTorch compiled)
#   BUDGET=3                    seconds of timed runs per nuvec case (nuvec-bench --budget)
#   LIMIT=240                   seconds each runner may take before it is stopped (its results
#                               so far stay: every runner writes its JSON after each case)
set -uo pipefail
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || (cd "$(dirname "$0")/.." && pwd))
cd "$top"
out=${OUT:-bench/results/gpu}
mkdir -p "$out"
runners=${RUNNERS:-nuvec torch mlx}
budget=${BUDGET:-3}
limit=${LIMIT:-240}
export PYTHONUNBUFFERED=1

[ -x .gpu/run ] || { echo "run_gpu: no .gpu/run: pack first (../shared/tools/gpu-pack --bench --peers) and carry .gpu"; exit 2; }
# Python peers run with MLX importable when it was packed; PyTorch needs nothing packed.
if [ -f .gpu/peers/setup ]; then peer=(.gpu/run peers python3); else peer=(python3); fi

status=0
files=()
run() {  # run NAME JSON COMMAND...: one runner, its output also in $out/NAME.log
  local name=$1 json=$2; shift 2
  echo "== $name ($(date +%T))"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 124 ] && echo "run_gpu: $name stopped after ${limit}s; the cases it finished are kept"
  [ "$rc" = 0 ] || status=1
  [ -s "$json" ] && files+=("$json")
}

for r in $runners; do
  case "$r" in
    nuvec) run nuvec "$out/nuvec.json" .gpu/run bin nuvec-bench --device gpu --budget "$budget" --json "$out/nuvec.json" "$@" ;;
    torch) run torch "$out/torch.json" "${peer[@]}" bench/peers/torch_bench.py --json "$out/torch.json" "$@" ;;
    torch.compile) run torch-compile "$out/torch-compile.json" "${peer[@]}" bench/peers/torch_bench.py --compile --json "$out/torch-compile.json" "$@" ;;
    mlx)
      if [ -f .gpu/peers/setup ]; then
        run mlx "$out/mlx.json" .gpu/run peers python3 bench/peers/mlx_bench.py --device gpu --json "$out/mlx.json" "$@"
      else
        echo "run_gpu: MLX skipped: its CUDA build was not packed (gpu-pack --peers)"
      fi ;;
    *) echo "run_gpu: unknown runner $r"; status=2 ;;
  esac
done

echo "== comparison"
if [ "${#files[@]}" -gt 0 ]; then
  python3 bench/compare.py "${files[@]}" | tee "$out/compare.txt"
else
  echo "run_gpu: no results to compare"; status=1
fi
exit "$status"

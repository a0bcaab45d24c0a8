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
#   RUNNERS="nuvec torch mlx"   which to run (add "torch.compile" for PyTorch compiled, "liger"
#                               for Liger's Triton kernels, installed from a carried wheel;
#                               "fla" for flash-linear-attention's gated delta rule, from a carried
#                               wheel; "torch.cudnn", "torch.flash" for PyTorch's attention through that
#                               SDPA backend alone)
#   BUDGET=3                    seconds of timed runs per nuvec case (nuvec-bench --budget)
#   NUVEC_LIMIT=300, PEER_LIMIT=120
#                               seconds nuvec-bench, and each peer, may take before it is stopped
#                               (its results so far stay: every runner writes its JSON after each
#                               case); the defaults keep the whole run inside the device tool's
#                               10-minute command limit
set -uo pipefail
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || (cd "$(dirname "$0")/.." && pwd))
cd "$top"
out=${OUT:-bench/results/gpu}
mkdir -p "$out"
runners=${RUNNERS:-nuvec torch mlx}
budget=${BUDGET:-3}
nuvec_limit=${NUVEC_LIMIT:-300}
peer_limit=${PEER_LIMIT:-120}
export PYTHONUNBUFFERED=1

[ -x .gpu/run ] || { echo "run_gpu: no .gpu/run: pack first (../shared/tools/gpu-pack --bench --peers) and carry .gpu"; exit 2; }
# Python peers run with MLX importable when it was packed; PyTorch needs nothing packed.
if [ -f .gpu/peers/setup ]; then peer=(.gpu/run peers python3); else peer=(python3); fi

status=0
files=()
run() {  # run NAME JSON LIMIT COMMAND...: one runner, its output also in $out/NAME.log
  local name=$1 json=$2 limit=$3; shift 3
  echo "== $name ($(date +%T))"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 124 ] && echo "run_gpu: $name stopped after ${limit}s; the cases it finished are kept"
  [ "$rc" = 0 ] || status=1
  [ -s "$json" ] && files+=("$json")
}

for r in $runners; do
  case "$r" in
    nuvec) run nuvec "$out/nuvec.json" "$nuvec_limit" .gpu/run bin nuvec-bench --device gpu --budget "$budget" --json "$out/nuvec.json" "$@" ;;
    torch) run torch "$out/torch.json" "$peer_limit" "${peer[@]}" bench/peers/torch_bench.py --json "$out/torch.json" "$@" ;;
    fla) run fla "$out/fla.json" "$peer_limit" "${peer[@]}" bench/peers/fla_bench.py --json "$out/fla.json" "$@" ;;
    liger) run liger "$out/liger.json" "$peer_limit" "${peer[@]}" bench/peers/liger_bench.py --json "$out/liger.json" "$@" ;;
    torch.cudnn|torch.flash) run "$r" "$out/$r.json" "$peer_limit" "${peer[@]}" bench/peers/torch_bench.py --sdpa "${r#torch.}" --json "$out/$r.json" "$@" ;;
    torch.compile) run torch-compile "$out/torch-compile.json" "$peer_limit" "${peer[@]}" bench/peers/torch_bench.py --compile --json "$out/torch-compile.json" "$@" ;;
    mlx)
      if [ -f .gpu/peers/setup ]; then
        run mlx "$out/mlx.json" "$peer_limit" .gpu/run peers python3 bench/peers/mlx_bench.py --device gpu --json "$out/mlx.json" "$@"
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

#!/usr/bin/env bash
# One H200 call (device tool: carry [".gpu", ".whl"], command "bash scripts/gpu-session-next.sh"),
# after `GPU_TESTS="gpu_gated gpu_quantized gpu_qmm gpu_flash fast_ops" gpu-pack --bench` and
# the fla-core and liger-kernel wheels in .whl/ (the device README says how). First the tests of
# what changed, side by side (logs under $OUT); then, alone on the GPU, the gated delta
# benchmarks against fla with ncu's time of each gated kernel, attention against PyTorch, and
# what the mixture-of-experts product spends its time on. Knobs need no rebuild.
set -u
.gpu/run tests __unpack_only__ > /dev/null 2>&1
export CUDA_HOME=/usr/local/cuda NUVEC_KERNEL_CACHE=/tmp/nuvec-kernels
T=/tmp/gpu/tests; B=/tmp/gpu/bin/nuvec-bench
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
t() { local name=$1; shift; ( "$@" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log" ) ; }
t gdelta timeout 90 $T/gpu_gated_delta-* --test-threads=2 &
t quant timeout 90 $T/gpu_quantized-* --test-threads=2 &
t wgmma timeout 90 $T/gpu_qmm_wgmma-* --test-threads=2 &
t flash timeout 90 $T/gpu_flash-* --test-threads=2 &
t seed timeout 90 $T/fast_ops-* --test-threads=2 &
if ls $T/gpu_zdiag-* > /dev/null 2>&1; then
  t zdiag env NUVEC_QMM_WGMMA=1 timeout 60 $T/gpu_zdiag-* --nocapture &
  t zdiag_drain env NUVEC_QMM_WGMMA=1 NUVEC_KERNEL_DEFINES="NVQW_INFLIGHT=0" timeout 60 \
    $T/gpu_zdiag-* --nocapture &
fi
wait
for f in gdelta quant wgmma flash seed zdiag zdiag_drain; do
  [ -f "$OUT/$f.log" ] || continue
  echo "== $f"; grep -E "^test result|FAILED|panicked|rc=|^== " "$OUT/$f.log" | head -14
done
G="gated_delta_prefill gated_delta_decode"
S="sdpa_causal_4k sdpa_full_4k sdpa_causal_8k_d64 sdpa_causal_16k"
echo "== gated"; timeout 40 $B --device gpu --budget 0.5 --json $OUT/gd.json $G 2>&1 | tail -2
echo "== fla"; timeout 60 python3 bench/peers/fla_bench.py --json $OUT/fla.json $G 2>&1 | tail -2
echo "== ncu gated"; timeout 40 ncu --metrics gpu__time_duration.sum -k regex:"gdc|gated" -c 4 \
  $B --device gpu --budget 0.01 gated_delta_prefill 2>&1 | grep -E "gdc_|gated_|duration" | head -12
echo "== sdpa"; timeout 40 $B --device gpu --budget 0.5 --json $OUT/sdpa.json $S 2>&1 | tail -4
echo "== torch"; timeout 60 python3 bench/peers/torch_bench.py --json $OUT/torch.json $S 2>&1 | tail -4
echo "== moe_qmv_64: host bridge, then ncu's kernels (all in \$OUT/ncu_moe.txt)"
NUVEC_LOG_HOST_BRIDGE=1 timeout 30 $B --device gpu --budget 0.3 moe_qmv_64 2>&1 | sort | uniq -c | tail -4
timeout 60 ncu --metrics gpu__time_duration.sum -c 24 $B --device gpu --budget 0.01 moe_qmv_64 \
  > $OUT/ncu_moe.txt 2>&1
grep -E "Context|duration" $OUT/ncu_moe.txt | paste - - | awk '{print $1, $NF}' | head -24
exit 0

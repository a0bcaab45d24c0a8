#!/usr/bin/env bash
# The next H200 session's first runs (device tool: carry [".gpu"], command
# "bash scripts/gpu-session-next.sh 1", then 2, then 3, each well under the 600 s a command
# may take), after gpu-pack --bench with the test binaries part 1 names. Part 1: every kernel
# not yet run on a GPU, its tests, in parallel (logs under $OUT); part 2: the attention and
# gated delta benchmarks with their knobs, and ncu's time of each gated kernel; part 3: the
# row, quantized and decoding cases with theirs, and PyTorch on the same cases. Knobs need no
# rebuild.
set -u
part=${1:-1}
.gpu/run tests __unpack_only__ > /dev/null 2>&1
export CUDA_HOME=/usr/local/cuda NUVEC_KERNEL_CACHE=/tmp/nuvec-kernels
T=/tmp/gpu/tests; B=/tmp/gpu/bin/nuvec-bench
t() { local name=$1; shift; ( "$@" > $OUT/$name.log 2>&1; echo "rc=$?" >> $OUT/$name.log ) ; }
if [ "$part" = 1 ]; then
t flash timeout 280 $T/gpu_flash-* --test-threads=3 &
t flash_pp env NUVEC_FLASH_PINGPONG=1 NUVEC_FLASH_CONSUMERS=3 timeout 280 $T/gpu_flash-* --test-threads=3 &
t attn timeout 280 $T/gpu_attention-* --test-threads=2 &
t attn_merge env NUVEC_ATTN_MERGE=block timeout 280 $T/gpu_attention-* --test-threads=2 &
t gdelta timeout 280 $T/gpu_gated_delta-* --test-threads=2 &
t gdelta_loop env NUVEC_GD_RESIDENT=4 timeout 280 $T/gpu_gated_delta-* --test-threads=2 &
t quant timeout 280 $T/gpu_quantized-* --test-threads=2 &
t wgmma timeout 280 $T/gpu_qmm_wgmma-* --test-threads=2 &
t wgmma_off env NUVEC_QMM_WGMMA=0 timeout 280 $T/gpu_qmm_wgmma-* --test-threads=2 &
t gather timeout 280 $T/gpu_gather_qmm-* --test-threads=2 &
t gather_mm timeout 280 $T/gpu_gather_mm-* --test-threads=2 &
t norms timeout 280 $T/gpu_norms-* --test-threads=1 &
t rows timeout 280 $T/gpu_rows-* --test-threads=1 &
t seed timeout 280 $T/seed_fast-* --test-threads=2 &
wait
for f in flash flash_pp attn attn_merge gdelta gdelta_loop quant wgmma wgmma_off gather gather_mm norms rows seed; do echo "== $f"; grep -E "^test result|FAILED|panicked|rc=" $OUT/$f.log | head -12; done
exit 0
fi
if [ "$part" = 2 ]; then
S="sdpa_causal_4k sdpa_full_4k sdpa_causal_8k_d64 sdpa_causal_16k"
echo "== sdpa tma"; timeout 60 $B --device gpu --budget 1 --json $OUT/tma.json $S 2>&1 | tail -5
echo "== sdpa pingpong"; NUVEC_FLASH_PINGPONG=1 timeout 60 $B --device gpu --budget 1 --json $OUT/pp.json $S 2>&1 | tail -5
echo "== sdpa pp stages3"; NUVEC_FLASH_PINGPONG=1 NUVEC_FLASH_STAGES=3 timeout 60 $B --device gpu --budget 1 $S 2>&1 | tail -5
echo "== sdpa causal, L2-grouped order"; NUVEC_FLASH_ORDER=l2 timeout 60 $B --device gpu --budget 1 sdpa_causal_4k sdpa_causal_8k_d64 sdpa_causal_16k 2>&1 | tail -3
echo "== d64 three consumers"; NUVEC_FLASH_CONSUMERS=3 timeout 40 $B --device gpu --budget 1 sdpa_causal_8k_d64 2>&1 | tail -1
echo "== d64 three consumers pingpong"; NUVEC_FLASH_CONSUMERS=3 NUVEC_FLASH_PINGPONG=1 timeout 40 $B --device gpu --budget 1 sdpa_causal_8k_d64 2>&1 | tail -1
echo "== gated split"; timeout 60 $B --device gpu --budget 1 --json $OUT/gd.json gated_delta_prefill gated_delta_decode 2>&1 | tail -3
for r in 4 2; do echo "== gated decode rows $r"; NUVEC_GD_ROWS=$r timeout 30 $B --device gpu --budget 1 gated_delta_decode 2>&1 | tail -1; done
for k in 2 4 8; do for r in 8 4; do echo "== gated decode looping, $k blocks an SM, rows $r"; NUVEC_GD_RESIDENT=$k NUVEC_GD_ROWS=$r timeout 30 $B --device gpu --budget 0.5 gated_delta_decode 2>&1 | tail -1; done; done
echo "== gated fused"; NUVEC_GDC_SPLIT=0 timeout 60 $B --device gpu --budget 1 gated_delta_prefill 2>&1 | tail -2
echo "== ncu gated"; timeout 90 ncu --metrics gpu__time_duration.sum -k regex:"gdc|gated" -c 8 $B --device gpu --budget 0.01 gated_delta_prefill gated_delta_decode 2>&1 | grep -E "gdc_|gated_|duration" | head -30
exit 0
fi
S="sdpa_causal_4k sdpa_full_4k sdpa_causal_8k_d64 sdpa_causal_16k"
R="rms_norm add_rms_norm layer_norm rms_norm_vjp softmax logsumexp"
echo "== rows"; timeout 60 $B --device gpu --budget 1 --json $OUT/rows.json copy $R 2>&1 | tail -8
echo "== rows resident+prefetch"; NUVEC_ROWS_RESIDENT=8 NUVEC_KERNEL_DEFINES="NV_NORM_PREFETCH=1 NV_LAYER_MINB=1 NV_ADD_RMS_MINB=1 NV_SOFTMAX_PREFETCH=1 NV_SOFTMAX_MINB=1 NV_LSE_MINB=2 NV_VJP_PREFETCH=1" timeout 60 $B --device gpu --budget 1 $R 2>&1 | tail -7
echo "== rope staged (default) and direct"; timeout 30 $B --device gpu --budget 1 rope 2>&1 | tail -1; NUVEC_ROPE_STAGED=0 timeout 30 $B --device gpu --budget 1 rope 2>&1 | tail -1
echo "== lse minb2"; NUVEC_KERNEL_DEFINES="NV_LSE_MINB=2" timeout 30 $B --device gpu --budget 1 logsumexp 2>&1 | tail -2
echo "== quantized"; timeout 90 $B --device gpu --budget 1 --json $OUT/q.json qmv_14336x4096 qmm_512x14336x4096 qmm_4096x14336x4096 moe_qmv_1 moe_qmv_64 moe_mm_64 2>&1 | tail -8
echo "== quantized tiled"; NUVEC_QMM_WGMMA=0 timeout 60 $B --device gpu --budget 1 qmm_512x14336x4096 qmm_4096x14336x4096 2>&1 | tail -2
echo "== decode"; timeout 60 $B --device gpu --budget 1 --json $OUT/dec.json decode_d512_b8_4k decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k paged_decode_b1_8k 2>&1 | tail -6
echo "== decode merged in-block"; NUVEC_ATTN_MERGE=block timeout 60 $B --device gpu --budget 1 decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k paged_decode_b1_8k 2>&1 | tail -5
for n in 8 16 24 32 64; do echo "== decode b1 splits $n (merged in-block)"; NUVEC_ATTN_SPLITS=$n NUVEC_ATTN_MERGE=block timeout 20 $B --device gpu --budget 0.5 decode_b1_8k 2>&1 | tail -1; done
echo "== decode no prefetch"; NUVEC_KERNEL_DEFINES="NV_ATTN_PREFETCH=0" timeout 60 $B --device gpu --budget 1 decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k 2>&1 | tail -4
echo "== decode-sized calls"; timeout 40 $B --device gpu --budget 1 rms_norm_decode rope_decode launch_floor 2>&1 | tail -3
echo "== torch"; timeout 120 python3 bench/peers/torch_bench.py --json $OUT/torch.json copy $S $R qmv_14336x4096 qmm_512x14336x4096 qmm_4096x14336x4096 rms_norm_decode rope_decode launch_floor decode_d512_b8_4k decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k 2>&1 | tail -24

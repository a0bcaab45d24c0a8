#!/usr/bin/env bash
# The GPU sessions' runs (device tool: carry [".gpu", ".whl"], command
# "bash scripts/gpu-session-next.sh N"; parts 1 and 4 ran on an H100 on 2026-12-05, fourth
# session, 6 and 3 on an H100 and 9 on the H200 in the fifth; next on the H200: 10, 3, 5 and
# 2), after
# `GPU_TESTS="gpu_quantized gpu_qmm gpu_gather gpu_rows gpu_norms fast_ops" gpu-pack --bench` and the
# fla-core and liger-kernel wheels in .whl/ (the device README says how).
# Part 1: the quantized tests with this session's defaults (the tensor-core matrix-vector
# kernels, the warpgroup prefill up to 640 rows) and with the older routes
# (`NUVEC_QMV_MMA=0 NUVEC_QMM_WGMMA=0`), the row kernels' tests with one barrier an exchange
# and with two, and `compute-sanitizer`'s race check on them; logs under $OUT. Part 2: the
# quantized timings (prefill at 512, 1,024 and 4,096 rows by route, the warpgroup kernel's
# block shapes, decoding and the experts' products by kernel) against PyTorch. Part 3: the
# headline cases (rows, attention, decoding, the gated delta rule) against PyTorch, Liger and
# flash-linear-attention in the same run. Part 4: the row kernels' exchanges with one barrier
# against two. Part 5 (with `GPU_TESTS="gpu_attention fast_ops gpu_graph"`): the decoding
# merge's dependent launch, tested and timed against an ordinary launch. Part 6 (with
# `GPU_TESTS="gpu_rows gpu_norms fast_ops gpu_fused gpu_backend gpu_index gpu_reduce gpu_sort"`):
# the row kernels' 16-byte loads and unmasked full rows against the old forms, with the
# backend's tests (every strided kernel's addressing changed). Part 8: part 6's timings on an
# H200 only. Part 9: the rotation's tests and timings after its heads' rows located by step.
# Part 10: log-sum-exp's two kernels timed against each other. Part 12 (MLX) ran on an H100
# on 2026-12-05, sixth session, as did parts 13 (the next on an H200) and 14; part 15 ran on
# the H200 (parts 14 and 15, the small calls' kernels under ncu and the experts' grouping in
# one launch, are removed since: their results are in BENCHMARKS.md, their lines in commit
# c9b76a8). Part 17: the gated delta rule against flash-linear-attention, by resident blocks
# (ran on an H100 on 2026-12-06, ninth session; next on an H200). Parts 16 and 18 to 21 (the
# decoding products' grouped form, decoding attention through shared-memory rings, the
# warpgroup prefill's wide blocks) ran on an H100 that session and are removed with the forms
# that lost; their results are in BENCHMARKS.md. Part 22 (ran on an H100 that session): ncu on the
# warpgroup prefill, cuBLAS's product and the decoding split kernel. Part 23 (the warpgroup
# prefill's warp-specialised form against the first) ran on an H100 on 2026-12-06, tenth
# session, and is removed with the first form (its results are in BENCHMARKS.md); part 24: the
# prefill's tests and timings by walk and by the rows it keeps. Parts 28 and 29 (the decoding
# products' register budgets and tiles; the experts' own tiles), 30 (the gathered products'
# lhs read in place) and 31 (their tiles chosen by their blocks) ran on an H100 on 2026-12-06,
# eleventh session, and are removed (their results are in BENCHMARKS.md). Part 26: the H200's
# survey of the headline cases against every peer but MLX; part 27, after it on the same
# machine: the tests and MLX. Parts 32 and 33 (the experts' product grouping in its blocks,
# against the grouping launch, with its weights asked of L2 first, by tiles) ran on an H100
# on 2026-12-06, twelfth session, and are removed (their results are in BENCHMARKS.md). Part 34
# (the decoding product's column form, each group's scale and bias applied to f32 sums) ran on
# an H100 on 2026-12-06, thirteenth session, and is removed with the form (its results are in
# BENCHMARKS.md). Parts 35 and 36 (the decoding product fed by tensor copies against the
# register form) ran on an H100 on 2026-12-06, fourteenth and fifteenth sessions, and are
# removed with that form (its results are in BENCHMARKS.md, its lines in commit ac672c5).
# Part 37: torch.compile beside nuvec; part 38: part 26's survey alone, on any card, to follow
# another part in one call. Parts 38, 27 and 37 ran on an H100 on 2026-12-06, fourteenth
# session, and 38 again in the fifteenth (BENCHMARKS.md). Part 39: the prefill's 176-key tiles
# (any card; `gpu_flash` in GPU_TESTS), ran on an H100 in the fifteenth session with knob runs
# beside it (BENCHMARKS.md). Part 40: the H200's headline figures in four minutes. Part 41
# (the kept counting sequences and the stream-K flags cleared by their kernel, on any card) ran
# on an H100 on 2026-12-07, seventeenth session, as did part 43's first forms (L2 requests by
# knob) and part 44 (the requests by form; both removed, their results in BENCHMARKS.md). Part
# 42: part 27's MLX run alone. Part 43: the decoding attention's L2 requests against none.
# Part 45: L1 requests ahead of the decoding products' and the decoding attention's loads, by
# distance (any card); part 46 its timings alone, one round. Part 48: ncu's memory and stall
# sections on the decoding product and the decoding split kernel (any card). Part 49:
# `decode_b1_8k`'s two speeds, first in a process and after a copy, by L1 requests (any card).
# Parts 45, 48 and 49 ran on an H100 in the nineteenth session (BENCHMARKS.md).
# Part 50: the prefill's persistent walks (fixed shares, and items taken from a counter), their
# tests, timings and ncu (any card; ran on an H100 in the twentieth session, BENCHMARKS.md).
# Part 51: the decoding product's and attention's knobs in one short call (for the H200).
# Next, on an H200 (with `gpu_flash` and `gpu_index` packed): 26, 51, 27, 50, 49, 45, 43 and
# 39, then 42 (MLX), 37, 24, 17, 22; on an H100, 49.
set -u
part=${1:-1}
.gpu/run tests __unpack_only__ > /dev/null 2>&1
export CUDA_HOME=/usr/local/cuda NUVEC_KERNEL_CACHE=/tmp/nuvec-kernels PYTHONUNBUFFERED=1
T=/tmp/gpu/tests; B=/tmp/gpu/bin/nuvec-bench
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t() { local name=$1; shift; ( "$@" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log" ) ; }
# The row cases ($W) by form (parts 6 and 8): the defaults, the masked rows, the 4-byte loads,
# the defaults again.
W="copy rms_norm add_rms_norm layer_norm rms_norm_vjp softmax logsumexp cross_entropy rope"
rows_by_form() {
  echo "== rows"; timeout 80 $B --device gpu --budget 0.5 --json $OUT/rows.json $W 2>&1 | tail -10
  echo "== rows, masked form"; NUVEC_ROWS_FULL=0 timeout 80 $B --device gpu --budget 0.5 $W \
    2>&1 | tail -10
  echo "== rows, 4-byte loads"; NUVEC_KERNEL_DEFINES="NV_RAW_ALIGN=4" timeout 80 $B \
    --device gpu --budget 0.5 $W 2>&1 | tail -10
  echo "== rows again"; timeout 80 $B --device gpu --budget 0.5 $W 2>&1 | tail -10
}
# Each named test log's outcome.
results() {
  for b in "$@"; do echo "== $b"; grep -E "^test result|FAILED|panicked|rc=" "$OUT/$b.log" | head -4; done
}
# ncu's headline sections (time, DRAM, issue, occupancy, registers, local memory) of the first
# launch of the kernels matching $1 in nuvec-bench's cases $2...
ncu_sections() {
  local k=$1; shift
  timeout 90 ncu --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy \
    --section LaunchStats -k regex:$k -c 1 $B --device gpu --budget 0.01 "$@" 2>&1 | \
    grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Local|Waves Per" | \
    head -11
}
if [ "$part" = 1 ]; then
  t quant timeout 280 $T/gpu_quantized-* --test-threads=4 &
  t quant_old env NUVEC_QMV_MMA=0 NUVEC_QMM_WGMMA=0 timeout 280 $T/gpu_quantized-* --test-threads=4 &
  t gather timeout 280 $T/gpu_gather_qmm-* --test-threads=2 &
  t gather_old env NUVEC_QMV_MMA=0 timeout 280 $T/gpu_gather_qmm-* --test-threads=2 &
  t wgmma timeout 280 $T/gpu_qmm_wgmma-* --test-threads=2 &
  t wgmma_tiles env NUVEC_QMM_WGMMA_STREAMK=0 timeout 280 $T/gpu_qmm_wgmma-* \
    --test-threads=2 &
  t seed timeout 280 $T/fast_ops-* --test-threads=2 &
  t rows timeout 280 $T/gpu_rows-* --test-threads=2 &
  t norms timeout 280 $T/gpu_norms-* --test-threads=2 &
  t rows_two env NUVEC_KERNEL_DEFINES="NV_ROW_TWO_BARRIERS=1" timeout 280 $T/gpu_rows-* \
    --test-threads=2 &
  wait
  # The row exchanges' alternating buffers under the race checker (one thread: softmax's
  # tests, then the forward norms').
  t racecheck_rows timeout 150 compute-sanitizer --tool racecheck $T/gpu_rows-* \
    --test-threads=1 softmax
  t racecheck_norms timeout 150 compute-sanitizer --tool racecheck $T/gpu_norms-* \
    --test-threads=1
  for f in quant quant_old gather gather_old wgmma wgmma_tiles seed rows norms rows_two \
    racecheck_rows racecheck_norms; do
    echo "== $f"; grep -E "^test result|FAILED|panicked|rc=" "$OUT/$f.log" | head -8
    grep -A3 "panicked" "$OUT/$f.log" | head -8
  done
  exit 0
fi
if [ "$part" = 2 ]; then
Q="qmm_512x14336x4096 qmm_1024x14336x4096 qmm_4096x14336x4096"
echo "== qmm, default"; timeout 60 $B --device gpu --budget 1 --json $OUT/q_default.json $Q 2>&1 | tail -3
echo "== qmm, no warpgroup kernel (dequantized from 256 rows)"; NUVEC_QMM_WGMMA=0 timeout 60 $B \
  --device gpu --budget 1 $Q 2>&1 | tail -3
for bs in 128,8 128,6 256,4 256,6; do echo "== qmm, warpgroup blocks of ${bs%,*} rows, ${bs#*,} stages"
  NUVEC_QMM_WGMMA_BX=${bs%,*} NUVEC_QMM_WGMMA_STAGES=${bs#*,} timeout 60 $B --device gpu --budget 1 \
    qmm_512x14336x4096 qmm_1024x14336x4096 2>&1 | tail -2; done
echo "== torch"; timeout 90 python3 bench/peers/torch_bench.py --json $OUT/torch_q.json $Q \
  qmv_14336x4096 2>&1 | tail -4
M="copy qmv_14336x4096 moe_qmv_1 moe_qmv_64 moe_mm_64"
echo "== decode, default"; timeout 60 $B --device gpu --budget 1 --json $OUT/q_decode.json $M 2>&1 | tail -5
echo "== decode, CUDA-core kernels"; NUVEC_QMV_MMA=0 timeout 60 $B --device gpu --budget 1 \
  qmv_14336x4096 moe_qmv_1 moe_qmv_64 2>&1 | tail -3
for d in NVQM_UNROLL=4 NVQM_MINB=1; do echo "== decode, $d"; NUVEC_KERNEL_DEFINES="$d" timeout 40 \
  $B --device gpu --budget 1 qmv_14336x4096 moe_qmv_1 moe_qmv_64 2>&1 | tail -3; done
for sh in 1,4 2,2 2,8; do echo "== decode, tensor-core shape $sh"; NUVEC_QMV_MMA_SHAPE=$sh timeout 40 \
  $B --device gpu --budget 1 qmv_14336x4096 moe_qmv_1 moe_qmv_64 2>&1 | tail -3; done
exit 0
fi
if [ "$part" = 4 ]; then
# The row kernels' exchanges with one barrier each (the buffers alternated) against two (as
# before, `NV_ROW_TWO_BARRIERS=1`), and Liger again: softmax and layer norm (two exchanges a
# row) ran behind Liger. (`NUVEC_ROWS_PACKS` 1, 2 and 8 all lost to the default 4 on the
# H200.)
W="copy softmax layer_norm rms_norm add_rms_norm rms_norm_vjp"
echo "== rows, default"; timeout 60 $B --device gpu --budget 0.5 --json $OUT/rows.json $W 2>&1 | tail -6
echo "== rows, two barriers an exchange (as before)"; NUVEC_KERNEL_DEFINES="NV_ROW_TWO_BARRIERS=1" \
  timeout 60 $B --device gpu --budget 0.5 $W 2>&1 | tail -6
echo "== rows, default again"; timeout 60 $B --device gpu --budget 0.5 $W 2>&1 | tail -6
echo "== liger"; timeout 90 python3 bench/peers/liger_bench.py --json $OUT/liger.json softmax \
  layer_norm rms_norm 2>&1 | tail -3
exit 0
fi
if [ "$part" = 5 ]; then
# The decoding attention's merge as a programmatic dependent launch (the default) against an
# ordinary launch (`NUVEC_PDL=0`) on the H200: tests, then timings, then each kernel's time
# under ncu (its clocks) at B1 8k and in the experts' 64-token product.
t attn timeout 150 $T/gpu_attention-* --test-threads=4 &
t attn_nopdl env NUVEC_PDL=0 timeout 150 $T/gpu_attention-* --test-threads=4 &
t seed timeout 150 $T/fast_ops-* --test-threads=2 &
t graph timeout 150 $T/gpu_graph-* --test-threads=2 &
wait
for f in attn attn_nopdl seed graph; do
  echo "== $f"; grep -E "^test result|FAILED|panicked|rc=" "$OUT/$f.log" | head -4
done
A="decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k paged_decode_b1_8k paged_decode_b8_8k"
for pdl in 1 0 1; do echo "== decode, NUVEC_PDL=$pdl"
  NUVEC_PDL=$pdl timeout 60 $B --device gpu --budget 0.5 $A 2>&1 | tail -6; done
for c in decode_b1_8k moe_qmv_64; do
  timeout 60 ncu --csv --metrics gpu__time_duration.sum -c 60 $B --device gpu --budget 0.02 $c \
    > $OUT/ncu_$c.csv 2> $OUT/ncu_$c.err; echo "ncu $c rc=$?"; done
exit 0
fi
if [ "$part" = 6 ]; then
# The row kernels' new forms (the session of 2026-12-05, fifth): packs in one 16-byte access
# (`NV_RAW_ALIGN=4`: the four 4-byte loads the compiler gave before), rows that fill every
# pack without per-element masks (`NUVEC_ROWS_FULL=0`: the masked form), and the strided
# views' first axis located without a division (every kernel's `nv_locate`). Tests (the
# backend's too), then timings by form, then the exchanges and budgets again, then Liger and
# torch.compile on the same rows.
for b in gpu_rows gpu_norms fast_ops gpu_fused gpu_backend gpu_index gpu_reduce gpu_sort; do
  t $b timeout 240 $T/$b-* --test-threads=3 &
done
wait
results gpu_rows gpu_norms fast_ops gpu_fused gpu_backend gpu_index gpu_reduce gpu_sort
rows_by_form
K="copy layer_norm softmax"
for d in NV_LAYER_ONE_PASS=1 NV_SOFTMAX_ONE_EXCHANGE=1 "NV_SOFTMAX_KEEP=0 NV_SOFTMAX_MINB=3"; do
  echo "== rows, $d"
  NUVEC_KERNEL_DEFINES="$d" timeout 40 $B --device gpu --budget 0.5 $K 2>&1 | tail -3; done
echo "== liger"; timeout 90 python3 bench/peers/liger_bench.py --json $OUT/liger.json $W 2>&1 | tail -9
echo "== torch.compile"; timeout 150 python3 bench/peers/torch_bench.py --compile \
  --json $OUT/torch_compile.json $W 2>&1 | tail -10
exit 0
fi
if [ "$part" = 8 ]; then
# Part 6's timings alone, only on an H200 (on another card it stops at once): the row kernels
# by form, then Liger and PyTorch on the same rows.
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200"; exit 0; }
rows_by_form
echo "== liger"; timeout 90 python3 bench/peers/liger_bench.py --json $OUT/liger.json $W 2>&1 | tail -9
exit 0
fi
if [ "$part" = 9 ]; then
# The rotation's heads located from their task's first row (`head_step`), with
# `GPU_TESTS="fast_ops gpu_fused gpu_norms"`: the tests that rotate, then the row cases.
for b in fast_ops gpu_fused gpu_norms; do t $b timeout 150 $T/$b-* --test-threads=4 & done
wait
results fast_ops gpu_fused gpu_norms
W="copy rope layer_norm softmax rms_norm"
for k in 1 2; do echo "== rows $k"; timeout 40 $B --device gpu --budget 0.5 $W 2>&1 | tail -5; done
exit 0
fi
if [ "$part" = 10 ]; then
# The row cases still under 90% of the copy on the H200 (log-sum-exp, rope): log-sum-exp with
# its rows in registers (the full form; `NUVEC_LSE_WARP=0`) against the warp rows (default).
W="copy logsumexp rope softmax"
echo "== default"; timeout 40 $B --device gpu --budget 0.5 $W 2>&1 | tail -4
echo "== log-sum-exp rows in registers"; NUVEC_LSE_WARP=0 timeout 40 $B --device gpu \
  --budget 0.5 $W 2>&1 | tail -4
for d in NV_LSE_MINB=2 NV_LSE_MINB=4; do echo "== $d, rows in registers"
  NUVEC_LSE_WARP=0 NUVEC_KERNEL_DEFINES="$d" timeout 40 $B --device gpu --budget 0.5 \
    logsumexp 2>&1 | tail -1; done
echo "== default again"; timeout 40 $B --device gpu --budget 0.5 $W 2>&1 | tail -4
exit 0
fi
if [ "$part" = 12 ]; then
# MLX's CUDA build (`gpu-pack --peers`, or `peers-pack .gpu/peers`) on the headline cases,
# with nuvec's in the same run, and the tensor-core decoding kernel's register budgets.
R="copy rms_norm add_rms_norm layer_norm rms_norm_vjp softmax logsumexp cross_entropy rope"
S="sdpa_causal_4k sdpa_full_4k sdpa_causal_8k_d64 sdpa_causal_16k"
D="decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k"
Q="qmv_14336x4096 qmm_512x14336x4096 qmm_4096x14336x4096 moe_qmv_1 moe_qmv_64"
echo "== nuvec"; timeout 150 $B --device gpu --budget 0.5 --json $OUT/nuvec12.json $R $S $D $Q \
  2>&1 | tail -22
.gpu/peers/setup "$PWD/.gpu/peers" > /dev/null 2>&1 && tar -C /tmp/site -xJf .gpu/peers/cute.tar.xz
echo "== mlx"; PYTHONPATH=/tmp/site timeout 200 python3 bench/peers/mlx_bench.py --device gpu \
  --json $OUT/mlx.json $R $S $D $Q 2>&1 | tail -22
for d in NVQM_MINB=3 NVQM_MINB=4; do echo "== decode, $d"; NUVEC_KERNEL_DEFINES="$d" timeout 40 \
  $B --device gpu --budget 1 qmv_14336x4096 moe_qmv_1 moe_qmv_64 2>&1 | tail -3; done
exit 0
fi
if [ "$part" = 13 ]; then
# The row kernels' one-instruction NaN-propagating maximum and rope's tasks found by steps
# (`NUVEC_ROPE_ADDRESSING` caps the mode), with
# `GPU_TESTS="fast_ops gpu_fused gpu_norms gpu_rows" gpu-pack --bench` and .gpu/peers (MLX,
# and cute.tar.xz: the CUTLASS headers its quantized kernels compile with): tests, then the
# row cases against Liger, PyTorch and MLX in the same run.
for b in fast_ops gpu_fused gpu_norms gpu_rows; do t $b timeout 200 $T/$b-* --test-threads=4 & done
t norms_located env NUVEC_ROPE_ADDRESSING=0 timeout 200 $T/gpu_norms-* --test-threads=4 &
t norms_stepped env NUVEC_ROPE_ADDRESSING=1 timeout 200 $T/gpu_norms-* --test-threads=4 &
wait
results fast_ops gpu_fused gpu_norms gpu_rows norms_located norms_stepped
echo "== rows"; timeout 80 $B --device gpu --budget 0.5 --json $OUT/rows.json $W 2>&1 | tail -10
for a in 1 0; do echo "== rope, addressing at most $a"; NUVEC_ROPE_ADDRESSING=$a timeout 30 $B \
  --device gpu --budget 0.5 rope 2>&1 | tail -1; done
echo "== liger"; timeout 90 python3 bench/peers/liger_bench.py --json $OUT/liger.json $W 2>&1 | tail -9
echo "== torch"; timeout 120 python3 bench/peers/torch_bench.py --json $OUT/torch.json $W 2>&1 | tail -10
.gpu/peers/setup "$PWD/.gpu/peers" > /dev/null 2>&1 && tar -C /tmp/site -xJf .gpu/peers/cute.tar.xz
Q="qmv_14336x4096 qmm_512x14336x4096 qmm_4096x14336x4096 moe_qmv_1 moe_qmv_64"
echo "== mlx"; PYTHONPATH=/tmp/site timeout 200 python3 bench/peers/mlx_bench.py --device gpu \
  --json $OUT/mlx.json $W $Q 2>&1 | tail -15
echo "== nuvec quantized"; timeout 60 $B --device gpu --budget 0.5 $Q 2>&1 | tail -5
echo "== rows again"; timeout 80 $B --device gpu --budget 0.5 $W 2>&1 | tail -10
exit 0
fi
if [ "$part" = 22 ]; then
# What binds the warpgroup prefill (0.67 of cuBLAS on an H100) and `decode_b1_8k`'s split
# kernel (60-75% of a copy of its bytes), with the pack of part 17 plus gpu_qmm_wgmma: ncu's
# headline sections of each, with PyTorch's product beside the first; then the decoding
# kernel at four blocks a multiprocessor.
echo "== ncu, warpgroup prefill"; ncu_sections qmmws qmm_512x14336x4096
echo "== ncu, cuBLAS"; timeout 120 ncu --section SpeedOfLight --section Occupancy \
  -k regex:"nvjet|gemm|xmma|cutlass" -c 1 \
  python3 bench/peers/torch_bench.py qmm_512x14336x4096 2>&1 | \
  grep -E "nvjet|gemm|Duration|L2 Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy" | head -12
echo "== ncu, decode split kernel"; ncu_sections "attention_bf16_d128" decode_b1_8k
# The decoding kernel at four blocks a multiprocessor (84 bytes spilled) against three.
A="copy_32mib decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k"
for b in 3 4 3; do echo "== decode, $b blocks an SM"; NUVEC_KERNEL_DEFINES="NV_ATTN_MMA_BLOCKS=$b" \
  timeout 40 $B --device gpu --budget 0.4 $A 2>&1 | tail -5; done
exit 0
fi
if [ "$part" = 24 ]; then
# The warpgroup prefill (warp-specialised, the stream-K walk by default), with
# `GPU_TESTS="gpu_qmm_wgmma gpu_quantized fast_ops ..." gpu-pack --bench`: its tests with the
# walk and without, the race checker, the seeds' quantized tests; then the prefill by walk and
# by the most rows kept from the dequantized route, cuBLAS's bf16 product in the same run,
# and ncu's sections.
t wgd timeout 200 $T/gpu_qmm_wgmma-* --test-threads=4 &
t wg_tiles env NUVEC_QMM_WGMMA_STREAMK=0 timeout 200 $T/gpu_qmm_wgmma-* --test-threads=4 &
t quantd timeout 250 $T/gpu_quantized-* --test-threads=6 &
t seedq timeout 200 $T/fast_ops-* --test-threads=4 quantiz &
wait
t racecheck_sk timeout 120 compute-sanitizer --tool racecheck $T/gpu_qmm_wgmma-* --test-threads=1
results wgd wg_tiles quantd seedq racecheck_sk
grep -A4 panicked $OUT/wgd.log | head -10
P="qmm_512x14336x4096 qmm_1024x14336x4096 qmm_4096x14336x4096"
for f in 1 0 1; do echo "== prefill, stream-K $f"; NUVEC_QMM_WGMMA_STREAMK=$f timeout 40 $B \
  --device gpu --budget 0.5 $P 2>&1 | tail -3; done
for r in 640 8192; do echo "== prefill, kept up to $r rows"; NUVEC_QMM_WGMMA_MAX_ROWS=$r \
  timeout 40 $B --device gpu --budget 0.5 $P 2>&1 | tail -3; done
echo "== torch"; timeout 90 python3 bench/peers/torch_bench.py $P 2>&1 | tail -3
echo "== ncu, prefill"; ncu_sections qmmwg qmm_512x14336x4096
exit 0
fi
if [ "$part" = 25 ]; then
# The warpgroup prefill with each sub-step's product issued as soon as its fragment is made
# (`NVQW_INTERLEAVE=1`, the default since an H100 ran it on 2026-12-06, tenth session) against
# the four fragments made first: its tests, then both in alternation.
t wg_interleave env NUVEC_KERNEL_DEFINES="NVQW_INTERLEAVE=1" timeout 200 $T/gpu_qmm_wgmma-* \
  --test-threads=4
results wg_interleave
P="qmm_512x14336x4096 qmm_1024x14336x4096"
for d in 0 1 0 1; do echo "== prefill, interleaved $d"; NUVEC_KERNEL_DEFINES="NVQW_INTERLEAVE=$d" \
  timeout 40 $B --device gpu --budget 0.5 $P 2>&1 | tail -2; done
exit 0
fi
if [ "$part" = 17 ]; then
# The gated delta rule against flash-linear-attention, with `GPU_TESTS="gpu_gated_delta
# fast_ops" gpu-pack --bench` and the fla-core wheel: tests, then the decode and the prefill
# against flash-linear-attention, and the decode by resident blocks.
t gd timeout 200 $T/gpu_gated_delta-* --test-threads=4 &
t seed timeout 200 $T/fast_ops-* --test-threads=4 gated_delta &
wait
results gd seed
echo "== nuvec"; timeout 60 $B --device gpu --budget 0.5 --json $OUT/gd.json copy \
  gated_delta_decode gated_delta_prefill 2>&1 | tail -3
for k in 2 3 6 0; do echo "== resident $k"; NUVEC_GD_RESIDENT=$k timeout 40 $B --device gpu \
  --budget 0.5 gated_delta_decode 2>&1 | tail -1; done
echo "== fla"; timeout 90 python3 bench/peers/fla_bench.py --json $OUT/fla.json gated_delta_decode \
  gated_delta_prefill 2>&1 | tail -2
exit 0
fi
# MLX's CUDA build (`.gpu/peers` and its `cute.tar.xz`) on the headline cases, after nuvec in
# the same call when $1 is `nuvec` (parts 27 and 42).
mlx_headline() {
  local R="copy rms_norm add_rms_norm layer_norm rms_norm_vjp softmax logsumexp cross_entropy rope"
  local S="sdpa_causal_4k sdpa_full_4k sdpa_causal_8k_d64 sdpa_causal_16k decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k"
  local Q="qmv_14336x4096 qmm_512x14336x4096 qmm_4096x14336x4096 moe_qmv_1 moe_qmv_64"
  if [ "${1:-}" = nuvec ]; then
    echo "== nuvec"; timeout 120 $B --device gpu --budget 0.3 $R $S $Q 2>&1 | tail -23
  fi
  .gpu/peers/setup "$PWD/.gpu/peers" > /dev/null 2>&1 && tar -C /tmp/site -xJf .gpu/peers/cute.tar.xz
  echo "== mlx"; PYTHONPATH=/tmp/site timeout 200 python3 bench/peers/mlx_bench.py --device gpu \
    --json $OUT/mlx.json $R $S $Q 2>&1 | tail -24
}
# nuvec, PyTorch, Liger and flash-linear-attention on the headline cases, nuvec with budget $1
# and a limit of $2 seconds (parts 26 and 38).
survey() {
  local Q="qmv_14336x4096 qmm_512x14336x4096 qmm_1024x14336x4096 qmm_4096x14336x4096 moe_qmv_1 moe_qmv_64"
  local R="copy rms_norm add_rms_norm layer_norm rms_norm_vjp softmax logsumexp cross_entropy rope"
  local S="sdpa_causal_4k sdpa_full_4k sdpa_causal_8k_d64 sdpa_causal_16k"
  local D="copy_32mib decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k paged_decode_b1_8k paged_decode_b8_8k paged_decode_b64_4k gated_delta_decode gated_delta_prefill gated_delta_prefill_16k"
  echo "== nuvec"; timeout "$2" $B --device gpu --budget "$1" --json $OUT/nuvec.json $R $S $D $Q 2>&1 | tail -37
  echo "== torch"; timeout 110 python3 bench/peers/torch_bench.py --json $OUT/torch.json $R $S \
    decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k $Q 2>&1 | tail -24
  echo "== liger"; timeout 60 python3 bench/peers/liger_bench.py --json $OUT/liger.json $R 2>&1 | tail -9
  echo "== fla"; timeout 60 python3 bench/peers/fla_bench.py --json $OUT/fla.json gated_delta_decode \
    gated_delta_prefill gated_delta_prefill_16k 2>&1 | tail -3
}
if [ "$part" = 26 ]; then
# The H200's survey of every headline case against every peer but MLX, in one call (with
# `GPU_TESTS="gpu_qmm_wgmma gpu_quantized gpu_gather fast_ops gpu_norms gpu_rows
# gpu_gated_delta gpu_attention" gpu-pack --bench --peers` and the wheels): nuvec, PyTorch (its default SDPA
# and cuDNN's), Liger, flash-linear-attention, the experts' products by tiles, nuvec again. On
# another card it stops at once (exit 3), for the least device time.
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 3
survey 0.4 170
S="sdpa_causal_4k sdpa_full_4k sdpa_causal_8k_d64 sdpa_causal_16k"
R="copy rms_norm add_rms_norm layer_norm rms_norm_vjp softmax logsumexp cross_entropy rope"
echo "== torch cudnn"; timeout 60 python3 bench/peers/torch_bench.py --sdpa cudnn $S 2>&1 | tail -4
for sh in 2,4 2,2; do echo "== experts, gathered shape $sh"; NUVEC_GQMV_MMA_SHAPE=$sh timeout 30 \
  $B --device gpu --budget 0.4 moe_qmv_1 moe_qmv_64 2>&1 | tail -2; done
echo "== nuvec again"; timeout 90 $B --device gpu --budget 0.3 $R $S 2>&1 | tail -14
exit 0
fi
if [ "$part" = 27 ]; then
# The H200's tests and MLX, after part 26 on the same warm machine (same pack): every packed
# test file, then MLX's CUDA build on the headline cases.
for b in fast_ops gpu_norms gpu_rows gpu_attention; do t $b timeout 200 $T/$b-* --test-threads=3 & done
t gd timeout 200 $T/gpu_gated_delta-* --test-threads=2 &
t quant timeout 250 $T/gpu_quantized-* --test-threads=3 &
t wg timeout 200 $T/gpu_qmm_wgmma-* --test-threads=2 &
t gather timeout 200 $T/gpu_gather_qmm-* --test-threads=2 &
wait
results fast_ops gpu_norms gpu_rows gpu_attention gd quant wg gather
grep -h -A3 panicked $OUT/*.log | head -12
# Off the H200 the tests alone (MLX ran on an H100 in the sixth session).
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 0
mlx_headline
exit 0
fi
if [ "$part" = 39 ]; then
# FlashAttention-3's tiles of 176 keys for head size 128 without causality or a mask
# (`NUVEC_FLASH_BN=176`; `=128` the tiles before, whatever the default): the prefill and
# attention tests with them, then `sdpa_full_4k` by tile in alternation, PyTorch's SDPA in the
# same call (with `gpu_flash` in GPU_TESTS).
t flash env NUVEC_FLASH_BN=176 timeout 200 $T/gpu_flash-* --test-threads=4 &
t flash128 env NUVEC_FLASH_BN=128 timeout 200 $T/gpu_flash-* --test-threads=4 &
t fast env NUVEC_FLASH_BN=176 timeout 200 $T/fast_ops-* --test-threads=4 attention &
wait
results flash flash128 fast
grep -h -A3 panicked $OUT/*.log | head -8
for i in 1 2; do
  echo "== 176 keys"; NUVEC_FLASH_BN=176 timeout 40 $B --device gpu --budget 0.4 sdpa_full_4k 2>&1 | tail -1
  echo "== 128 keys"; NUVEC_FLASH_BN=128 timeout 40 $B --device gpu --budget 0.4 sdpa_full_4k sdpa_causal_4k 2>&1 | tail -2
done
echo "== torch"; timeout 60 python3 bench/peers/torch_bench.py sdpa_full_4k sdpa_causal_4k 2>&1 | tail -2
exit 0
fi
if [ "$part" = 40 ]; then
# The H200's headline figures in four minutes, for a lease with little device time left: the
# rows, the prefill (three consumers for head size 64 asked for, as packs before commit
# 7f6125c need), decoding, the decoding product and the experts' against PyTorch, Liger and
# flash-linear-attention in the same call. On another card it stops at once (exit 3).
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 3
export NUVEC_FLASH_CONSUMERS=3
R="copy rms_norm add_rms_norm layer_norm rms_norm_vjp softmax logsumexp cross_entropy rope"
S="sdpa_causal_4k sdpa_full_4k sdpa_causal_8k_d64 sdpa_causal_16k"
Q="copy_32mib qmv_14336x4096 decode_b1_8k gated_delta_decode moe_qmv_64"
echo "== nuvec"; timeout 100 $B --device gpu --budget 0.2 $R $S $Q 2>&1 | tail -19
echo "== torch"; timeout 80 python3 bench/peers/torch_bench.py $R $S qmv_14336x4096 \
  decode_b1_8k 2>&1 | tail -15
echo "== liger"; timeout 40 python3 bench/peers/liger_bench.py $R 2>&1 | tail -9
echo "== fla"; timeout 40 python3 bench/peers/fla_bench.py gated_delta_decode 2>&1 | tail -1
exit 0
fi
if [ "$part" = 41 ]; then
# The counting sequences kept on the device (`arange(0, n, 1)` of u32 and i32 with no launch:
# `gather_qmm`'s lhs when none is given) and the stream-K flags set back to zero by the
# quantized product itself (no memset a call), on any card (with `gpu_index` in GPU_TESTS):
# their tests and the decoding attention's (whose in-block merge shares the counters), then
# the cases they touch.
t index timeout 200 $T/gpu_index-* --test-threads=4 &
t wg timeout 200 $T/gpu_qmm_wgmma-* --test-threads=2 &
t gather timeout 200 $T/gpu_gather_qmm-* --test-threads=2 &
t attn env NUVEC_ATTN_MERGE=block timeout 200 $T/gpu_attention-* --test-threads=2 &
wait
results index wg gather attn
grep -h -A3 panicked $OUT/*.log | head -12
echo "== nuvec"; timeout 60 $B --device gpu --budget 0.4 copy_32mib moe_qmv_1 moe_qmv_64 \
  moe_mm_64 qmm_512x14336x4096 2>&1 | tail -5
exit 0
fi
if [ "$part" = 42 ]; then
# Part 27's MLX run alone, for a call of its own where the pack, the wheels and MLX's build do
# not fit one carry: `.gpu` holding only nuvec-bench (a bins.tar.xz of `bin/nuvec-bench`) and
# `.gpu/peers` from `peers-pack`, with `cute.tar.xz` beside them (MLX's `mlx/include/cute` and
# `mlx/include/cutlass` from the mlx-cuda-13 wheel, which its quantized kernels compile with;
# peers-pack leaves them out). nuvec and MLX's CUDA build on the headline cases, same call.
mlx_headline nuvec
exit 0
fi
if [ "$part" = 43 ]; then
# The decoding attention's warps with at most four steps asking L2 for their later ones at
# their start (`NUVEC_ATTN_L2=1`) against the default (none), on any card: the attention tests
# with the requests, then the decoding cases by form in alternation, the copy in the call.
# `decode_b1_8k` moved from 19.6-20.0 µs to 17.1-17.5 with them on one H100 and from 15.4-16.4
# to 17.2-17.5 on another (seventeenth session): which way it goes on an H200 is the question.
t attn env NUVEC_ATTN_L2=1 timeout 200 $T/gpu_attention-* --test-threads=4
results attn
A="decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k"
for i in 1 2 3; do
  echo "== none"; timeout 60 $B --device gpu --budget 0.2 copy_32mib $A 2>&1 | tail -5
  echo "== L2 requests"; NUVEC_ATTN_L2=1 timeout 60 $B --device gpu --budget 0.2 $A 2>&1 | tail -4
done
exit 0
fi
if [ "$part" = 45 ]; then
# L1 requests ahead of a warp's loads, on any card: the decoding quantized products' chunks
# (`NVQM_AHEAD`, a kernel define, off by default: registers hold one to two chunks of a warp's
# rows in flight, SASS) and the decoding attention's steps (`NUVEC_ATTN_L1`: since the
# nineteenth session 4 by default for warps of at most 4 steps, others none); the
# gathered products' and the attention tests with them on, then the cases by distance in
# alternation, the copy in the call.
K="NVQM_AHEAD=2"
t gather env NUVEC_KERNEL_DEFINES="$K" timeout 150 $T/gpu_gather_qmm-* --test-threads=2 &
t attn env NUVEC_ATTN_L1=2 timeout 150 $T/gpu_attention-* --test-threads=3 &
t quant env NUVEC_KERNEL_DEFINES="$K" timeout 150 $T/gpu_quantized-* --test-threads=3 decoding &
wait
results gather attn quant
grep -h -A3 panicked $OUT/*.log | head -8
Q="qmv_14336x4096 moe_qmv_64 moe_qmv_1"
A="decode_b1_8k decode_b8_8k decode_b1_128k"
for i in 1 2; do
  echo "== none"; timeout 60 $B --device gpu --budget 0.2 copy_32mib $Q $A 2>&1 | tail -7
  for d in 1 2 4; do
    echo "== ahead $d"; NUVEC_KERNEL_DEFINES="NVQM_AHEAD=$d" NUVEC_ATTN_L1=$d timeout 60 $B \
      --device gpu --budget 0.2 $Q $A 2>&1 | tail -6
  done
done
exit 0
fi
if [ "$part" = 46 ]; then
# Part 45's timings alone, one round (for the tail of a short lease): none, then the L1
# requests 2 and 4 chunks or steps ahead, then none again.
Q="copy_32mib qmv_14336x4096 moe_qmv_64 decode_b1_8k decode_b8_8k"
echo "== none"; timeout 40 $B --device gpu --budget 0.2 $Q 2>&1 | tail -5
for d in 2 4; do
  echo "== ahead $d"; NUVEC_KERNEL_DEFINES="NVQM_AHEAD=$d" NUVEC_ATTN_L1=$d timeout 40 $B \
    --device gpu --budget 0.2 $Q 2>&1 | tail -5
done
echo "== none again"; timeout 40 $B --device gpu --budget 0.2 $Q 2>&1 | tail -5
exit 0
fi
if [ "$part" = 48 ]; then
# What holds the decoding product and the decoding split kernel below the copy (any card, the
# H200 first): ncu's speed of light, memory, warp stall and occupancy sections of one launch
# of each (whole reports under $OUT), the kernels' durations by ncu beside the copy's.
for c in "qmv_mma qmv_14336x4096" "attention_bf16_d128 decode_b1_8k" "copy copy_32mib"; do
  set -- $c
  timeout 120 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section LaunchStats -k regex:$1 -c 1 \
    $B --device gpu --budget 0.01 $2 > $OUT/ncu_$2.txt 2>&1
  echo "== ncu $2 (rc=$?)"
  grep -E "Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Issue|Eligible|Active Warps|Achieved Occupancy|Registers Per|Waves Per|Stall|Warp Cycles Per" \
    $OUT/ncu_$2.txt | head -24
done
exit 0
fi
if [ "$part" = 49 ]; then
# `decode_b1_8k`'s two speeds (any card): on an H100 it ran 15.1-16.5 µs as a process's first
# case and 19.2-20.2 after `copy_32mib` in the same process, whatever its order of loads or
# its splits' walk (nineteenth session). Each way with the L1 requests 0, 2 and 4 steps ahead
# (4 the default now, for warps of at most 4 steps), then the decoding product each way.
for i in 1 2; do
  for d in 0 2 4; do
    echo "== ahead $d, first"; NUVEC_ATTN_L1=$d timeout 40 $B \
      --device gpu --budget 0.2 decode_b1_8k paged_decode_b1_8k 2>&1 | tail -2
    echo "== ahead $d, after a copy"; NUVEC_ATTN_L1=$d timeout 40 $B \
      --device gpu --budget 0.2 copy_32mib decode_b1_8k decode_b8_8k 2>&1 | tail -3
  done
  echo "== products, first"; timeout 40 $B --device gpu --budget 0.2 qmv_14336x4096 2>&1 | tail -1
  echo "== products, after a copy"; timeout 40 $B --device gpu --budget 0.2 copy_32mib \
    qmv_14336x4096 moe_qmv_64 2>&1 | tail -3
done
exit 0
fi
if [ "$part" = 50 ]; then
# The prefill's persistent blocks (any card, with `gpu_flash` in GPU_TESTS): fixed shares
# (`NUVEC_FLASH_PERSISTENT=1`, 2-11% slower than a block an item on an H100 in the fifteenth
# session, full attention as well as causal) and each block taking its next item from a
# counter (`=2`, FlashAttention-3's dynamic scheduler): the prefill and attention tests with
# the second, then `sdpa_full_4k`, `sdpa_causal_4k` and `sdpa_causal_8k_d64` by walk in
# alternation, PyTorch's SDPA in the call, and ncu's issue, stall and scheduler sections of one
# launch of each walk (reports under $OUT).
t flash env NUVEC_FLASH_PERSISTENT=2 timeout 200 $T/gpu_flash-* --test-threads=4 &
t fast env NUVEC_FLASH_PERSISTENT=2 timeout 200 $T/fast_ops-* --test-threads=4 attention &
wait
results flash fast
grep -h -A3 panicked $OUT/*.log | head -8
C="sdpa_full_4k sdpa_causal_4k sdpa_causal_8k_d64"
for i in 1 2; do
  for p in 0 2 1; do
    echo "== persistent $p"; NUVEC_FLASH_PERSISTENT=$p timeout 60 $B --device gpu --budget 0.4 \
      $C 2>&1 | tail -3
  done
done
echo "== torch"; timeout 60 python3 bench/peers/torch_bench.py $C 2>&1 | tail -3
for p in 0 2 1; do
  NUVEC_FLASH_PERSISTENT=$p timeout 100 ncu --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section LaunchStats -k regex:flashtma -c 1 \
    $B --device gpu --budget 0.01 sdpa_causal_4k > $OUT/ncu_p$p.txt 2>&1
  echo "== ncu, persistent $p, sdpa_causal_4k (rc=$?)"
  grep -E "Duration|Compute \(SM\) Throughput|Issue Slots|Eligible Warps|No Eligible|Warp Cycles Per|Registers Per|Grid Size" \
    $OUT/ncu_p$p.txt | head -10
done
exit 0
fi
if [ "$part" = 51 ]; then
# The decoding product's and the decoding attention's knobs in one short call, for the H200
# (on the H100 the product reads at 88-90% of the copy and every knob lost; on the H200 it
# took as long as there, 14 us, 60% of its copy: bound by the loads a warp keeps in flight, not
# by the bandwidth): tiles and slices, L1 requests ahead, the register budget, then the
# attention's L1 distance; the copy and the defaults at the start and the end.
Q="copy_32mib qmv_14336x4096 moe_qmv_64 decode_b1_8k"
echo "== defaults"; timeout 40 $B --device gpu --budget 0.2 $Q 2>&1 | tail -4
for sh in 2,8 1,4 2,2; do echo "== plain shape $sh"; NUVEC_QMV_MMA_SHAPE=$sh timeout 30 $B \
  --device gpu --budget 0.2 qmv_14336x4096 2>&1 | tail -1; done
for k in NVQM_AHEAD=1 NVQM_AHEAD=2 NVQM_AHEAD=4 NVQM_MINB=1 "NVQM_MINB=1 NVQM_UNROLL=8" \
  NVQM_UNROLL=2; do
  echo "== $k"; NUVEC_KERNEL_DEFINES="$k" timeout 30 $B --device gpu --budget 0.2 \
    qmv_14336x4096 moe_qmv_64 2>&1 | tail -2
done
echo "== NVQM_AHEAD=2, shape 2,8"; NUVEC_KERNEL_DEFINES="NVQM_AHEAD=2" NUVEC_QMV_MMA_SHAPE=2,8 \
  timeout 30 $B --device gpu --budget 0.2 qmv_14336x4096 2>&1 | tail -1
for d in 0 2 8; do echo "== attention L1 $d"; NUVEC_ATTN_L1=$d timeout 30 $B --device gpu \
  --budget 0.2 decode_b1_8k decode_b8_8k 2>&1 | tail -2; done
echo "== defaults again"; timeout 40 $B --device gpu --budget 0.2 $Q 2>&1 | tail -4
exit 0
fi
if [ "$part" = 37 ]; then
# torch.compile on the row cases, attention and decoding, beside nuvec in the same call (the
# strongest PyTorch peer; no earlier part ran it). Its first run of a case compiles it.
R="copy rms_norm add_rms_norm layer_norm rms_norm_vjp softmax logsumexp cross_entropy rope"
S="sdpa_causal_4k sdpa_full_4k decode_b1_8k decode_b8_8k"
echo "== nuvec"; timeout 90 $B --device gpu --budget 0.3 --json $OUT/nuvec.json $R $S 2>&1 | tail -14
echo "== torch.compile"; timeout 300 python3 bench/peers/torch_bench.py --compile \
  --json $OUT/torch_compile.json $R $S 2>&1 | tail -14
exit 0
fi
if [ "$part" = 38 ]; then
# Part 26 cut to fit beside another part in one call (as "bash scripts/gpu-session-next.sh 27;
# bash scripts/gpu-session-next.sh 38"): nuvec, PyTorch, Liger and flash-linear-attention on
# the headline cases, on any card (the card is named at the top).
survey 0.3 130
exit 0
fi
if [ "$part" = 3 ]; then
# Part 3: the headline cases against the peers in the same run.
R="copy rms_norm add_rms_norm layer_norm rms_norm_vjp softmax logsumexp cross_entropy rope"
S="sdpa_causal_4k sdpa_full_4k sdpa_causal_8k_d64 sdpa_causal_16k"
D="decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k gated_delta_decode gated_delta_prefill"
echo "== nuvec"; timeout 200 $B --device gpu --budget 0.5 --json $OUT/nuvec.json $R $S $D 2>&1 | tail -20
echo "== torch"; timeout 150 python3 bench/peers/torch_bench.py --json $OUT/torch.json $R $S \
  decode_b1_8k decode_b8_8k decode_b64_4k decode_b1_128k 2>&1 | tail -18
echo "== liger"; timeout 90 python3 bench/peers/liger_bench.py --json $OUT/liger.json $R 2>&1 | tail -9
echo "== fla"; timeout 90 python3 bench/peers/fla_bench.py --json $OUT/fla.json gated_delta_decode \
  gated_delta_prefill 2>&1 | tail -2
exit 0
fi
# A part not named above (a removed one) runs nothing.
echo "no part $part in this script" >&2
exit 2

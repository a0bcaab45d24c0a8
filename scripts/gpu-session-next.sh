#!/usr/bin/env bash
# The next H200 session's runs (device tool: carry [".gpu", ".whl"], command
# "bash scripts/gpu-session-next.sh 1", then 2, then 3, then 4), after
# `GPU_TESTS="gpu_quantized gpu_qmm gpu_flash gpu_gather gpu_rows fast_ops" gpu-pack --bench`
# and the fla-core and liger-kernel wheels in .whl/ (the device README says how).
# Part 1: the tests the last run cut short (alone, with room), the warpgroup quantized
# product's tests with each in-flight form, the quantized and gathered tests again with the
# tensor-core matrix-vector kernels on (`NUVEC_QMV_MMA=1`), and the row kernels' tests (the
# log-sum-exp warp rows); logs under $OUT. Part 2: the quantized products' timings
# (tensor-core against CUDA-core matrix-vector kernels, plain and gathered; the prefill's
# dequantized weights for cuBLAS, the default from 256 rows, against the tiled and warpgroup
# kernels and PyTorch's bf16 product). Part 3: `ncu`'s full sections on both gathered
# matrix-vector kernels, and the rows against Liger (log-sum-exp's warp rows against its block
# rows). Part 4: prefill attention (the exponentials' new code: the scale folded, the
# diagonal's tests only on its tiles) against PyTorch, with a share of the exponentials taken
# by a polynomial (`NV_FLASH_POLY`), and as persistent blocks (`NUVEC_FLASH_PERSISTENT=1`).
# Knobs need no rebuild.
set -u
part=${1:-1}
.gpu/run tests __unpack_only__ > /dev/null 2>&1
export CUDA_HOME=/usr/local/cuda NUVEC_KERNEL_CACHE=/tmp/nuvec-kernels
T=/tmp/gpu/tests; B=/tmp/gpu/bin/nuvec-bench
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
t() { local name=$1; shift; ( "$@" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log" ) ; }
if [ "$part" = 1 ]; then
  t quant timeout 280 $T/gpu_quantized-* --test-threads=4 &
  t flash timeout 280 $T/gpu_flash-* --test-threads=3 &
  t gather timeout 280 $T/gpu_gather_qmm-* --test-threads=2 &
  t wgmma env NUVEC_QMM_WGMMA=1 timeout 280 $T/gpu_qmm_wgmma-* --test-threads=2 &
  t wgmma_inflight env NUVEC_QMM_WGMMA=1 NUVEC_KERNEL_DEFINES="NVQW_INFLIGHT=1" timeout 280 \
    $T/gpu_qmm_wgmma-* --test-threads=2 &
  t seed timeout 280 $T/fast_ops-* --test-threads=2 &
  t quant_mma env NUVEC_QMV_MMA=1 timeout 280 $T/gpu_quantized-* --test-threads=4 &
  t gather_mma env NUVEC_QMV_MMA=1 timeout 280 $T/gpu_gather_qmm-* --test-threads=2 &
  t flash_poly env NUVEC_KERNEL_DEFINES="NV_FLASH_POLY=4" timeout 280 $T/gpu_flash-* \
    --test-threads=2 &
  t flash_persistent env NUVEC_FLASH_PERSISTENT=1 timeout 280 $T/gpu_flash-* --test-threads=2 &
  t rows timeout 280 $T/gpu_rows-* --test-threads=2 &
  t rows_one env NUVEC_KERNEL_DEFINES="NV_SOFTMAX_ONE_EXCHANGE=1" \
    timeout 280 $T/gpu_rows-* --test-threads=2 softmax &
  wait
  for f in quant flash gather wgmma wgmma_inflight seed quant_mma gather_mma flash_poly \
    flash_persistent rows rows_one; do
    echo "== $f"; grep -E "^test result|FAILED|panicked|rc=" "$OUT/$f.log" | head -12
  done
  exit 0
fi
if [ "$part" = 2 ]; then
Q="qmm_512x14336x4096 qmm_4096x14336x4096"
echo "== qmm dequantized for cuBLAS (default)"; timeout 60 $B --device gpu --budget 1 \
  --json $OUT/q_dequant.json $Q 2>&1 | tail -2
echo "== qmm tiled"; NUVEC_QMM_DEQUANT=0 timeout 60 $B --device gpu --budget 1 \
  --json $OUT/q_tiled.json $Q 2>&1 | tail -2
echo "== qmm wgmma"; NUVEC_QMM_WGMMA=1 timeout 60 $B --device gpu --budget 1 $Q 2>&1 | tail -2
echo "== qmm wgmma in flight"; NUVEC_QMM_WGMMA=1 NUVEC_KERNEL_DEFINES="NVQW_INFLIGHT=1" \
  timeout 60 $B --device gpu --budget 1 $Q 2>&1 | tail -2
echo "== torch"; timeout 90 python3 bench/peers/torch_bench.py --json $OUT/torch.json $Q 2>&1 | tail -2
echo "== moe"; timeout 60 $B --device gpu --budget 1 --json $OUT/moe.json qmv_14336x4096 moe_qmv_1 \
  moe_qmv_64 moe_mm_64 2>&1 | tail -4
# The matrix-vector kernels' register bound: at the default the 1-row kernel takes 176 registers
# (two blocks a multiprocessor); at least 4 and 8 blocks bound it to 123 and 64, with no spill
# (ptxas). The gathered kernel (4 rows) takes 99 unbounded and 64 at 8 blocks, no spill.
for mb in 4 8; do echo "== qmv, at least $mb blocks an SM"; NUVEC_KERNEL_DEFINES="NVQ_QMV_MINB=$mb" \
  timeout 40 $B --device gpu --budget 1 qmv_14336x4096 2>&1 | tail -1; done
# The tensor-core matrix-vector kernel (about half the instructions a weight): its shapes
# (tiles of 16 rows a warp, slices of k a block), its unrolling and its register bound.
for sh in 2,4 1,4 2,2 2,8; do echo "== qmv mma, shape $sh"; NUVEC_QMV_MMA=1 NUVEC_QMV_MMA_SHAPE=$sh \
  timeout 40 $B --device gpu --budget 1 qmv_14336x4096 2>&1 | tail -1; done
for d in NVQM_UNROLL=1 NVQM_UNROLL=4 NVQM_MINB=3; do echo "== qmv mma, $d"; NUVEC_QMV_MMA=1 \
  NUVEC_KERNEL_DEFINES="$d" timeout 40 $B --device gpu --budget 1 qmv_14336x4096 2>&1 | tail -1; done
echo "== moe, at least 8 blocks an SM"; NUVEC_KERNEL_DEFINES="NVQG_MINB=8" \
  timeout 40 $B --device gpu --budget 1 moe_qmv_1 moe_qmv_64 2>&1 | tail -2
for sh in 2,4 1,4 2,2; do echo "== moe, tensor-core form, shape $sh"; NUVEC_QMV_MMA=1 \
  NUVEC_QMV_MMA_SHAPE=$sh timeout 40 $B --device gpu --budget 1 moe_qmv_1 moe_qmv_64 2>&1 | tail -2; done
exit 0
fi
if [ "$part" = 4 ]; then
S="sdpa_causal_4k sdpa_full_4k sdpa_causal_8k_d64 sdpa_causal_16k"
echo "== sdpa"; timeout 120 $B --device gpu --budget 0.5 --json $OUT/sdpa.json $S 2>&1 | tail -4
for p in 4 2 8; do echo "== sdpa, every ${p}th tile's exponentials by the polynomial"
  NUVEC_KERNEL_DEFINES="NV_FLASH_POLY=$p" timeout 90 $B --device gpu --budget 0.5 \
    sdpa_causal_8k_d64 sdpa_causal_4k 2>&1 | tail -2; done
echo "== sdpa, persistent blocks"; NUVEC_FLASH_PERSISTENT=1 timeout 120 $B --device gpu \
  --budget 0.5 $S 2>&1 | tail -4
echo "== sdpa again (the spread between runs)"; timeout 120 $B --device gpu --budget 0.5 $S 2>&1 | tail -4
echo "== torch"; timeout 150 python3 bench/peers/torch_bench.py --json $OUT/torch_sdpa.json $S 2>&1 | tail -4
# decode_b1_8k (2,201 GB/s: 15 us for 33.5 MB): the kernels' own time against the op's, to
# tell the device's work (two kernels and the gap between them) from the host's.
echo "== decode_b1_8k: the op, then its kernels under ncu"
timeout 60 $B --device gpu --budget 0.5 decode_b1_8k launch_floor 2>&1 | tail -2
timeout 120 ncu --metrics gpu__time_duration.sum -k regex:attention -c 6 $B --device gpu \
  --budget 0.01 decode_b1_8k 2>&1 | grep -E "attention|gpu__time_duration" | tail -6
exit 0
fi
# Part 3: ncu on the gathered kernels (both forms), the rows against Liger.
N="Duration|Memory Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Stall"
echo "== ncu moe (full sections in \$OUT/ncu_gqmv.txt)"
timeout 120 ncu --set full -k regex:gqmv_bf16 -c 1 $B --device gpu --budget 0.01 moe_qmv_64 \
  > $OUT/ncu_gqmv.txt 2>&1
grep -E "$N" $OUT/ncu_gqmv.txt | head -16
echo "== ncu moe, tensor-core form (\$OUT/ncu_gqmv_mma.txt)"
NUVEC_QMV_MMA=1 timeout 120 ncu --set full -k regex:gqmv_mma -c 1 $B --device gpu --budget 0.01 \
  moe_qmv_64 > $OUT/ncu_gqmv_mma.txt 2>&1
grep -E "$N" $OUT/ncu_gqmv_mma.txt | head -16
R="rms_norm add_rms_norm layer_norm rms_norm_vjp softmax logsumexp cross_entropy rope"
echo "== rows"; timeout 60 $B --device gpu --budget 0.5 --json $OUT/rows.json copy $R 2>&1 | tail -9
echo "== logsumexp in block rows"; NUVEC_LSE_WARP=0 timeout 30 $B --device gpu --budget 0.5 \
  logsumexp 2>&1 | tail -1
for d in NV_LSE_BATCH=16 "NV_LSE_BATCH=64 NV_LSE_WARP_MINB=3"; do echo "== logsumexp warp rows, $d"; \
  NUVEC_KERNEL_DEFINES="$d" timeout 30 $B --device gpu --budget 0.5 logsumexp 2>&1 | tail -1; done
# Softmax (and log-sum-exp in block rows) with one exchange of (maximum, sum) pairs a row.
echo "== softmax, one exchange"; NUVEC_KERNEL_DEFINES="NV_SOFTMAX_ONE_EXCHANGE=1" timeout 30 \
  $B --device gpu --budget 0.5 softmax 2>&1 | tail -1
echo "== logsumexp in block rows, one exchange"; NUVEC_LSE_WARP=0 \
  NUVEC_KERNEL_DEFINES="NV_SOFTMAX_ONE_EXCHANGE=1" timeout 30 $B --device gpu --budget 0.5 \
  logsumexp 2>&1 | tail -1
echo "== liger"; timeout 120 python3 bench/peers/liger_bench.py --json $OUT/liger.json $R 2>&1 | tail -8
exit 0

"""The timing harness shared by the peers' scripts: the same case names, shapes, figures,
command line and JSON objects as nuvec-bench, so that bench/compare.py can set them side by side.

A case's setup makes (and evaluates) its inputs and returns `run`, a function that computes the
case once and returns when the result exists; it raises Unavailable when the library cannot run
the case. The work of one run (bytes that must move, FLOPs, or operations) is fixed in SPECS.
"""

import argparse
import json
import math
import statistics
import sys
import time

# Warm-ups stop early, and timed runs stop at the budget, for very slow cases
# (a reference-BLAS matmul takes seconds): at least one of each always runs. Warm-ups of
# fast cases go on until they add up to WARMUP_S, for an idle GPU to reach its clocks.
SLOW_WARMUP_S = 2.0
WARMUP_S = 0.025
CASE_BUDGET_S = 10.0


class Unavailable(Exception):
    """The library cannot run this case; the message says why."""


ROWS, COLS = 1024, 4096
N = ROWS * COLS
F32 = 4
ROPE = (1, 8, 512, 128)
ROPE_N = 8 * 512 * 128
ROPE_LARGE = (1, 32, 1024, 128)  # the [1024, 4096] activations as 32 heads of 128
ROPE_LARGE_N = 32 * 1024 * 128
DECODE_Q = (1, 32, 1, 128)
DECODE_KV = (1, 8, 4096, 128)
CHAIN = 1000
QMM_DECODE_BYTES = 4096 * 4096 // 2 + 2 * 4096 * 64 * F32 + 2 * 4096 * F32

# The CPU table of BENCH-CASES.md, as nuvec-bench has it (crates/nuvec-bench/src/cases/):
# name, shape text, dtype, unit, work of one run, timed runs, warm-up runs.
SPECS = [
    ("matmul_2048", "[2048, 2048] x [2048, 2048]", "f32", "GFLOP/s", 2 * 2048**3, 5, 1),
    ("matmul_2048_bf16", "[2048, 2048] x [2048, 2048]", "bf16", "GFLOP/s", 2 * 2048**3, 5, 1),
    ("matmul_2048_f16", "[2048, 2048] x [2048, 2048]", "f16", "GFLOP/s", 2 * 2048**3, 5, 1),
    ("add", "[1024, 4096]", "f32", "GB/s", 3 * N * F32, 30, 2),
    ("exp", "[1024, 4096]", "f32", "GB/s", 2 * N * F32, 30, 2),
    # a one-byte condition and two f32 inputs read, one f32 output written
    ("where", "[1024, 4096]", "f32", "GB/s", N + 3 * N * F32, 30, 2),
    ("sum_rows", "[1024, 4096]", "f32", "GB/s", (N + ROWS) * F32, 30, 2),
    ("transpose_copy", "[1024, 4096]", "f32", "GB/s", 2 * N * F32, 30, 2),
    ("rms_norm", "[1024, 4096]", "f32", "GB/s", (2 * N + COLS) * F32, 20, 2),
    ("layer_norm", "[1024, 4096]", "f32", "GB/s", (2 * N + 2 * COLS) * F32, 20, 2),
    ("softmax", "[1024, 4096]", "f32", "GB/s", 2 * N * F32, 20, 2),
    ("logsumexp", "[1024, 4096]", "f32", "GB/s", (N + ROWS) * F32, 20, 2),
    ("rope", "[1, 8, 512, 128]", "f32", "GB/s", 2 * ROPE_N * F32, 30, 2),
    ("rope_large", "[1, 32, 1024, 128]", "f32", "GB/s", 2 * ROPE_LARGE_N * F32, 20, 2),
    ("decode_4k", "q [1, 32, 1, 128], k/v [1, 8, 4096, 128]", "f32", "GB/s",
     (2 * 32 * 128 + 2 * 8 * 4096 * 128) * F32, 30, 2),
    ("decode_4k_bf16", "q [1, 32, 1, 128], k/v [1, 8, 4096, 128]", "bf16", "GB/s",
     (2 * 32 * 128 + 2 * 8 * 4096 * 128) * 2, 30, 2),
    # the packed 4-bit weight, its f32 scales and biases (groups of 64), x and the output
    ("qmm_decode", "[1, 4096] x [4096, 4096]ᵀ 4-bit g64", "f32", "GB/s", QMM_DECODE_BYTES, 50, 2),
    ("qmm_prefill", "[512, 4096] x [4096, 4096]ᵀ 4-bit g64", "f32", "GFLOP/s",
     2 * 512 * 4096 * 4096, 5, 2),
    ("tiny_op_chain", "1000 x ([1] + [1])", "f32", "us/op", CHAIN, 50, 5),
    ("tiny_scalar_chain", "1000 x ([1] + 1.0)", "f32", "us/op", CHAIN, 50, 5),
    # Ratios: the work is the reference time, which the setup measures (see `measure`).
    ("vjp_chain", "[64], 1000 ops: vjp / forward (graphs built)", "f32", "ratio", None, 30, 3),
    ("vmap_mlp", "64 x (256 -> 512 -> 10, tanh): vmap / by hand", "f32", "ratio", None, 30, 3),
    # one training step (forward, backward, AdamW) of nuvec-nn's `train` example, its model and
    # default batch (crates/nuvec-bench/src/cases/train.rs); the work is the input tokens
    ("train_step", "2 x 128 Qwen3-style, B128 L11, AdamW", "f32", "tokens/s", 128 * 11, 30, 3),
]


# The GPU table of BENCH-CASES.md (bf16 unless noted), as nuvec-bench has it
# (crates/nuvec-bench/src/cases/gpu.rs); the same fields as SPECS.
GN = 16384 * 4096  # the [16384, 4096] cases
BF16 = 2


def _sdpa_flops(b, h, l, d, causal):
    full = 4 * b * h * l * l * d  # q kᵀ and p v
    return full // 2 if causal else full


def _kv_bytes(b, l):
    return 2 * b * 8 * l * 128 * BF16


def _q4_bytes(n, k):
    """A 4-bit [n, k] weight in groups of 64: its packed words and bf16 scales and biases."""
    return n * k // 2 + 2 * n * (k // 64) * BF16


def moe_experts(tokens):
    """The experts token t picks for the moe_qmv cases (crates/nuvec-bench/src/cases/gpu/
    quantized.rs): 8 distinct a token, every one of the 128 among 16 tokens or more."""
    return [[(37 * t + 16 * j) % 128 for j in range(8)] for t in range(tokens)]


GPU_SPECS = [
    ("copy", "[2^30] device to device", "bf16", "GB/s", 2 * 2**30 * BF16, 50, 3),
    # the ceiling at the decoding cases' sizes (qmv_14336x4096 and decode_b1_8k, moe_qmv_1)
    ("copy_32mib", "[2^23] device to device (32 MiB moved)", "bf16", "GB/s",
     2 * 2**23 * BF16, 200, 5),
    ("copy_8mib", "[2^21] device to device (8 MiB moved)", "bf16", "GB/s",
     2 * 2**21 * BF16, 200, 5),
    ("add", "[2^28] + [2^28]", "bf16", "GB/s", 3 * 2**28 * BF16, 50, 3),
    ("cast_f32_bf16", "[2^28] f32 to bf16", "f32", "GB/s", 2**28 * (4 + BF16), 50, 3),
    ("cast_bf16_f32", "[2^28] bf16 to f32", "bf16", "GB/s", 2**28 * (4 + BF16), 50, 3),
    ("sum_rows", "[16384, 4096] last axis", "bf16", "GB/s", (GN + 16384) * BF16, 50, 3),
    ("sum_rows_f32", "[16384, 4096] last axis", "f32", "GB/s", (GN + 16384) * F32, 50, 3),
    ("matmul_8192", "[8192, 8192] x [8192, 8192]", "bf16", "TFLOP/s", 2 * 8192**3, 30, 3),
    ("gemv_4096_14336", "[1, 4096] x [4096, 14336]", "bf16", "GB/s",
     (4096 + 4096 * 14336 + 14336) * BF16, 100, 3),
    ("linear_m16", "[16, 4096] x [4096, 14336]", "bf16", "TFLOP/s", 2 * 16 * 4096 * 14336, 100, 3),
    ("linear_m64", "[64, 4096] x [4096, 14336]", "bf16", "TFLOP/s", 2 * 64 * 4096 * 14336, 100, 3),
    ("linear_m256", "[256, 4096] x [4096, 14336]", "bf16", "TFLOP/s",
     2 * 256 * 4096 * 14336, 100, 3),
    # 4-bit weights in groups of 64 with bf16 scales and biases; the work of the decoding cases
    # is the packed words, scales and biases read (for every runner, whatever it reads: a
    # time-based figure, comparable across runners)
    ("qmv_14336x4096", "[1, 4096] x [14336, 4096]ᵀ 4-bit g64", "bf16", "GB/s",
     _q4_bytes(14336, 4096), 100, 5),
    ("qmm_512x14336x4096", "[512, 4096] x [14336, 4096]ᵀ 4-bit g64", "bf16", "TFLOP/s",
     2 * 512 * 14336 * 4096, 50, 3),
    ("qmm_1024x14336x4096", "[1024, 4096] x [14336, 4096]ᵀ 4-bit g64", "bf16", "TFLOP/s",
     2 * 1024 * 14336 * 4096, 40, 3),
    ("qmm_4096x14336x4096", "[4096, 4096] x [14336, 4096]ᵀ 4-bit g64", "bf16", "TFLOP/s",
     2 * 4096 * 14336 * 4096, 30, 3),
    # the distinct experts picked: 8 for one token, all 128 for 64 (see `moe_experts`)
    ("moe_qmv_1", "1 token, 8 of 128 experts [768, 2048] 4-bit g64", "bf16", "GB/s",
     8 * _q4_bytes(768, 2048), 100, 5),
    ("moe_qmv_64", "64 tokens, 8 of 128 experts [768, 2048] 4-bit g64", "bf16", "GB/s",
     128 * _q4_bytes(768, 2048), 100, 5),
    ("moe_mm_64", "64 tokens, 8 of 128 bf16 experts [768, 2048]", "bf16", "GB/s",
     128 * 768 * 2048 * BF16, 50, 5),
    ("rms_norm", "[16384, 4096], weight [4096]", "bf16", "GB/s", (2 * GN + 4096) * BF16, 50, 3),
    # x and the residual read, h and y written
    ("add_rms_norm", "[16384, 4096] x 2, weight", "bf16", "GB/s", (4 * GN + 4096) * BF16, 50, 3),
    ("layer_norm", "[16384, 4096], weight, bias", "bf16", "GB/s",
     (2 * GN + 2 * 4096) * BF16, 50, 3),
    # x and g read, dx written; w read, dw written
    ("rms_norm_vjp", "[16384, 4096]: x, w, g in; dx, dw out", "bf16", "GB/s",
     (3 * GN + 2 * 4096) * BF16, 50, 3),
    ("softmax", "[16384, 4096] last axis", "bf16", "GB/s", 2 * GN * BF16, 50, 3),
    ("logsumexp", "[16384, 4096] last axis", "bf16", "GB/s", (GN + 16384) * BF16, 50, 3),
    # logits read, int32 targets read, f32 losses written
    ("cross_entropy", "logits [4096, 151936], int targets", "bf16", "GB/s",
     4096 * 151936 * BF16 + 4096 * 4 + 4096 * 4, 50, 3),
    ("rope", "[4, 32, 2048, 128] transposed view", "bf16", "GB/s",
     2 * 4 * 32 * 2048 * 128 * BF16, 50, 3),
    ("norm_rope_cache", "[1, 8, 1, 128] into [1, 8, 4096, 128]", "bf16", "us", 1, 200, 5),
    # decode-sized calls against one elementwise kernel on one element (the launch floor)
    ("rms_norm_decode", "[1, 4096], weight [4096]", "bf16", "us", 1, 500, 20),
    ("rope_decode", "[1, 32, 1, 128] at position 2000", "bf16", "us", 1, 500, 20),
    ("launch_floor", "[1] + [1]", "f32", "us", 1, 500, 20),
    ("sdpa_causal_4k", "B4 H32 L4096 D128 causal", "bf16", "TFLOP/s",
     _sdpa_flops(4, 32, 4096, 128, True), 30, 3),
    ("sdpa_full_4k", "B4 H32 L4096 D128", "bf16", "TFLOP/s",
     _sdpa_flops(4, 32, 4096, 128, False), 30, 3),
    ("sdpa_causal_8k_d64", "B2 H16 L8192 D64 causal", "bf16", "TFLOP/s",
     _sdpa_flops(2, 16, 8192, 64, True), 30, 3),
    ("sdpa_causal_16k", "B1 H32 L16384 D128 causal", "bf16", "TFLOP/s",
     _sdpa_flops(1, 32, 16384, 128, True), 30, 3),
    ("decode_d512_b8_4k", "q [8, 16, 1, 512], k/v [8, 2, 4096, 512]", "bf16", "GB/s",
     2 * 8 * 2 * 4096 * 512 * BF16, 100, 5),
    ("decode_b1_8k", "q [1, 32, 1, 128], k/v [1, 8, 8192, 128]", "bf16", "GB/s",
     _kv_bytes(1, 8192), 100, 5),
    ("decode_b8_8k", "q [8, 32, 1, 128], k/v [8, 8, 8192, 128]", "bf16", "GB/s",
     _kv_bytes(8, 8192), 100, 5),
    ("decode_b64_4k", "q [64, 32, 1, 128], k/v [64, 8, 4096, 128]", "bf16", "GB/s",
     _kv_bytes(64, 4096), 100, 5),
    ("decode_b1_128k", "q [1, 32, 1, 128], k/v [1, 8, 131072, 128]", "bf16", "GB/s",
     _kv_bytes(1, 131072), 100, 5),
    ("paged_decode_b1_8k", "decode_b1_8k, blocks of 16", "bf16", "GB/s", _kv_bytes(1, 8192), 100, 5),
    ("paged_decode_b8_8k", "decode_b8_8k, blocks of 16", "bf16", "GB/s", _kv_bytes(8, 8192), 100, 5),
    ("paged_decode_b64_4k", "decode_b64_4k, blocks of 16", "bf16", "GB/s",
     _kv_bytes(64, 4096), 100, 5),
    # the f32 state [64, 32, 128, 128] read and written
    ("gated_delta_decode", "B64 T1 Hk16 Hv32 D128, f32 state", "bf16", "GB/s",
     2 * 64 * 32 * 128 * 128 * 4, 100, 5),
    ("gated_delta_prefill", "B1 T4096 Hk16 Hv32 D128", "bf16", "tokens/s", 4096, 20, 3),
    ("gated_delta_prefill_16k", "B1 T16384 Hk16 Hv32 D128", "bf16", "tokens/s", 16384, 20, 3),
    ("tiny_op_chain", "1000 x ([1] + [1])", "f32", "us/op", CHAIN, 50, 5),
    # one training step (forward, backward, AdamW) of nuvec-nn's `train` example, its model and
    # default batch (crates/nuvec-bench/src/cases/train.rs); the work is the input tokens
    ("train_step", "2 x 128 Qwen3-style, B128 L11, AdamW", "f32", "tokens/s", 128 * 11, 30, 3),
]

class Case:
    """One named case: its shapes, unit and work as in BENCH-CASES.md, and its setup."""

    def __init__(self, name, shape, dtype, unit, work, runs, warmup, setup):
        self.name, self.shape, self.dtype, self.unit = name, shape, dtype, unit
        self.work, self.runs, self.warmup, self.setup = work, runs, warmup, setup


def cases(setups, missing, specs=None):
    """The cases of `specs` (SPECS unless given) with the runner's setups (name -> function returning `run`); a name
    without one raises Unavailable(missing(name))."""
    def unavailable(name):
        def setup():
            raise Unavailable(missing(name))
        return setup
    return [Case(*spec, setups.get(spec[0]) or unavailable(spec[0]))
            for spec in (SPECS if specs is None else specs)]


def figure(unit, work, seconds):
    """The case's figure for `work` done in `seconds` (as nuvec-bench's Unit::figure)."""
    if unit in ("GB/s", "GFLOP/s"):
        return work / seconds / 1e9
    if unit == "TFLOP/s":
        return work / seconds / 1e12
    if unit in ("us/op", "us"):
        return seconds / work * 1e6
    if unit == "tokens/s":
        return work / seconds
    return seconds / work


class WallClock:
    """The CPU's timer: `run` returns when the result exists, so a wall clock is right."""

    def start(self):
        self.t0 = time.perf_counter()

    def stop(self):
        return time.perf_counter() - self.t0


def median_time(f, runs=31):
    """The median wall time of `runs` calls of `f`, after three untimed ones: the reference
    time of a ratio case (nuvec-bench times its references the same way)."""
    for _ in range(3):
        f()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# On a GPU, a timed sample of a run shorter than BATCH_S holds as many runs queued back to
# back as fill it (at most MAX_BATCH) and counts their mean, as nuvec-bench does: one short
# run alone would time the host's launch latency more than the device's work.
BATCH_S = 5e-4
MAX_BATCH = 32


def batch_size(single_s, limit):
    """Runs per timed sample of a run that took `single_s` alone (at most `limit`)."""
    if not single_s or single_s <= 0:
        return max(limit, 1)
    return max(1, min(limit, math.ceil(BATCH_S / single_s)))


def measure(case, repeat, clock, batch=1):
    """Warm-up, then timed samples of up to `batch` runs each; returns (median seconds of one
    run, figure, samples, runs per sample, the fastest sample's seconds per run). A setup may
    return `(run, work)` to give the work itself (a ratio case's reference time)."""
    work, run = case.work, case.setup()
    if isinstance(run, tuple):
        run, work = run
    # The fastest warm-up run sizes the batches: the first run also compiles and loads kernels,
    # and an idle GPU's clocks take a while to rise, so warm-up goes on for WARMUP_S at least
    # after the first run, and the first ends it by being slow only for a single warm-up.
    warmup = max(case.warmup, 1)
    fastest, spent, done = math.inf, 0.0, 0
    while True:
        clock.start()
        run()
        single = clock.stop()
        fastest, done = min(fastest, single), done + 1
        if done > 1:
            spent += single
        slow = single > SLOW_WARMUP_S and (done > 1 or warmup == 1)
        if slow or (done >= warmup and (warmup == 1 or spent >= WARMUP_S)):
            break
    batch = batch_size(fastest, batch)
    times = []
    for _ in range(repeat or case.runs):
        clock.start()
        outs = [run() for _ in range(batch)]
        times.append(clock.stop() / batch)
        del outs  # freeing the results is left out of the timing, as in nuvec-bench
        if sum(times) * batch > CASE_BUDGET_S:
            break
    median = statistics.median(times)
    return median, figure(case.unit, work, median), len(times), batch, min(times)


def fmt_figure(x):
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_time(s):
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def main(runner, cases, info, device="cpu", clock=None, argv=None):
    """The command line: [--device DEVICE] [--json FILE] [--repeat N] [--list] [CASE...].

    `info` (a short text: library version, BLAS kernel and threads) goes into every JSON
    object and the table's heading. `clock` times one run (a WallClock unless given; the GPU
    scripts pass one that records CUDA events).
    """
    clock = clock or WallClock()
    p = argparse.ArgumentParser(description=f"{runner}: the {device.upper()} cases of BENCH-CASES.md")
    p.add_argument("--device", choices=[device], default=device)
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--repeat", type=int, metavar="N")
    p.add_argument("--list", action="store_true")
    p.add_argument("cases", nargs="*", metavar="CASE")
    args = p.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        p.error("--repeat must be at least 1")
    if args.list:
        for c in cases:
            print(f"{c.name:<20} {c.dtype:<6} {c.unit:<8} {c.shape}")
        return 0
    names = [c.name for c in cases]
    unknown = [n for n in args.cases if n not in names]
    if unknown:
        print(f"{runner}: no case named {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2
    print(f"# {runner}: {info}")
    print(f"{'case':<20} {'dtype':<6} {'median':>12} {'figure':>10}  {'unit':<8} status")
    results = []
    for c in cases:
        if args.cases and c.name not in args.cases:
            continue
        obj = {"name": c.name, "device": device, "shape": c.shape, "dtype": c.dtype,
               "median_s": None, "figure": None, "unit": c.unit, "runner": runner,
               "runs": 0, "batch": 0, "min_s": None, "status": "ok", "info": info}
        try:
            batch = MAX_BATCH if device == "gpu" else 1
            (obj["median_s"], obj["figure"], obj["runs"], obj["batch"],
             obj["min_s"]) = measure(c, args.repeat, clock, batch)
        except Unavailable as e:
            obj["status"] = f"unavailable: {e}"
        except Exception as e:  # a peer's failure is reported, not fatal to the others
            obj["status"] = f"error: {type(e).__name__}: {e}"
        med = fmt_time(obj["median_s"]) if obj["median_s"] is not None else "-"
        fig = fmt_figure(obj["figure"]) if obj["figure"] is not None else "-"
        print(f"{c.name:<20} {c.dtype:<6} {med:>12} {fig:>10}  {c.unit:<8} {obj['status']}",
              flush=True)
        results.append(obj)
        if args.json:  # after every case, so that a run stopped by a time limit keeps them
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
                f.write("\n")
    return 0

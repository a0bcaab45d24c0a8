"""The timing harness shared by the peers' scripts: the same case names, shapes, figures,
command line and JSON objects as nuvec-bench, so that bench/compare.py can set them side by side.

A case's setup makes (and evaluates) its inputs and returns `run`, a function that computes the
case once and returns when the result exists; it raises Unavailable when the library cannot run
the case. The work of one run (bytes that must move, FLOPs, or operations) is fixed in SPECS.
"""

import argparse
import json
import statistics
import sys
import time

# Warm-ups stop early, and timed runs stop at the budget, for very slow cases
# (a reference-BLAS matmul takes seconds): at least one of each always runs.
SLOW_WARMUP_S = 2.0
CASE_BUDGET_S = 10.0


class Unavailable(Exception):
    """The library cannot run this case; the message says why."""


ROWS, COLS = 1024, 4096
N = ROWS * COLS
F32 = 4
ROPE = (1, 8, 512, 128)
ROPE_N = 8 * 512 * 128
DECODE_Q = (1, 32, 1, 128)
DECODE_KV = (1, 8, 4096, 128)
CHAIN = 1000

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
    ("decode_4k", "q [1, 32, 1, 128], k/v [1, 8, 4096, 128]", "f32", "GB/s",
     (2 * 32 * 128 + 2 * 8 * 4096 * 128) * F32, 30, 2),
    ("tiny_op_chain", "1000 x ([1] + [1])", "f32", "us/op", CHAIN, 50, 5),
    ("vjp_chain", "defined by the transforms issue", "f32", "ratio", 1, 10, 2),
    ("vmap_mlp", "defined by the transforms issue", "f32", "ratio", 1, 10, 2),
]


class Case:
    """One named case: its shapes, unit and work as in BENCH-CASES.md, and its setup."""

    def __init__(self, name, shape, dtype, unit, work, runs, warmup, setup):
        self.name, self.shape, self.dtype, self.unit = name, shape, dtype, unit
        self.work, self.runs, self.warmup, self.setup = work, runs, warmup, setup


def cases(setups, missing):
    """The cases of SPECS with the runner's setups (name -> function returning `run`); a name
    without one raises Unavailable(missing(name))."""
    def unavailable(name):
        def setup():
            raise Unavailable(missing(name))
        return setup
    return [Case(*spec, setups.get(spec[0]) or unavailable(spec[0])) for spec in SPECS]


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


def measure(case, repeat):
    """Warm-up, then timed runs; returns (median seconds, figure, runs)."""
    work, run = case.work, case.setup()
    for _ in range(max(case.warmup, 1)):
        t0 = time.perf_counter()
        run()
        if time.perf_counter() - t0 > SLOW_WARMUP_S:
            break
    times = []
    for _ in range(repeat or case.runs):
        t0 = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - t0)
        del out  # freeing the result is left out of the timing, as in nuvec-bench
        if sum(times) > CASE_BUDGET_S:
            break
    median = statistics.median(times)
    return median, figure(case.unit, work, median), len(times)


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


def main(runner, cases, info):
    """The command line: [--device cpu] [--json FILE] [--repeat N] [--list] [CASE...].

    `info` (a short text: library version, BLAS kernel and threads) goes into every JSON
    object and the table's heading.
    """
    p = argparse.ArgumentParser(description=f"{runner}: the CPU cases of BENCH-CASES.md")
    p.add_argument("--device", choices=["cpu"], default="cpu")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--repeat", type=int, metavar="N")
    p.add_argument("--list", action="store_true")
    p.add_argument("cases", nargs="*", metavar="CASE")
    args = p.parse_args()
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
    print(f"{'case':<18} {'dtype':<6} {'median':>12} {'figure':>10}  {'unit':<8} status")
    results = []
    for c in cases:
        if args.cases and c.name not in args.cases:
            continue
        obj = {"name": c.name, "device": "cpu", "shape": c.shape, "dtype": c.dtype,
               "median_s": None, "figure": None, "unit": c.unit, "runner": runner,
               "runs": 0, "status": "ok", "info": info}
        try:
            obj["median_s"], obj["figure"], obj["runs"] = measure(c, args.repeat)
        except Unavailable as e:
            obj["status"] = f"unavailable: {e}"
        except Exception as e:  # a peer's failure is reported, not fatal to the others
            obj["status"] = f"error: {type(e).__name__}: {e}"
        med = fmt_time(obj["median_s"]) if obj["median_s"] is not None else "-"
        fig = fmt_figure(obj["figure"]) if obj["figure"] is not None else "-"
        print(f"{c.name:<18} {c.dtype:<6} {med:>12} {fig:>10}  {c.unit:<8} {obj['status']}",
              flush=True)
        results.append(obj)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
    return 0

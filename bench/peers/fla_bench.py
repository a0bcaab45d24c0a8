"""The gated delta rule cases of BENCH-CASES.md in flash-linear-attention (`fla-core`: Triton
kernels, pure Python): `gated_delta_decode` through `fused_recurrent_gated_delta_rule` (one
step of 64 sequences), `gated_delta_prefill` and `gated_delta_prefill_16k` through
`chunk_gated_delta_rule` (4,096 and 16,384 steps of one), on the shapes nuvec-bench uses: q
and k `[B, T, 16, 128]`, v `[B, T, 32, 128]` in bf16, the gates and the state in f32, the
state `[B, Hv, Dk, Dv]` as fla lays it out, `scale=1.0` (nuvec's rule does not scale the
queries). The other cases report "unavailable". See harness.py for the command line and JSON.

    python3 bench/peers/fla_bench.py [--json FILE] [--repeat N] [CASE...]

fla is not on the device machine's image: it travels as a wheel (the device README), e.g.
`pip download --no-deps fla-core` into `.whl/`, installed with `--target` before the run.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from torch_bench import BF, DEV, CudaClock, rand  # noqa: E402

from fla.ops.gated_delta_rule import (  # noqa: E402
    chunk_gated_delta_rule,
    fused_recurrent_gated_delta_rule,
)

HK, HV, D = 16, 32, 128


def inputs(b, t):
    q = rand(b, t, HK, D, seed=1) * 0.1
    k = torch.nn.functional.normalize(rand(b, t, HK, D, seed=2).float(), dim=-1).to(BF)
    v = rand(b, t, HV, D, seed=3)
    # fla takes the gate's logarithm; nuvec's g = exp(this) lies in (0.37, 1).
    g = -torch.rand(b, t, HV, device=DEV, dtype=torch.float32)
    beta = torch.rand(b, t, HV, device=DEV, dtype=torch.float32).to(BF)
    state = torch.zeros(b, HV, D, D, device=DEV, dtype=torch.float32)
    return q, k, v, g, beta, state


def decode():
    q, k, v, g, beta, state = inputs(64, 1)
    return lambda: fused_recurrent_gated_delta_rule(
        q, k, v, g=g, beta=beta, scale=1.0, initial_state=state, output_final_state=True)


def prefill(t):
    q, k, v, g, beta, state = inputs(1, t)
    return lambda: chunk_gated_delta_rule(
        q, k, v, g, beta, scale=1.0, initial_state=state, output_final_state=True)


SETUPS = {
    "gated_delta_decode": decode,
    "gated_delta_prefill": lambda: prefill(4096),
    "gated_delta_prefill_16k": lambda: prefill(16384),
}


if __name__ == "__main__":
    import fla
    info = f"fla-core {getattr(fla, '__version__', '?')}, torch {torch.__version__}, " \
        f"{torch.cuda.get_device_name()}"
    sys.exit(harness.main("fla", harness.cases(SETUPS, lambda name: "fla has no such kernel",
                                               harness.GPU_SPECS), info,
                          device="gpu", clock=CudaClock()))

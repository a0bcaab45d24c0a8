"""The fused-row GPU cases of BENCH-CASES.md in Liger (`liger-kernel`, Triton kernels), on the
same shapes and inputs as torch_bench.py; the cases Liger has no kernel for report
"unavailable". See harness.py for the command line and JSON.

    python3 bench/peers/liger_bench.py [--json FILE] [--repeat N] [CASE...]

Liger is not on the device machine's image: it travels as a wheel (the device README), e.g.
`pip download --no-deps liger-kernel` into `.whl/`, installed with `--target` before the run.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from torch_bench import BF, DEV, EPS, CudaClock, rand  # noqa: E402

from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction  # noqa: E402
from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction  # noqa: E402
from liger_kernel.ops.layer_norm import LigerLayerNormFunction  # noqa: E402
from liger_kernel.ops.rms_norm import LigerRMSNormFunction  # noqa: E402
from liger_kernel.ops.rope import LigerRopeFunction  # noqa: E402
from liger_kernel.ops.softmax import LigerSoftmaxFunction  # noqa: E402


def rms_norm():
    x, w = rand(16384, 4096), rand(4096, seed=1)
    return lambda: LigerRMSNormFunction.apply(x, w, EPS, 0.0, "llama", False)


def add_rms_norm():
    x, r, w = rand(16384, 4096), rand(16384, 4096, seed=1), rand(4096, seed=2)
    return lambda: LigerFusedAddRMSNormFunction.apply(x, r, w, EPS, 0.0, "llama", False)


def layer_norm():
    x, w, b = rand(16384, 4096), rand(4096, seed=1), rand(4096, seed=2)
    return lambda: LigerLayerNormFunction.apply(x, w, b, EPS)


def rms_norm_vjp():
    # Liger's backward kernel alone: its forward saved the statistics once, outside the timing.
    x = rand(16384, 4096).requires_grad_()
    w = rand(4096, seed=1).requires_grad_()
    g = rand(16384, 4096, seed=2)
    y = LigerRMSNormFunction.apply(x, w, EPS, 0.0, "llama", False)

    def run():
        return torch.autograd.grad(y, (x, w), g, retain_graph=True)
    return run


def softmax():
    x = rand(16384, 4096)
    return lambda: LigerSoftmaxFunction.apply(x)


def cross_entropy():
    logits = rand(4096, 151936)
    g = torch.Generator(device=DEV).manual_seed(3)
    t = torch.randint(0, 151936, (4096,), generator=g, device=DEV)
    # Without a gradient wanted Liger's forward is the loss alone (one pass over the logits).
    return lambda: LigerCrossEntropyFunction.apply(logits, t, None, -100, 0.0, 0.0, "none")


def rope():
    # Liger rotates q and k together, in place, so the case's tensor goes in as a contiguous
    # q (not the transposed view), with a one-head k beside it (1/32 more bytes than counted).
    x = rand(4, 2048, 32, 128).transpose(1, 2).contiguous()
    k = rand(4, 1, 2048, 128, seed=1)
    theta = 10000.0 ** (-torch.arange(64, device=DEV, dtype=torch.float32) * 2 / 128)
    ang = torch.arange(2048, device=DEV, dtype=torch.float32)[:, None] * theta
    ang = torch.cat([ang, ang], -1)[None]
    c, s = ang.cos().to(BF), ang.sin().to(BF)
    return lambda: LigerRopeFunction.apply(x, k, c, s)


SETUPS = {
    "rms_norm": rms_norm, "add_rms_norm": add_rms_norm, "layer_norm": layer_norm,
    "rms_norm_vjp": rms_norm_vjp, "softmax": softmax, "cross_entropy": cross_entropy,
    "rope": rope,
}


def missing(name):
    return "Liger has no kernel for this case"


if __name__ == "__main__":
    if not torch.cuda.is_available():
        print("liger_bench: no CUDA device", file=sys.stderr)
        sys.exit(1)
    from importlib.metadata import version
    info = f"liger-kernel {version('liger-kernel')}, torch {torch.__version__}"
    sys.exit(harness.main("liger", harness.cases(SETUPS, missing, harness.GPU_SPECS), info,
                          device="gpu", clock=CudaClock(), argv=sys.argv[1:]))

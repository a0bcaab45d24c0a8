"""The CPU cases of BENCH-CASES.md in MLX's CPU build (`pip install "mlx[cpu]"`); see
harness.py for the command line and JSON. Every timed run ends in `mx.eval`, so the time covers
building the graph and computing it, as in nuvec-bench.
"""

import glob
import os
import sys

import mlx.core as mx
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CHAIN, COLS, DECODE_KV, DECODE_Q, ROPE, ROWS  # noqa: E402

EPS = 1e-5
mx.set_default_device(mx.cpu)


def uniform(shape, seed, dtype=mx.float32):
    a = mx.array(np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)).astype(dtype)
    mx.eval(a)
    return a


def timed(f):
    """`f` followed by mx.eval of its result, which is returned."""
    def run():
        out = f()
        mx.eval(out)
        return out
    return run


def matmul(dtype):
    def setup():
        a, b = uniform((2048, 2048), 21, dtype), uniform((2048, 2048), 22, dtype)
        return timed(lambda: a @ b)
    return setup


def add():
    x, y = uniform((ROWS, COLS), 1), uniform((ROWS, COLS), 2)
    return timed(lambda: x + y)


def exp():
    x = uniform((ROWS, COLS), 3)
    return timed(lambda: mx.exp(x))


def where():
    x, y = uniform((ROWS, COLS), 4), uniform((ROWS, COLS), 5)
    c = uniform((ROWS, COLS), 6) > 0
    mx.eval(c)
    return timed(lambda: mx.where(c, x, y))


def sum_rows():
    x = uniform((ROWS, COLS), 11)
    return timed(lambda: mx.sum(x, axis=-1))


def transpose_copy():
    x = uniform((ROWS, COLS), 7)
    return timed(lambda: mx.contiguous(x.T))


def rms_norm():
    x, w = uniform((ROWS, COLS), 31), uniform((COLS,), 32)
    return timed(lambda: mx.fast.rms_norm(x, w, EPS))


def layer_norm():
    x, w, b = uniform((ROWS, COLS), 33), uniform((COLS,), 34), uniform((COLS,), 35)
    return timed(lambda: mx.fast.layer_norm(x, w, b, EPS))


def softmax():
    x = uniform((ROWS, COLS), 12)
    return timed(lambda: mx.softmax(x, axis=-1))


def logsumexp():
    x = uniform((ROWS, COLS), 13)
    return timed(lambda: mx.logsumexp(x, axis=-1))


def rope():
    x = uniform(ROPE, 36)
    return timed(lambda: mx.fast.rope(x, ROPE[-1], traditional=False, base=10000.0, scale=1.0,
                                      offset=0))


def decode_4k():
    q, k, v = uniform(DECODE_Q, 41), uniform(DECODE_KV, 42), uniform(DECODE_KV, 43)
    scale = 1 / DECODE_Q[-1] ** 0.5
    return timed(lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale))


def qmm(m):
    """x [m, 4096] against a 4-bit [4096, 4096] weight in groups of 64, as a linear layer."""
    def setup():
        wq, scales, biases = mx.quantize(uniform((4096, 4096), 61), group_size=64, bits=4)
        x = uniform((m, 4096), 62)
        mx.eval(wq, scales, biases)
        return timed(lambda: mx.quantized_matmul(x, wq, scales, biases, transpose=True,
                                                 group_size=64, bits=4))
    return setup


def tiny_op_chain():
    a, b = mx.ones((1,)), mx.ones((1,))
    mx.eval(a, b)

    def build():
        y = a
        for _ in range(CHAIN):
            y = y + b
        return y
    return timed(build)


def vjp_chain():
    """Building the graphs of vjp (traced forward and backward) over building the forward, on
    a chain of sin, times c, plus d, tanh; nothing is evaluated (as in nuvec-bench)."""
    x, c, d, ct = uniform((64,), 51), 1 + 0.1 * uniform((64,), 52), 0.1 * uniform((64,), 53), \
        uniform((64,), 54)
    mx.eval(c, d)
    steps = [mx.sin, lambda y: y * c, lambda y: y + d, mx.tanh]

    def chain(y):
        for i in range(CHAIN):
            y = steps[i % 4](y)
        return y

    def backward():
        mx.vjp(lambda xs: [chain(xs)], [x], [ct])  # dropped before the clock stops, as in nuvec

    # Both timings include freeing the graphs (the result of `chain` is dropped at once).
    forward = harness.median_time(lambda: chain(x), 51)
    return backward, forward


def vmap_mlp():
    """A 2-layer MLP for one example under mx.vmap over 64, over the MLP written for the batch,
    both evaluated."""
    x = uniform((64, 256), 61)
    w1, b1 = uniform((256, 512), 62) / 16, 0.1 * uniform((512,), 63)
    w2, b2 = uniform((512, 10), 64) / 22, 0.1 * uniform((10,), 65)
    mx.eval(w1, b1, w2, b2)

    def mlp(v):
        return mx.tanh(v @ w1 + b1) @ w2 + b2

    batched = mx.vmap(mlp)
    hand = harness.median_time(timed(lambda: mlp(x)))
    return timed(lambda: batched(x)), hand


def info():
    text = f"mlx {mx.__version__} (CPU)"
    pools = []
    try:
        import threadpoolctl
        pools = [p for p in threadpoolctl.threadpool_info() if p.get("user_api") == "blas"
                 and "mlx" in p.get("filepath", "")]
    except ImportError:
        pass
    for p in pools:
        text += (f"; BLAS {p.get('internal_api')} {p.get('version')}"
                 f" kernel {p.get('architecture')}, {p.get('num_threads')} threads")
    if not pools:
        # The Linux wheel bundles a reference BLAS that threadpoolctl does not see.
        libs = os.path.join(os.path.dirname(os.path.dirname(mx.__file__)), "mlx_cpu.libs")
        found = [os.path.basename(f) for f in glob.glob(os.path.join(libs, "libblas*"))]
        text += f"; BLAS {', '.join(found) or 'unknown'} (bundled, not an OpenBLAS threadpoolctl sees)"
    return text


SETUPS = {
    "matmul_2048": matmul(mx.float32), "matmul_2048_bf16": matmul(mx.bfloat16),
    "matmul_2048_f16": matmul(mx.float16),
    "add": add, "exp": exp, "where": where, "sum_rows": sum_rows,
    "transpose_copy": transpose_copy, "rms_norm": rms_norm, "layer_norm": layer_norm,
    "softmax": softmax, "logsumexp": logsumexp, "rope": rope, "decode_4k": decode_4k,
    "qmm_decode": qmm(1), "qmm_prefill": qmm(512), "tiny_op_chain": tiny_op_chain,
    "vjp_chain": vjp_chain, "vmap_mlp": vmap_mlp,
}

if __name__ == "__main__":
    sys.exit(harness.main("mlx", harness.cases(
        SETUPS, lambda n: "the case's definition (the transforms issue)"), info()))

"""The cases of BENCH-CASES.md in MLX: the CPU cases in its CPU build (`pip install
"mlx[cpu]"`), the GPU cases (`--device gpu`) in its CUDA build; see harness.py for the command
line and JSON. Every timed run ends in `mx.eval`, so the time covers building the graph and
computing it, as in nuvec-bench; on the GPU the clock also waits with `mx.synchronize` before
and after each run.

    python3 bench/peers/mlx_bench.py [--device cpu|gpu] [--json FILE] [--repeat N] [CASE...]
"""

import argparse
import glob
import os
import sys
import time

import mlx.core as mx
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CHAIN, COLS, DECODE_KV, DECODE_Q, ROPE, ROWS  # noqa: E402

EPS = 1e-5


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


def tiny_scalar_chain():
    a = mx.ones((1,))
    mx.eval(a)

    def build():
        y = a
        for _ in range(CHAIN):
            y = y + 1.0
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



# ---- train_step (CPU and GPU) ---------------------------------------------------------------
# One training step of nuvec-nn's `train` example (crates/nuvec-bench/src/cases/train.rs): a
# Qwen3-style decoder of 2 blocks of width 128 (4 query heads over 2 key/value heads of 32, q/k
# RMS norms, RoPE base 10000, SwiGLU of 384, tied embeddings), MLX's own layers and their
# initialisation (nuvec-nn's follows them); forward, the cross entropy of the last 4 positions,
# backward, AdamW (betas 0.9, 0.98, bias correction, weight decay 0.01), all evaluated.
T_VOCAB, T_DIMS, T_LAYERS, T_HEADS, T_KV, T_HEAD, T_HIDDEN = 12, 128, 2, 4, 2, 32, 384
T_BATCH, T_INPUT, T_ANSWER, T_EPS = 128, 11, 4, 1e-6


def train_step():
    import mlx.nn as nn
    import mlx.optimizers as optim

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(T_DIMS, T_HEADS * T_HEAD, bias=False)
            self.k_proj = nn.Linear(T_DIMS, T_KV * T_HEAD, bias=False)
            self.v_proj = nn.Linear(T_DIMS, T_KV * T_HEAD, bias=False)
            self.o_proj = nn.Linear(T_HEADS * T_HEAD, T_DIMS, bias=False)
            self.q_norm, self.k_norm = nn.RMSNorm(T_HEAD, T_EPS), nn.RMSNorm(T_HEAD, T_EPS)
            self.rope = nn.RoPE(T_HEAD, traditional=False, base=10000.0)
            self.gate_proj = nn.Linear(T_DIMS, T_HIDDEN, bias=False)
            self.up_proj = nn.Linear(T_DIMS, T_HIDDEN, bias=False)
            self.down_proj = nn.Linear(T_HIDDEN, T_DIMS, bias=False)
            self.input_layernorm = nn.RMSNorm(T_DIMS, T_EPS)
            self.post_attention_layernorm = nn.RMSNorm(T_DIMS, T_EPS)

        def attention(self, x):
            b, l, _ = x.shape
            q = self.q_norm(self.q_proj(x).reshape(b, l, T_HEADS, T_HEAD)).transpose(0, 2, 1, 3)
            k = self.k_norm(self.k_proj(x).reshape(b, l, T_KV, T_HEAD)).transpose(0, 2, 1, 3)
            v = self.v_proj(x).reshape(b, l, T_KV, T_HEAD).transpose(0, 2, 1, 3)
            o = mx.fast.scaled_dot_product_attention(self.rope(q), self.rope(k), v,
                                                     scale=T_HEAD ** -0.5, mask="causal")
            return self.o_proj(o.transpose(0, 2, 1, 3).reshape(b, l, -1))

        def __call__(self, x):
            h = x + self.attention(self.input_layernorm(x))
            m = self.post_attention_layernorm(h)
            return h + self.down_proj(nn.silu(self.gate_proj(m)) * self.up_proj(m))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(T_VOCAB, T_DIMS)
            self.layers = [Block() for _ in range(T_LAYERS)]
            self.norm = nn.RMSNorm(T_DIMS, T_EPS)

        def __call__(self, tokens):
            h = self.embed_tokens(tokens)
            for block in self.layers:
                h = block(h)
            return self.embed_tokens.as_linear(self.norm(h)[:, -T_ANSWER:])

    mx.random.seed(0)
    model = Transformer()
    rng = np.random.default_rng(71)
    x = mx.array(rng.integers(0, T_VOCAB, (T_BATCH, T_INPUT)).astype(np.uint32))
    y = mx.array(rng.integers(0, 10, (T_BATCH, T_ANSWER)).astype(np.uint32))
    opt = optim.AdamW(1e-3, betas=[0.9, 0.98], weight_decay=0.01, bias_correction=True)
    mx.eval(model.parameters(), x, y)

    def loss_fn(m):
        return nn.losses.cross_entropy(m(x), y, reduction="mean")

    step = nn.value_and_grad(model, loss_fn)

    def run():
        loss, grads = step(model)
        opt.update(model, grads)
        mx.eval(loss, model.parameters(), opt.state)
        return loss
    return run

SETUPS = {
    "matmul_2048": matmul(mx.float32), "matmul_2048_bf16": matmul(mx.bfloat16),
    "matmul_2048_f16": matmul(mx.float16),
    "add": add, "exp": exp, "where": where, "sum_rows": sum_rows,
    "transpose_copy": transpose_copy, "rms_norm": rms_norm, "layer_norm": layer_norm,
    "softmax": softmax, "logsumexp": logsumexp, "rope": rope, "decode_4k": decode_4k,
    "qmm_decode": qmm(1), "qmm_prefill": qmm(512), "tiny_op_chain": tiny_op_chain,
    "tiny_scalar_chain": tiny_scalar_chain,
    "vjp_chain": vjp_chain, "vmap_mlp": vmap_mlp, "train_step": train_step,
}

# ---- GPU (MLX's CUDA build) ----------------------------------------------------------------

BF = mx.bfloat16
GR, GC = 16384, 4096


class SyncClock:
    """Wall time between two `mx.synchronize` calls: the GPU's queue is empty at both ends."""

    def start(self):
        mx.synchronize()
        self.t0 = time.perf_counter()

    def stop(self):
        mx.synchronize()
        return time.perf_counter() - self.t0


def rand(shape, seed=0, dtype=BF):
    """Uniform values in [-1, 1) made on the GPU (host-made inputs of 2^30 elements would
    take longer than the cases)."""
    a = mx.random.uniform(-1, 1, shape, key=mx.random.key(seed)).astype(dtype)
    mx.eval(a)
    return a


def g_copy(n=2**30):
    def setup():
        x = rand((n,))
        try:
            mx.asarray(x, copy=True)
            return timed(lambda: mx.asarray(x, copy=True))
        except TypeError:  # an MLX without asarray(copy=): a multiply moves the same bytes
            return timed(lambda: x * 1)
    return setup


def g_add():
    a, b = rand((2**28,), 1), rand((2**28,), 2)
    return timed(lambda: a + b)


def g_cast(src, dst):
    def setup():
        x = rand((2**28,), 3, src)
        return timed(lambda: x.astype(dst))
    return setup


def g_sum_rows(dtype):
    def setup():
        x = rand((GR, GC), 4, dtype)
        return timed(lambda: mx.sum(x, axis=-1))
    return setup


def g_matmul_8192():
    a, b = rand((8192, 8192), 1), rand((8192, 8192), 2)
    return timed(lambda: a @ b)


def g_linear(m):
    def setup():
        x, w = rand((m, 4096), 1), rand((14336, 4096), 2)  # w as a linear layer stores it
        return timed(lambda: x @ w.T)
    return setup


def g_rms_norm():
    x, w = rand((GR, GC)), rand((GC,), 1)
    return timed(lambda: mx.fast.rms_norm(x, w, EPS))


def g_add_rms_norm():
    x, r, w = rand((GR, GC)), rand((GR, GC), 1), rand((GC,), 2)

    def run():
        h = x + r
        return h, mx.fast.rms_norm(h, w, EPS)
    return timed(run)


def g_layer_norm():
    x, w, b = rand((GR, GC)), rand((GC,), 1), rand((GC,), 2)
    return timed(lambda: mx.fast.layer_norm(x, w, b, EPS))


def g_rms_norm_vjp():
    x, w, g = rand((GR, GC)), rand((GC,), 1), rand((GR, GC), 2)

    def run():
        _, grads = mx.vjp(lambda x, w: mx.fast.rms_norm(x, w, EPS), [x, w], [g])
        return grads
    return timed(run)


def g_softmax():
    x = rand((GR, GC))
    return timed(lambda: mx.softmax(x, axis=-1))


def g_logsumexp():
    x = rand((GR, GC))
    return timed(lambda: mx.logsumexp(x, axis=-1))


def g_cross_entropy():
    logits = rand((4096, 151936))
    t = mx.random.randint(0, 151936, (4096,), key=mx.random.key(3))
    mx.eval(t)

    def run():
        picked = mx.take_along_axis(logits, t[:, None], axis=-1)[:, 0]
        return (mx.logsumexp(logits, axis=-1) - picked).astype(mx.float32)
    return timed(run)


def g_rope():
    x = rand((4, 2048, 32, 128)).transpose(0, 2, 1, 3)  # [4, 32, 2048, 128], a view
    return timed(lambda: mx.fast.rope(x, 128, traditional=False, base=10000.0, scale=1.0,
                                      offset=0))


def g_norm_rope_cache():
    """k_norm, rope at position 2000 and the write into the cache; the new cache replaces the
    old one, as in a decoding loop."""
    x, w = rand((1, 8, 1, 128)), rand((128,), 1)
    state = {"cache": rand((1, 8, 4096, 128), 2)}

    def run():
        y = mx.fast.rope(mx.fast.rms_norm(x, w, 1e-6), 128, traditional=False, base=10000.0,
                         scale=1.0, offset=2000)
        cache = state.pop("cache")
        cache[:, :, 2000:2001, :] = y
        state["cache"] = cache
        return cache
    return timed(run)


def g_sdpa(b, h, l, d, causal):
    def setup():
        q, k, v = (rand((b, h, l, d), i) for i in range(3))
        mask = "causal" if causal else None
        return timed(lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=d ** -0.5,
                                                                  mask=mask))
    return setup


def g_decode(b, l):
    def setup():
        q = rand((b, 32, 1, 128))
        k, v = rand((b, 8, l, 128), 1), rand((b, 8, l, 128), 2)
        return timed(lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=128 ** -0.5))
    return setup


def g_decode_d512():
    def setup():
        q = rand((8, 16, 1, 512))
        k, v = rand((8, 2, 4096, 512), 1), rand((8, 2, 4096, 512), 2)
        return timed(lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=512 ** -0.5))
    return setup


def g_moe_mm():
    """64 tokens each through 8 of 128 bf16 experts stored [128, 768, 2048] (a linear layer's
    weights, read transposed): gather_mm with rhs_indices [64, 8], unsorted."""
    def setup():
        w = mx.swapaxes(rand((128, 768, 2048), 2), -1, -2)
        x = rand((64, 1, 1, 2048), 1)
        idx = mx.array(harness.moe_experts(64), dtype=mx.uint32)
        mx.eval(w, x, idx)
        return timed(lambda: mx.gather_mm(x, w, rhs_indices=idx))
    return setup


def g_qmm(m):
    """x [m, 4096] against a 4-bit [14336, 4096] weight in groups of 64 (bf16 scales and
    biases), as a linear layer: qmv_14336x4096 (m = 1) and the qmm cases."""
    def setup():
        wq, scales, biases = mx.quantize(rand((14336, 4096), 2), group_size=64, bits=4)
        x = rand((m, 4096), 1)
        mx.eval(wq, scales, biases)
        return timed(lambda: mx.quantized_matmul(x, wq, scales, biases, transpose=True,
                                                 group_size=64, bits=4))
    return setup


def g_moe(tokens):
    """`tokens` tokens each through 8 of 128 experts of [768, 2048] (4-bit, groups of 64):
    gather_qmm with rhs_indices [tokens, 8], the experts of harness.moe_experts, unsorted."""
    def setup():
        wq, scales, biases = mx.quantize(rand((128, 768, 2048), 2), group_size=64, bits=4)
        x = rand((tokens, 1, 1, 2048), 1)
        idx = mx.array(harness.moe_experts(tokens), dtype=mx.uint32)
        mx.eval(wq, scales, biases, idx)
        return timed(lambda: mx.gather_qmm(x, wq, scales, biases, rhs_indices=idx,
                                           transpose=True, group_size=64, bits=4))
    return setup


def g_tiny_op_chain():
    a, b = mx.ones((1,)), mx.ones((1,))
    mx.eval(a, b)

    def build():
        y = a
        for _ in range(CHAIN):
            y = y + b
        return y
    return timed(build)


GPU_SETUPS = {
    "copy": g_copy(), "copy_32mib": g_copy(2**23), "copy_8mib": g_copy(2**21), "add": g_add,
    "cast_f32_bf16": g_cast(mx.float32, BF),
    "cast_bf16_f32": g_cast(BF, mx.float32), "sum_rows": g_sum_rows(BF),
    "sum_rows_f32": g_sum_rows(mx.float32), "matmul_8192": g_matmul_8192,
    "gemv_4096_14336": g_linear(1), "linear_m16": g_linear(16), "linear_m64": g_linear(64),
    "linear_m256": g_linear(256), "qmv_14336x4096": g_qmm(1), "qmm_512x14336x4096": g_qmm(512),
    "qmm_1024x14336x4096": g_qmm(1024), "qmm_4096x14336x4096": g_qmm(4096),
    "moe_qmv_1": g_moe(1), "moe_qmv_64": g_moe(64),
    "moe_mm_64": g_moe_mm(), "decode_d512_b8_4k": g_decode_d512(),
    "rms_norm": g_rms_norm, "add_rms_norm": g_add_rms_norm,
    "layer_norm": g_layer_norm, "rms_norm_vjp": g_rms_norm_vjp, "softmax": g_softmax,
    "logsumexp": g_logsumexp, "cross_entropy": g_cross_entropy, "rope": g_rope,
    "norm_rope_cache": g_norm_rope_cache,
    "sdpa_causal_4k": g_sdpa(4, 32, 4096, 128, True),
    "sdpa_full_4k": g_sdpa(4, 32, 4096, 128, False),
    "sdpa_causal_8k_d64": g_sdpa(2, 16, 8192, 64, True),
    "sdpa_causal_16k": g_sdpa(1, 32, 16384, 128, True),
    "decode_b1_8k": g_decode(1, 8192), "decode_b8_8k": g_decode(8, 8192),
    "decode_b64_4k": g_decode(64, 4096), "decode_b1_128k": g_decode(1, 131072),
    "tiny_op_chain": g_tiny_op_chain, "train_step": train_step,
}


def gpu_missing(name):
    if name.startswith("paged_"):
        return "MLX has no paged attention"
    if name.startswith("gated_delta"):
        return "MLX core has no gated delta rule"
    return "no MLX version of this case"


def gpu_info():
    text = f"mlx {mx.__version__} (GPU)"
    try:
        name = mx.device_info().get("device_name")
        if name:
            text += f", {name}"
    except Exception:  # device_info is newer than some builds
        pass
    return text


if __name__ == "__main__":
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    device = pre.parse_known_args()[0].device
    if device == "gpu":
        if not mx.is_available(mx.gpu):
            print("mlx_bench: this MLX has no GPU backend (the CUDA build is needed)",
                  file=sys.stderr)
            sys.exit(1)
        mx.set_default_device(mx.gpu)
        sys.exit(harness.main("mlx", harness.cases(GPU_SETUPS, gpu_missing, harness.GPU_SPECS),
                              gpu_info(), device="gpu", clock=SyncClock()))
    mx.set_default_device(mx.cpu)
    sys.exit(harness.main("mlx", harness.cases(
        SETUPS, lambda n: "the case's definition (the transforms issue)"), info()))

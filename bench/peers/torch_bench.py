"""The GPU cases of BENCH-CASES.md in PyTorch, eager or under torch.compile (a skeleton: the
cases PyTorch has no operation for report "unavailable"). See harness.py for the command line
and JSON; each run is timed with CUDA events after warm-up. With `--device cpu`, the CPU cases
that have a PyTorch version here (`train_step`), wall-clocked.

    python3 bench/peers/torch_bench.py [--device cpu|gpu] [--compile] [--sdpa cudnn|flash] [--json FILE] [--repeat N] [CASE...]

`--sdpa cudnn` (or `flash`) runs the attention cases through that SDPA backend alone (runner
"torch.cudnn", "torch.flash"); without it PyTorch picks its default.
"""

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CHAIN, Unavailable  # noqa: E402

DEV = "cuda"
BF = torch.bfloat16
EPS = 1e-5
COMPILE = "--compile" in sys.argv
SDPA = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--sdpa"), None)


def attention_backend(f):
    """`f` under the SDPA backend `--sdpa` names (PyTorch's choice without it)."""
    if SDPA is None:
        return f
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[SDPA]

    def run():
        with sdpa_kernel(backend):
            return f()
    return run


class CudaClock:
    """Events recorded on the current stream around a run; `start` waits for earlier work
    (as nuvec-bench's timer does), `stop` waits for the second event."""

    def start(self):
        torch.cuda.synchronize()
        self.a = torch.cuda.Event(enable_timing=True)
        self.b = torch.cuda.Event(enable_timing=True)
        self.a.record()

    def stop(self):
        self.b.record()
        self.b.synchronize()
        return self.a.elapsed_time(self.b) / 1e3


def rand(*shape, dtype=BF, seed=0):
    g = torch.Generator(device=DEV).manual_seed(seed)
    return (torch.rand(*shape, generator=g, device=DEV, dtype=torch.float32) * 2 - 1).to(dtype)


def prog(f):
    """`f`, compiled when --compile is given (the first warm-up run compiles it)."""
    return torch.compile(f) if COMPILE else f


def copy(n=2**30):
    def setup():
        x = rand(n)
        return prog(lambda: x.clone())
    return setup


def add():
    a, b = rand(2**28, seed=1), rand(2**28, seed=2)
    return prog(lambda: a + b)


def cast_f32_bf16():
    x = rand(2**28, dtype=torch.float32)
    return prog(lambda: x.to(BF))


def cast_bf16_f32():
    x = rand(2**28)
    return prog(lambda: x.to(torch.float32))


def sum_rows(dtype):
    def setup():
        x = rand(16384, 4096, dtype=dtype)
        return prog(lambda: x.sum(-1))
    return setup


def matmul_8192():
    a, b = rand(8192, 8192, seed=1), rand(8192, 8192, seed=2)
    return prog(lambda: a @ b)


def linear(m):
    def setup():
        x, w = rand(m, 4096, seed=1), rand(14336, 4096, seed=2)  # w as a linear layer stores it
        return prog(lambda: F.linear(x, w))
    return setup


def quantized_linear(m):
    """The quantized cases' product with the bf16 weight itself (PyTorch has no 4-bit affine
    product in its core): F.linear, cuBLAS. qmv_14336x4096 keeps the work of the 4-bit case
    (bytes of the packed weight), so its GB/s is a time-based figure comparable with the
    quantized runners', not the bf16 bytes this run reads."""
    def setup():
        x, w = rand(m, 4096, seed=1), rand(14336, 4096, seed=2)
        return prog(lambda: F.linear(x, w))
    return setup


def rms_norm():
    x, w = rand(16384, 4096), rand(4096, seed=1)
    return prog(lambda: F.rms_norm(x, (4096,), w, EPS))


def add_rms_norm():
    x, r, w = rand(16384, 4096), rand(16384, 4096, seed=1), rand(4096, seed=2)

    def run():
        h = x + r
        return h, F.rms_norm(h, (4096,), w, EPS)
    return prog(run)


def layer_norm():
    x, w, b = rand(16384, 4096), rand(4096, seed=1), rand(4096, seed=2)
    return prog(lambda: F.layer_norm(x, (4096,), w, b, EPS))


def rms_norm_vjp():
    # Autograd recomputes the forward pass here; nuvec's case is the backward kernel alone.
    x = rand(16384, 4096).requires_grad_()
    w = rand(4096, seed=1).requires_grad_()
    g = rand(16384, 4096, seed=2)

    def run():
        return torch.autograd.grad(F.rms_norm(x, (4096,), w, EPS), (x, w), g)
    return prog(run)


def softmax():
    x = rand(16384, 4096)
    return prog(lambda: torch.softmax(x, -1))


def logsumexp():
    x = rand(16384, 4096)
    return prog(lambda: torch.logsumexp(x, -1))


def cross_entropy():
    logits = rand(4096, 151936)
    g = torch.Generator(device=DEV).manual_seed(3)
    t = torch.randint(0, 151936, (4096,), generator=g, device=DEV)
    return prog(lambda: F.cross_entropy(logits, t, reduction="none"))


def rope():
    x = rand(4, 2048, 32, 128).transpose(1, 2)  # [4, 32, 2048, 128], a view
    half = 64

    def run():
        theta = 10000.0 ** (-torch.arange(half, device=DEV, dtype=torch.float32) * 2 / 128)
        ang = torch.arange(2048, device=DEV, dtype=torch.float32)[:, None] * theta
        c, s = ang.cos().to(BF), ang.sin().to(BF)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1)
    return prog(run)


def norm_rope_cache():
    """One decode step's key: RMS-normalised per head (Qwen 3's k_norm), rotated at position
    2000 and written into a [1, 8, 4096, 128] cache in place."""
    x, w = rand(1, 8, 1, 128), rand(128, seed=1)
    cache = rand(1, 8, 4096, 128, seed=2)
    at, half = 2000, 64
    theta = 10000.0 ** (-torch.arange(half, device=DEV, dtype=torch.float32) * 2 / 128)
    ang = at * theta
    c, s = ang.cos().to(BF), ang.sin().to(BF)

    def run():
        y = F.rms_norm(x, (128,), w, 1e-6)
        y1, y2 = y[..., :half], y[..., half:]
        cache[:, :, at:at + 1] = torch.cat([y1 * c - y2 * s, y1 * s + y2 * c], -1)
        return cache
    return prog(run)


def rms_norm_decode():
    x, w = rand(1, 4096), rand(4096, seed=1)
    return prog(lambda: F.rms_norm(x, (4096,), w, EPS))


def rope_decode():
    x = rand(1, 32, 1, 128)
    at, half = 2000, 64
    theta = 10000.0 ** (-torch.arange(half, device=DEV, dtype=torch.float32) * 2 / 128)
    ang = at * theta
    c, s = ang.cos().to(BF), ang.sin().to(BF)

    def run():
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1)
    return prog(run)


def launch_floor():
    a = torch.ones(1, device=DEV)
    b = torch.full((1,), 2.0, device=DEV)
    return prog(lambda: a + b)


def sdpa(b, h, l, d, causal):
    def setup():
        q, k, v = (rand(b, h, l, d, seed=i) for i in range(3))
        return prog(attention_backend(
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)))
    return setup


def decode(b, l):
    def setup():
        q = rand(b, 32, 1, 128)
        k, v = rand(b, 8, l, 128, seed=1), rand(b, 8, l, 128, seed=2)
        return prog(attention_backend(
            lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)))
    return setup


def decode_d512():
    def setup():
        q = rand(8, 16, 1, 512)
        k, v = rand(8, 2, 4096, 512, seed=1), rand(8, 2, 4096, 512, seed=2)
        return prog(attention_backend(
            lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)))
    return setup


def tiny_op_chain():
    a = torch.ones(1, device=DEV)
    b = torch.ones(1, device=DEV)

    def run():
        y = a
        for _ in range(CHAIN):
            y = y + b
        return y
    return run  # never compiled: the case measures per-op dispatch


# train_step: nuvec-nn's `train` example's model (crates/nuvec-bench/src/cases/train.rs): a
# Qwen3-style decoder, 2 blocks of width 128, 4 query heads over 2 key/value heads of 32, q/k
# RMS norms, rotary embeddings (base 10000, halves rotated), SwiGLU of 384, tied embeddings;
# initialised as MLX's layers are (linear weights U(-1/sqrt(in), 1/sqrt(in)), which is also
# PyTorch's default, embeddings N(0, 1/dims), norms ones). One step: forward, the cross
# entropy of the last 4 positions, backward, AdamW (betas 0.9, 0.98, weight decay 0.01).
T_VOCAB, T_DIMS, T_LAYERS, T_HEADS, T_KV, T_HEAD, T_HIDDEN = 12, 128, 2, 4, 2, 32, 384
T_BATCH, T_INPUT, T_ANSWER, T_EPS = 128, 11, 4, 1e-6


class RMSNorm(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dims))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, T_EPS)


def rotate_heads(x, base=10000.0):
    """MLX's non-traditional RoPE over the whole head of x: [B, H, L, D]."""
    d, half = x.shape[-1], x.shape[-1] // 2
    inv = base ** (-torch.arange(half, device=x.device, dtype=torch.float32) * 2 / d)
    ang = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)[:, None] * inv
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        lin = lambda i, o: nn.Linear(i, o, bias=False)  # noqa: E731
        self.q_proj, self.k_proj = lin(T_DIMS, T_HEADS * T_HEAD), lin(T_DIMS, T_KV * T_HEAD)
        self.v_proj, self.o_proj = lin(T_DIMS, T_KV * T_HEAD), lin(T_HEADS * T_HEAD, T_DIMS)
        self.q_norm, self.k_norm = RMSNorm(T_HEAD), RMSNorm(T_HEAD)
        self.gate_proj, self.up_proj = lin(T_DIMS, T_HIDDEN), lin(T_DIMS, T_HIDDEN)
        self.down_proj = lin(T_HIDDEN, T_DIMS)
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(T_DIMS), RMSNorm(T_DIMS)

    def attention(self, x):
        b, l, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, l, T_HEADS, T_HEAD)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, l, T_KV, T_HEAD)).transpose(1, 2)
        v = self.v_proj(x).view(b, l, T_KV, T_HEAD).transpose(1, 2)
        o = F.scaled_dot_product_attention(rotate_heads(q), rotate_heads(k), v, is_causal=True,
                                           scale=T_HEAD ** -0.5, enable_gqa=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, l, -1))

    def forward(self, x):
        h = x + self.attention(self.input_layernorm(x))
        m = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(T_VOCAB, T_DIMS)
        nn.init.normal_(self.embed_tokens.weight, std=math.sqrt(1 / T_DIMS))
        self.layers = nn.ModuleList(Block() for _ in range(T_LAYERS))
        self.norm = RMSNorm(T_DIMS)

    def forward(self, tokens):
        h = self.embed_tokens(tokens)
        for block in self.layers:
            h = block(h)
        h = self.norm(h)[:, -T_ANSWER:]
        return h @ self.embed_tokens.weight.T


def train_step():
    torch.manual_seed(0)
    model = Transformer().to(DEV)
    g = torch.Generator().manual_seed(71)
    x = torch.randint(0, T_VOCAB, (T_BATCH, T_INPUT), generator=g).to(DEV)
    y = torch.randint(0, 10, (T_BATCH, T_ANSWER), generator=g).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=0.01)

    def run():
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, T_VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss.detach()
    return run


def unavailable(why):
    def setup():
        raise Unavailable(why)
    return setup


SETUPS = {
    "copy": copy(), "copy_32mib": copy(2**23), "copy_8mib": copy(2**21), "add": add,
    "cast_f32_bf16": cast_f32_bf16, "cast_bf16_f32": cast_bf16_f32,
    "sum_rows": sum_rows(BF), "sum_rows_f32": sum_rows(torch.float32),
    "matmul_8192": matmul_8192, "gemv_4096_14336": linear(1),
    "linear_m16": linear(16), "linear_m64": linear(64), "linear_m256": linear(256),
    "qmv_14336x4096": quantized_linear(1), "qmm_512x14336x4096": quantized_linear(512),
    "qmm_1024x14336x4096": quantized_linear(1024), "qmm_4096x14336x4096": quantized_linear(4096),
    "moe_qmv_1": unavailable("PyTorch has no gathered (mixture of experts) quantized product"),
    "moe_qmv_64": unavailable("PyTorch has no gathered (mixture of experts) quantized product"),
    "moe_mm_64": unavailable("PyTorch has no gathered (mixture of experts) product"),
    "decode_d512_b8_4k": decode_d512(),
    "rms_norm": rms_norm, "add_rms_norm": add_rms_norm, "layer_norm": layer_norm,
    "rms_norm_vjp": rms_norm_vjp, "softmax": softmax, "logsumexp": logsumexp,
    "cross_entropy": cross_entropy, "rope": rope, "norm_rope_cache": norm_rope_cache,
    "rms_norm_decode": rms_norm_decode, "rope_decode": rope_decode, "launch_floor": launch_floor,
    "sdpa_causal_4k": sdpa(4, 32, 4096, 128, True), "sdpa_full_4k": sdpa(4, 32, 4096, 128, False),
    "sdpa_causal_8k_d64": sdpa(2, 16, 8192, 64, True),
    "sdpa_causal_16k": sdpa(1, 32, 16384, 128, True),
    "decode_b1_8k": decode(1, 8192), "decode_b8_8k": decode(8, 8192),
    "decode_b64_4k": decode(64, 4096), "decode_b1_128k": decode(1, 131072),
    "tiny_op_chain": tiny_op_chain, "train_step": train_step,
}

CPU_SETUPS = {"train_step": train_step}


def missing(name):
    if name.startswith("paged_"):
        return "PyTorch has no paged attention"
    if name.startswith("gated_delta"):
        return "PyTorch has no gated delta rule"
    return "no PyTorch version in this skeleton yet"


if __name__ == "__main__":
    argv = [a for i, a in enumerate(sys.argv[1:], 1)
            if a not in ("--compile", "--sdpa") and sys.argv[i - 1] != "--sdpa"]
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--device", choices=["cpu", "gpu"], default="gpu")
    device = pre.parse_known_args(argv)[0].device
    runner = "torch.compile" if COMPILE else (f"torch.{SDPA}" if SDPA else "torch")
    if device == "cpu":
        DEV = "cpu"
        info = f"torch {torch.__version__}, CPU, {torch.get_num_threads()} threads"
        cpu_missing = lambda name: "no PyTorch CPU version of this case yet"  # noqa: E731
        sys.exit(harness.main(runner, harness.cases(CPU_SETUPS, cpu_missing), info,
                              device="cpu", argv=argv))
    if not torch.cuda.is_available():
        print("torch_bench: no CUDA device", file=sys.stderr)
        sys.exit(1)
    info = f"torch {torch.__version__}, {torch.cuda.get_device_name()}"
    sys.exit(harness.main(runner, harness.cases(SETUPS, missing, harness.GPU_SPECS), info,
                          device="gpu", clock=CudaClock(), argv=argv))

"""The CPU cases of BENCH-CASES.md in NumPy (see harness.py for the command line and JSON).

Elementwise operations and reductions run on one thread in NumPy; matrix products use its BLAS
and the BLAS's threads. Run it with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (bench/run_cpu.sh
does) so that OpenBLAS picks its kernel for this processor; the JSON records which it ran.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (CHAIN, COLS, DECODE_KV, DECODE_Q, ROPE, ROPE_LARGE, ROWS,  # noqa: E402
                     Unavailable)

EPS = 1e-5


def uniform(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def matmul_f32():
    a, b = uniform((2048, 2048), 21), uniform((2048, 2048), 22)
    return lambda: a @ b


def matmul_bf16():
    raise Unavailable("NumPy has no bfloat16")


def matmul_f16():
    # float16 products take NumPy's generic loop, not BLAS: minutes a run at this size.
    raise Unavailable("NumPy's float16 matmul has no BLAS path (minutes a run)")


def add():
    x, y = uniform((ROWS, COLS), 1), uniform((ROWS, COLS), 2)
    return lambda: np.add(x, y)


def exp():
    x = uniform((ROWS, COLS), 3)
    return lambda: np.exp(x)


def where():
    x, y = uniform((ROWS, COLS), 4), uniform((ROWS, COLS), 5)
    c = uniform((ROWS, COLS), 6) > 0
    return lambda: np.where(c, x, y)


def sum_rows():
    x = uniform((ROWS, COLS), 11)
    return lambda: np.sum(x, axis=-1)


def transpose_copy():
    x = uniform((ROWS, COLS), 7)
    return lambda: np.ascontiguousarray(x.T)


def rms_norm():
    x, w = uniform((ROWS, COLS), 31), uniform((COLS,), 32)

    def run():
        ms = np.mean(np.square(x), axis=-1, keepdims=True)
        return x * (1.0 / np.sqrt(ms + EPS)) * w
    return run


def layer_norm():
    x, w, b = uniform((ROWS, COLS), 33), uniform((COLS,), 34), uniform((COLS,), 35)

    def run():
        mean = np.mean(x, axis=-1, keepdims=True)
        d = x - mean
        var = np.mean(np.square(d), axis=-1, keepdims=True)
        return d * (1.0 / np.sqrt(var + EPS)) * w + b
    return run


def softmax():
    x = uniform((ROWS, COLS), 12)

    def run():
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        e /= np.sum(e, axis=-1, keepdims=True)
        return e
    return run


def logsumexp():
    x = uniform((ROWS, COLS), 13)

    def run():
        m = np.max(x, axis=-1, keepdims=True)
        return (m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True)))[:, 0]
    return run


def rope_of(shape):
    x = uniform(shape, 36)
    d = shape[-1]
    half = d // 2

    def run():
        # The angles are part of the work, as in a fused rope.
        theta = np.power(np.float32(10000.0), -np.arange(half, dtype=np.float32) * 2 / d)
        ang = np.arange(shape[2], dtype=np.float32)[:, None] * theta
        c, s = np.cos(ang), np.sin(ang)
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)
    return run


def rope():
    return rope_of(ROPE)


def rope_large():
    return rope_of(ROPE_LARGE)


def decode_4k():
    q, k, v = uniform(DECODE_Q, 41), uniform(DECODE_KV, 42), uniform(DECODE_KV, 43)
    hq, hkv, d = DECODE_Q[1], DECODE_KV[1], DECODE_Q[-1]
    scale = np.float32(1 / np.sqrt(d))
    kt = k[0].transpose(0, 2, 1)  # a view

    def run():
        qg = q.reshape(hkv, hq // hkv, d)  # query heads grouped by their key head
        s = np.matmul(qg, kt) * scale
        p = np.exp(s - np.max(s, axis=-1, keepdims=True))
        p /= np.sum(p, axis=-1, keepdims=True)
        return np.matmul(p, v[0]).reshape(DECODE_Q)
    return run


def decode_4k_bf16():
    raise Unavailable("NumPy has no bfloat16")


def tiny_op_chain():
    a, b = np.ones(1, np.float32), np.ones(1, np.float32)

    def run():
        y = a
        for _ in range(CHAIN):
            y = y + b
        return y
    return run


def tiny_scalar_chain():
    a = np.ones(1, np.float32)

    def run():
        y = a
        for _ in range(CHAIN):
            y = y + 1.0
        return y
    return run


def info():
    text = f"numpy {np.__version__}"
    try:
        import threadpoolctl
        pools = [p for p in threadpoolctl.threadpool_info() if p.get("user_api") == "blas"]
        for p in pools:
            text += (f"; BLAS {p.get('internal_api')} {p.get('version')}"
                     f" kernel {p.get('architecture')}, {p.get('num_threads')} threads")
    except ImportError:
        text += "; BLAS unknown (threadpoolctl missing)"
    core = os.environ.get("OPENBLAS_CORETYPE")
    text += f"; OPENBLAS_CORETYPE {'=' + core if core else 'unset'}"
    return text


SETUPS = {
    "matmul_2048": matmul_f32, "matmul_2048_bf16": matmul_bf16, "matmul_2048_f16": matmul_f16,
    "add": add, "exp": exp, "where": where, "sum_rows": sum_rows,
    "transpose_copy": transpose_copy, "rms_norm": rms_norm, "layer_norm": layer_norm,
    "softmax": softmax, "logsumexp": logsumexp, "rope": rope, "rope_large": rope_large,
    "decode_4k": decode_4k, "decode_4k_bf16": decode_4k_bf16,
    "tiny_op_chain": tiny_op_chain, "tiny_scalar_chain": tiny_scalar_chain,
}

if __name__ == "__main__":
    sys.exit(harness.main("numpy", harness.cases(SETUPS, lambda n: "NumPy has no transforms"
                                                 if n in ("vjp_chain", "vmap_mlp")
                                                 else "no NumPy version"), info()))

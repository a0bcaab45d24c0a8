#!/usr/bin/env python3
"""Checks the chunked (WY / UT) form of the gated delta rule against the plain recurrence.

The chunked form is computed the way `kernels/fast/gated_delta_chunk.cu` computes it: the
same phases, the same folding of beta and the gates into the operands, the same padding of a
last partial chunk. In float64 it must equal the recurrence to rounding; with `--round` the
operands the tensor cores take are rounded to bfloat16 where the kernel rounds them, to see
the error the kernel should show against the float32 CPU result.

Usage: python3 scripts/gated_delta_chunk.py [--round]
"""

import sys

import numpy as np

C = 64  # the chunk


def bf16(x, on):
    """x rounded to bfloat16 (to nearest even) when `on`, else x."""
    if not on:
        return x
    a = np.asarray(x, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def recurrence(q, k, v, g, beta, s):
    """The fallback's steps for one head: q, k [T, Dk], v [T, Dv], g, beta [T], s [Dv, Dk]."""
    s = s.copy()
    y = np.zeros_like(v)
    for t in range(q.shape[0]):
        s = g[t] * s
        s = s + beta[t] * np.outer(v[t] - s @ k[t], k[t])
        y[t] = s @ q[t]
    return y, s


def prepare(q, k, v, g, beta, r):
    """Kernel 1 for one chunk of n <= C steps (padded with g = 1, beta = 0, zero vectors).

    Returns W, Kd, Qg (the chunk's key-side operands), P (the masked, gated Q K^T), U and
    the chunk's total decay."""
    n = q.shape[0]
    dk, dv = k.shape[1], v.shape[1]
    pad = lambda x, w: np.vstack([x, np.zeros((C - n, w))])
    qc, kc, vc = pad(q, dk), pad(k, dk), pad(v, dv)
    gc = np.concatenate([g, np.ones(C - n)])
    bc = np.concatenate([beta, np.zeros(C - n)])
    # D[i, j] = prod_{j < m <= i} g_m for j <= i, by products from the diagonal (no division,
    # g = 0 allowed); gamma[i] = prod_{m <= i} g_m.
    d = np.zeros((C, C))
    gamma = np.zeros(C)
    for i in range(C):
        p = 1.0
        for j in range(i, -1, -1):
            d[i, j] = p
            p *= gc[j]
        gamma[i] = p
    kb, qb, vb = bf16(kc, r), bf16(qc, r), bf16(vc, r)
    kk = kb @ kb.T
    qk = qb @ kb.T
    lower = np.tril(np.ones((C, C)), -1)
    a = lower * bc[:, None] * d * kk
    p_mat = bf16(np.tril(np.ones((C, C))) * d * qk, r)
    # T = (I + A)^-1, column by column (forward substitution; a column needs no other).
    t = np.zeros((C, C))
    for c in range(C):
        x = np.zeros(C)
        for i in range(C):
            acc = 1.0 if i == c else 0.0
            for j in range(i):
                acc -= a[i, j] * x[j]
            x[i] = acc
        t[:, c] = x
    tw = bf16(t * (bc * gamma)[None, :], r)
    tu = bf16(t * bc[None, :], r)
    w = bf16(tw @ kb, r)
    u = tu @ vb  # kept in float32 by the kernel
    kd = bf16(d[C - 1][:, None] * kc, r)  # (Gamma_C / Gamma_j) k_j
    qg = bf16(gamma[:, None] * qc, r)
    return w, kd, qg, p_mat, u, gamma[C - 1]


def chunked(q, k, v, g, beta, s, r=False):
    """Kernel 1 over every chunk, then kernel 2 (the recurrence across chunks)."""
    steps = q.shape[0]
    s = s.copy()
    y = np.zeros_like(v)
    for c0 in range(0, steps, C):
        c1 = min(c0 + C, steps)
        w, kd, qg, p_mat, u, total = prepare(
            q[c0:c1], k[c0:c1], v[c0:c1], g[c0:c1], beta[c0:c1], r
        )
        sb = bf16(s, r)  # the state as the tensor cores take it
        vnew = u - w @ sb.T  # V' = U - W S^T
        vb = bf16(vnew, r)
        out = qg @ sb.T + p_mat @ vb  # Y = (Gamma Q) S^T + P V'
        y[c0:c1] = out[: c1 - c0]
        s = total * s + vb.T @ kd  # S = Gamma_C S + (decayed V')^T K
    return y, s


def main():
    r = "--round" in sys.argv
    rng = np.random.default_rng(7)
    worst = 0.0
    for steps, dk, dv, zero in [(64, 64, 64, 0), (65, 128, 64, 0), (200, 64, 128, 1),
                                (1000, 128, 128, 0), (130, 32, 48, 1)]:
        q = rng.uniform(-1, 1, (steps, dk))
        k = rng.uniform(-1, 1, (steps, dk))
        k /= np.linalg.norm(k, axis=1, keepdims=True)
        v = rng.uniform(-1, 1, (steps, dv))
        g = rng.uniform(0.5, 1.0, steps)
        if zero:
            g[rng.integers(0, steps, 3)] = 0.0  # a gate of zero resets the state
        beta = rng.uniform(0.2, 1.0, steps)
        s = rng.uniform(-1, 1, (dv, dk))
        if r:
            q, k, v = bf16(q, True), bf16(k, True), bf16(v, True)
        y0, s0 = recurrence(q, k, v, g, beta, s)
        y1, s1 = chunked(q, k, v, g, beta, s, r)
        ey = np.max(np.abs(y1 - y0) / np.maximum(1.0, np.abs(y0)))
        es = np.max(np.abs(s1 - s0) / np.maximum(1.0, np.abs(s0)))
        worst = max(worst, ey, es)
        print(f"T={steps:5d} Dk={dk:3d} Dv={dv:3d} zero gates={zero}: y {ey:.3e}  state {es:.3e}")
    limit = 3e-2 if r else 1e-10
    print("worst", f"{worst:.3e}", "ok" if worst < limit else "FAILED")
    sys.exit(0 if worst < limit else 1)


if __name__ == "__main__":
    main()

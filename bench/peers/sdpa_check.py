"""Holds nuvec's causal prefill attention against PyTorch's on the same inputs: reads the
safetensors file `sdpa_dump` wrote (q, k, v, out: [B, H, L, D] bf16, scale 1/sqrt(D)), runs
PyTorch's `scaled_dot_product_attention` on the inputs, and compares both with a float64
reference on sampled rows (every head, rows spread over the sequence, the last one included).
Exits 1 when nuvec's error is more than twice PyTorch's (plus a bf16 step).

    cargo run --release --example sdpa_dump -- /tmp/sdpa.safetensors     (GPU machine)
    python3 bench/peers/sdpa_check.py /tmp/sdpa.safetensors [ROWS]
"""

import math
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def main(path, rows):
    t = load_file(path)
    q, k, v, got = t["q"], t["k"], t["v"], t["out"]
    b, h, length, d = q.shape
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    theirs = F.scaled_dot_product_attention(q.to(dev), k.to(dev), v.to(dev), is_causal=True).cpu()
    scale = 1.0 / math.sqrt(d)
    picks = sorted({int(i * (length - 1) / max(rows - 1, 1)) for i in range(rows)})
    err = {"nuvec": [0.0, 0.0, 0], "torch": [0.0, 0.0, 0]}  # max, sum of squares, count
    top = 0.0
    for bi in range(b):
        for hi in range(h):
            kk = k[bi, hi].double()
            vv = v[bi, hi].double()
            for i in picks:
                s = (kk[: i + 1] @ q[bi, hi, i].double()) * scale
                p = torch.softmax(s, dim=0)
                want = p @ vv[: i + 1]
                top = max(top, want.abs().max().item())
                for name, arr in (("nuvec", got), ("torch", theirs)):
                    e = (arr[bi, hi, i].double() - want).abs()
                    err[name][0] = max(err[name][0], e.max().item())
                    err[name][1] += (e * e).sum().item()
                    err[name][2] += e.numel()
    both = (got.double() - theirs.double()).abs().max().item()
    for name, (mx, ss, n) in err.items():
        print(f"{name:6s} against float64: max {mx:.3e}, rms {math.sqrt(ss / n):.3e} "
              f"({len(picks)} rows x {b * h} heads, largest output {top:.3e})")
    print(f"nuvec against torch, every element: max {both:.3e}")
    step = 2.0 ** -8 * max(top, 1e-30)
    ok = err["nuvec"][0] <= 2 * err["torch"][0] + step
    print("sdpa_check:", "ok" if ok else "nuvec's error is more than twice PyTorch's")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 64))

#!/usr/bin/env python3
"""Counts what autograd keeps for backward in one decoder layer of zerofit's Llama model (docs/planning.md,
"The GPU workers' build"), with the installed PyTorch, and compares it with the planner's 1.13 eager terms.

The layer is written op for op as worker/torch/model/llama_model.cc writes it (RMSNorm in fp32, rotary, eager
attention with repeated K/V and an fp32 softmax, SwiGLU). Every tensor autograd saves is recorded through
torch.autograd.graph.saved_tensors_hooks; tensors sharing storage are counted once, and the weights, the rotary
tables and the mask are left out (the planner counts those elsewhere). The layer's input counts (in fp32 the
first norm's pow keeps it; the planner counts each layer's input with that layer). It prints each saved
tensor's bytes per token and the total against 24 H + 8 I + 8 Q + 6 heads x T + 8 (bf16) or 32 H + 16 I + 16 Q +
4 heads x T + 8 (fp32), and against the same less 8 H, what LibTorch 2.x keeps (planner/memory_model.cc).

Needs PyTorch >= 1.10 (Debian 12: apt-get install python3-torch, 1.13.1; /usr/bin/python3). A benchmark-side
tool, never a runtime dependency.

  /usr/bin/python3 scripts/layer_saved_bytes.py [--dtype bf16|fp32]
"""
import argparse
import math

import torch


def rms_norm(x, weight):
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + 1e-5)
    return weight * h.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    args = ap.parse_args()
    dt = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    batch, seq, hidden, inter, heads, kv_heads = 2, 64, 256, 704, 8, 4
    head_dim = hidden // heads
    torch.manual_seed(0)

    def weight(*shape):
        return (0.02 * torch.randn(*shape)).to(dt).requires_grad_(True)

    wq, wk, wv = weight(heads * head_dim, hidden), weight(kv_heads * head_dim, hidden), weight(kv_heads * head_dim, hidden)
    wo, wg, wu, wd = weight(hidden, heads * head_dim), weight(inter, hidden), weight(inter, hidden), weight(hidden, inter)
    norm1, norm2 = torch.ones(hidden, dtype=dt, requires_grad=True), torch.ones(hidden, dtype=dt, requires_grad=True)
    cos, sin = torch.randn(seq, head_dim, dtype=dt), torch.randn(seq, head_dim, dtype=dt)
    mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    linear = torch.nn.functional.linear

    def layer(x):
        xn = rms_norm(x, norm1)
        q = linear(xn, wq).view(batch, seq, heads, head_dim).transpose(1, 2)
        k = linear(xn, wk).view(batch, seq, kv_heads, head_dim).transpose(1, 2)
        v = linear(xn, wv).view(batch, seq, kv_heads, head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = heads // kv_heads
        keys = k.unsqueeze(2).expand(batch, kv_heads, rep, seq, head_dim).reshape(batch, heads, seq, head_dim)
        values = v.unsqueeze(2).expand(batch, kv_heads, rep, seq, head_dim).reshape(batch, heads, seq, head_dim)
        scores = torch.matmul(q, keys.transpose(2, 3)) * head_dim ** -0.5
        probs = torch.softmax(scores.masked_fill(mask, -math.inf), -1, dtype=torch.float32).to(dt)
        out = torch.matmul(probs, values).transpose(1, 2).contiguous().reshape(batch, seq, heads * head_dim)
        h = x + linear(out, wo)
        hn = rms_norm(h, norm2)
        return h + linear(torch.nn.functional.silu(linear(hn, wg)) * linear(hn, wu), wd)

    saved = {}

    def pack(t):
        saved.setdefault(t.storage().data_ptr(), (t.storage().size() * t.element_size(), tuple(t.shape), t.dtype))
        return t

    x = torch.randn(batch, seq, hidden, dtype=dt, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x)
    excluded = {t.storage().data_ptr() for t in (wq, wk, wv, wo, wg, wu, wd, norm1, norm2, cos, sin, mask)}
    tokens = batch * seq
    total = 0
    for ptr, (nbytes, shape, dtype) in saved.items():
        if ptr in excluded:
            continue
        total += nbytes
        print(f"  {str(shape):22s} {str(dtype):15s} {nbytes / tokens:10.2f} B per token")
    q = heads * head_dim
    if dt == torch.bfloat16:
        terms = 24 * hidden + 8 * inter + 8 * q + 6 * heads * seq + 8
    else:
        terms = 32 * hidden + 16 * inter + 16 * q + 4 * heads * seq + 8
    # 2.x's mean() saves its input's element count, not the input: 8 B per hidden element less (two norms).
    print(f"torch {torch.__version__}, {args.dtype}: {total / tokens:.2f} B per token and layer kept for backward "
          f"(the 0.06 is the fp64 scale); the planner's terms: {terms} B under 1.x, {terms - 8 * hidden} B under 2.x")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Does the vocabulary's size cost the LM head's GEMMs on this GPU? Times the three products of a
tied LM head (logits = h Eᵀ, the hidden states' gradient dlogits E, the embedding's gradient
dlogitsᵀ h) in bf16 with f32 accumulation (PyTorch's cuBLAS), at the model's vocabulary V and at
V padded to a multiple of 64, in one run. V = 50257 (GPT-2) and 30522 (BERT) make the logits'
leading dimension a width whose rows are not 16-byte aligned, which tensor-core GEMM kernels
want; llm.c pads GPT-2's to 50304 for that reason. saobp's bf16 step spends 26 ms in GEMMs
against about 7 at the card's bf16 rate (docs/performance.md); this says how much of that the
head's alignment could be.

    python3 tools/bench_gemm_align.py [--device cuda] [--tokens 16384] [--hidden 256 512]
                                      [--vocab 50257 30522] [--reps 20] [--json FILE]

Prints one line per (vocabulary, hidden, product): ms and TFLOP/s at V and at the padded V, and
the padded / unpadded speed. Timing: CUDA events around `reps` calls after 3 warm-up calls (on
the CPU, wall time: a smoke test of the script, not a measurement).
"""
import argparse
import json
import time

import torch


def timed(fn, reps, device):
    for _ in range(3):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(end) / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) * 1e3 / reps


def products(n, h, v, device, dtype):
    """The head's three products at vocabulary v, as (name, flops, callable)."""
    g = torch.Generator(device="cpu").manual_seed(42)
    hid = torch.randn(n, h, generator=g).to(device, dtype)
    emb = torch.randn(v, h, generator=g).to(device, dtype)
    dlogits = torch.randn(n, v, generator=g).to(device, dtype)
    flops = 2.0 * n * h * v
    return [
        ("logits = h E^T", flops, lambda: hid @ emb.t()),
        ("dh = dlogits E", flops, lambda: dlogits @ emb),
        ("dE = dlogits^T h", flops, lambda: dlogits.t() @ hid),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tokens", type=int, default=16384, help="B·T rows of the logits (GPT-2 at B=32, T=512)")
    ap.add_argument("--hidden", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--vocab", type=int, nargs="+", default=[50257, 30522])
    ap.add_argument("--pad", type=int, default=64, help="pad the vocabulary to a multiple of this")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda":
        print(f"device: {torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    rows = []
    for v in args.vocab:
        vp = (v + args.pad - 1) // args.pad * args.pad
        for h in args.hidden:
            at_v = products(args.tokens, h, v, device, torch.bfloat16)
            at_vp = products(args.tokens, h, vp, device, torch.bfloat16)
            for (name, flops, fn), (_, flops_p, fn_p) in zip(at_v, at_vp):
                ms, ms_p = timed(fn, args.reps, device), timed(fn_p, args.reps, device)
                row = {"vocab": v, "padded": vp, "hidden": h, "tokens": args.tokens, "product": name,
                       "ms": ms, "ms_padded": ms_p, "tflops": flops / ms / 1e9, "tflops_padded": flops_p / ms_p / 1e9}
                rows.append(row)
                print(f"V {v} -> {vp}  H {h}  {name:18s}  {ms:8.3f} ms {row['tflops']:7.1f} TFLOP/s   "
                      f"padded {ms_p:8.3f} ms {row['tflops_padded']:7.1f} TFLOP/s   "
                      f"padded speed-up {ms / ms_p:5.2f}x")
            del at_v, at_vp
            if device.type == "cuda":
                torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""gen_torch_refs.py — record reference sequences from PyTorch itself for
tests/train/test_policy.c (run with torch 2.13.0 CPU, e.g.
  python3 -m venv /work/venv-train && /work/venv-train/bin/pip install torch==2.13.0
  /work/venv-train/bin/python tests/train/gen_torch_refs.py tests/train/data).

Writes, as text (floats as 8 hex digits of their fp32 bits):
  grad_scaler.txt  torch.amp.GradScaler("cpu") driving torch.optim.SGD on one
                   fp32 parameter, over gradient sequences with inf, -inf and
                   NaN steps: per step the found_inf of the unscale, whether
                   the optimizer step ran, the unscaled gradient, the scale
                   and the growth tracker after update().
  clip.txt         torch.nn.utils.clip_grad_norm_(max_norm, norm 2) over three
                   fp32 gradients: per case max_norm, the total norm, and the
                   gradients before and after.
  adamw.txt        torch.optim.AdamW (foreach=False, the CPU default) on a
                   48-element fp32 parameter: the initial parameter, then per
                   step the gradient and the parameter, exp_avg, exp_avg_sq
                   after step(), and torch.sqrt(exp_avg_sq).
"""
import os
import struct
import sys

import torch


def h(x):
    return "%08x" % struct.unpack("<I", struct.pack("<f", float(x)))[0]


def scaler_case(out, name, init, growth, backoff, interval, grads):
    p = torch.nn.Parameter(torch.zeros(4))
    opt = torch.optim.SGD([p], lr=1.0)
    sc = torch.amp.GradScaler("cpu", init_scale=init, growth_factor=growth,
                              backoff_factor=backoff, growth_interval=interval)
    out.write("case %s %s %s %s %d %d\n" % (name, h(init), h(growth), h(backoff),
                                            interval, len(grads)))
    calls = [0]
    sgd_step = opt.step

    def counted(*a, **k):
        calls[0] += 1
        return sgd_step(*a, **k)

    opt.step = counted
    for g in grads:
        opt.zero_grad()
        # backward of the scaled loss leaves grad = g * scale (fp32)
        loss = (p * torch.tensor(g, dtype=torch.float32)).sum()
        sc.scale(loss).backward()
        scaled = p.grad.clone()
        sc.unscale_(opt)
        # _found_inf_per_device reads the unscale's result (_check_inf_per_device
        # would run the check again, on the unscaled values)
        found = sum(v.item() for v in sc._found_inf_per_device(opt).values())
        unscaled = p.grad.clone()
        before = calls[0]
        sc.step(opt)
        ran = calls[0] - before
        sc.update()
        out.write("step %d %d %s %s %s %d\n" % (
            int(found != 0), ran, " ".join(h(v) for v in scaled.tolist()),
            " ".join(h(v) for v in unscaled.tolist()), h(sc.get_scale()),
            int(sc._growth_tracker.item())))


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__) + "/data"
    inf, nan = float("inf"), float("nan")
    g = torch.Generator().manual_seed(11)
    with open(os.path.join(d, "grad_scaler.txt"), "w") as out:
        out.write("# torch %s torch.amp.GradScaler(\"cpu\") + SGD(lr=1), 4-element fp32 grads\n"
                  % torch.__version__)
        seq = []
        for i in range(60):
            v = (torch.rand(4, generator=g) * 2 - 1).tolist()
            if i in (3, 4, 17, 30, 31, 32, 45):
                v[i % 4] = [inf, -inf, nan][i % 3]
            seq.append(v)
        scaler_case(out, "default_interval3", 65536.0, 2.0, 0.5, 3, seq)
        scaler_case(out, "growth1.5_backoff0.25", 1024.0, 1.5, 0.25, 2, seq)
        # growth past fp32's range: the scale stays finite
        scaler_case(out, "saturate", 2.0 ** 120, 16.0, 0.5, 1, seq[:12])
        # a run of overflows: the scale shrinks towards 0
        bad = [[inf, 0.0, 0.0, 0.0]] * 40 + seq[:5]
        scaler_case(out, "underflow", 2.0 ** -100, 2.0, 0.125, 2, bad)
    torch.manual_seed(5)
    n, steps = 48, 25
    p = torch.nn.Parameter((torch.rand(n) * 2 - 1))
    opt = torch.optim.AdamW([p], lr=1e-2, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01, foreach=False)
    with open(os.path.join(d, "adamw.txt"), "w") as out:
        out.write("# torch %s AdamW(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, "
                  "weight_decay=0.01, foreach=False), fp32\n" % torch.__version__)
        out.write("adamw %d %d\n" % (n, steps))
        out.write("p0 %s\n" % " ".join(h(v) for v in p.detach().tolist()))
        for s in range(steps):
            gr = torch.randn(n) * (10.0 ** (s % 5 - 3))
            p.grad = gr.clone()
            opt.step()
            st = opt.state[p]
            out.write("g %s\n" % " ".join(h(v) for v in gr.tolist()))
            out.write("p %s\n" % " ".join(h(v) for v in p.detach().tolist()))
            out.write("m %s\n" % " ".join(h(v) for v in st["exp_avg"].tolist()))
            out.write("v %s\n" % " ".join(h(v) for v in st["exp_avg_sq"].tolist()))
            # torch.sqrt on CPU (MKL's vsSqrt here) is not always correctly
            # rounded: the test needs to know where it was not
            out.write("s %s\n" % " ".join(h(v) for v in st["exp_avg_sq"].sqrt().tolist()))

    with open(os.path.join(d, "clip.txt"), "w") as out:
        out.write("# torch %s torch.nn.utils.clip_grad_norm_, norm_type 2, "
                  "3 tensors of 5, 16, 33 fp32 elements\n" % torch.__version__)
        for max_norm in (0.5, 3.0, 100.0):
            ps = [torch.nn.Parameter(torch.zeros(k)) for k in (5, 16, 33)]
            for q in ps:
                q.grad = torch.randn(q.shape[0])
            before = [q.grad.clone() for q in ps]
            total = torch.nn.utils.clip_grad_norm_(ps, max_norm)
            out.write("clip %s %s\n" % (h(max_norm), h(total.item())))
            for b, q in zip(before, ps):
                out.write("g %d %s\n" % (b.shape[0], " ".join(h(v) for v in b.tolist())))
                out.write("c %d %s\n" % (b.shape[0], " ".join(h(v) for v in q.grad.tolist())))


main()

#!/usr/bin/env python3
"""oneDNN's bf16 GEMM, as PyTorch runs it on CPU, on one weight shape: F.linear(x bf16 [n, k], W bf16 [rows, k]).

PyTorch's CPU build hands a bf16 linear to oneDNN's matmul (on AMX machines its brgemm AMX kernel: the first call
is run once under ONEDNN_VERBOSE=1 and the implementation it names is printed). The weight cycles through distinct
copies totalling >= 2 GiB, so every call streams it from memory, as `deepinfer bench-ops` does; each sample is one
pass over all copies, and the median sample gives the time per call.

    onednn_linear.py ROWS K THREADS ITERS N[,N...]
prints one line per n: "n=N  T us/op  G GFLOP/s". Needs torch (scripts/setup.sh --with-torch puts it in .venv).
"""
import os
import subprocess
import sys
import time


def implementation(rows, k, threads):
    # one call in a child process with oneDNN's verbose log: which kernel runs (e.g. brg_matmul:avx10_1_512_amx)
    code = ("import torch; torch.set_num_threads(%d); "
            "torch.nn.functional.linear(torch.ones(256, %d, dtype=torch.bfloat16), "
            "torch.ones(%d, %d, dtype=torch.bfloat16))" % (threads, k, rows, k))
    env = dict(os.environ, ONEDNN_VERBOSE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout
    for line in out.splitlines():
        if ",exec," in line and ",matmul," in line:
            return line.split(",")[6]
    return "not oneDNN (no matmul in ONEDNN_VERBOSE)"


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__.split("\n\n")[2].strip())
    rows, k, threads, iters = (int(a) for a in sys.argv[1:5])
    ns = [int(n) for n in sys.argv[5].split(",")]
    import torch
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__}, {threads} threads, oneDNN matmul: {implementation(rows, k, threads)}",
          flush=True)
    weight_bytes = rows * k * 2
    copies = max(2, -(-(2 << 30) // weight_bytes))
    gen = torch.Generator().manual_seed(7)
    ws = [torch.randn(rows, k, generator=gen).to(torch.bfloat16) for _ in range(copies)]
    for n in ns:
        x = torch.randn(n, k, generator=gen).to(torch.bfloat16)
        for w in ws:  # warm-up pass: the primitive created, every copy touched
            torch.nn.functional.linear(x, w)
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            for w in ws:
                torch.nn.functional.linear(x, w)
            samples.append((time.perf_counter() - t0) / copies)
        samples.sort()
        t = samples[len(samples) // 2]
        print(f"n={n}  {t * 1e6:.1f} us/op  {2 * n * rows * k / t / 1e9:.1f} GFLOP/s", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""deepinfer's prefill GEMMs against oneDNN's (PyTorch's CPU matmul) in paired rounds, as fractions of the tile peak.

The prefill target of issue #8 is a fraction of the machine's measured peak (on AMX machines the tile peak, which
`bench-ops` measures in the same run). This sets the best-known peer beside it: oneDNN's bf16 GEMM (its brgemm AMX
kernel on AMX machines), on the same shape, weights streamed from >= 2 GiB of copies in both. Each round runs both
engines on a case back to back, swapping which goes first every round (a shared machine's bandwidth drifts within
minutes); the table gives each cell's median time, ratio within the pairs and its range, and each engine's share
of the tile peak `bench-ops` measured in that round.

    paired.py --deepinfer build/release/tools/deepinfer [--python .venv/bin/python] [--rounds 3]
              [--rows 64,256,1024] [--threads 2] [--iters 3] [--cases bf16,fp8] [--no-hugepages]

Cases (both against oneDNN's bf16 x bf16 -> bf16 linear on 8192x4096, the shape of wo_a):
  bf16  deepinfer gemm_bf16 on the bf16 weight: the same operation, the same bytes.
  fp8   deepinfer gemm_fp8_bf16x on wo_a as the checkpoint ships it (fp8 e4m3, e8m0 scales per 32x32 block): half the
        weight bytes; PyTorch users hold such a weight dequantized to bf16.
deepinfer's weights go in its arena's 2 MB pages as it runs (--no-hugepages: 4 KB pages); PyTorch's tensors come from
its allocator, in 4 KB pages where transparent huge pages are madvise-only (Debian's default).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROWS, K = 8192, 4096
# case -> (bench-ops --only, kernel)
CASES = {"bf16": ("gemm_bf16", "gemm_bf16"), "fp8": ("gemm_fp8_bf16x", "gemm_fp8_bf16x")}
HERE = os.path.dirname(os.path.abspath(__file__))


def run_onednn(args, case):
    # (every case runs the same bf16 linear: each case pairs it with its own deepinfer run, back to back)
    cmd = [args.python, os.path.join(HERE, "onednn_linear.py"), str(ROWS), str(K), str(args.threads),
           str(args.iters), args.rows]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    times = {int(n): float(us) for n, us in re.findall(r"n=(\d+)\s+([\d.]+) us/op", out)}
    if not times:
        sys.exit(f"paired.py: no timings from {' '.join(cmd)}:\n{out}")
    impl = re.search(r"oneDNN matmul: (\S+)", out)
    IMPL["onednn"] = impl.group(1) if impl else "?"
    return times, None


def run_deepinfer(args, case):
    only, kernel = CASES[case]
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [args.deepinfer, "bench-ops", "--threads", str(args.threads), "--iters", str(args.iters), "--only",
               only, "--json", f.name, "--rows"] + args.rows.split(",")
        if args.no_hugepages:
            cmd.append("--no-hugepages")
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        report = json.load(f)
    times = {r["n"]: r["us_per_call"] for r in report["results"] if r["kernel"] == kernel}
    if not times:
        sys.exit(f"paired.py: no {kernel} results from {' '.join(cmd)}")
    return times, report["tile_gflops"]


IMPL = {}
ENGINES = [("onednn", run_onednn), ("deepinfer", run_deepinfer)]


def case_list(text):
    """--cases: comma-separated names of CASES."""
    cases = text.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown case '{unknown[0]}' (known: {', '.join(CASES)})")
    return cases


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--deepinfer", required=True)
    p.add_argument("--python", default=sys.executable, help="a Python with torch (default: this one)")
    p.add_argument("--rounds", type=positive, default=3)
    p.add_argument("--rows", default="64,256,1024", help="activation rows n, comma-separated")
    p.add_argument("--threads", type=positive, default=2)
    p.add_argument("--iters", type=positive, default=3, help="timed samples per case and n (median)")
    p.add_argument("--cases", type=case_list, default=list(CASES), help="of: " + ",".join(CASES))
    p.add_argument("--no-hugepages", action="store_true", help="deepinfer's weights in 4 KB pages")
    args = p.parse_args()
    cases = args.cases
    ns = [int(n) for n in args.rows.split(",")]
    samples = {c: {n: [] for n in ns} for c in cases}  # [(oneDNN us, deepinfer us, tile peak GFLOP/s)] per round
    for r in range(args.rounds):
        for i, case in enumerate(cases):
            got, peak = {}, None
            for engine, run in (ENGINES if (r + i) % 2 == 0 else ENGINES[::-1]):
                print(f"round {r + 1}/{args.rounds}: {case} {engine}", file=sys.stderr, flush=True)
                got[engine], measured = run(args, case)
                peak = measured or peak
            if not peak:
                sys.exit("paired.py: bench-ops measured no tile peak (a CPU without AMX tiles?)")
            for n in ns:
                if n in got["onednn"] and n in got["deepinfer"]:
                    samples[case][n].append((got["onednn"][n], got["deepinfer"][n], peak))
    print(f"# {args.rounds} paired rounds, {args.threads} threads, {ROWS}x{K}, oneDNN {IMPL.get('onednn', '?')}; "
          "ratio = oneDNN time / deepinfer time within each pair (> 1: deepinfer faster); % of the tile peak "
          "bench-ops measured in the same round")
    print(f"{'case':5} {'n':>5} {'oneDNN us':>10} {'deepinfer us':>13} {'ratio':>6}  {'range':9}  "
          f"{'oneDNN %peak':>12} {'deepinfer %peak':>15}")
    for case in cases:
        for n in ns:
            pairs = samples[case][n]
            if not pairs:
                continue
            ratios = [o / d for o, d, _ in pairs]
            share = lambda us, peak: 100 * 2 * n * ROWS * K / (us * 1e-6) / (peak * 1e9)
            o_pct = [share(o, pk) for o, _, pk in pairs]
            d_pct = [share(d, pk) for _, d, pk in pairs]
            print(f"{case:5} {n:>5} {statistics.median(o for o, _, _ in pairs):>10.1f} "
                  f"{statistics.median(d for _, d, _ in pairs):>13.1f} {statistics.median(ratios):>6.2f}  "
                  f"{min(ratios):.2f}-{max(ratios):.2f}  {min(o_pct):>5.0f}-{max(o_pct):.0f}%"
                  f"{min(d_pct):>10.0f}-{max(d_pct):.0f}%")


if __name__ == "__main__":
    main()

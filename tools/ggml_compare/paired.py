#!/usr/bin/env python3
"""ggml against deepinfer in paired rounds: each case's two runs back to back, their order swapped every round.

A single pass of ggml, then deepinfer, then ggml again put minutes between a case's two runs; on a shared machine
whose read bandwidth drifts by 20-40% within minutes, such a ratio measures the drift as much as the engines. Here
each round runs one case (all its row counts) in ggml and then in deepinfer, or the other way round, and the ratio
is taken within the pair; the table gives each cell's median ratio over the rounds and its range.
side_by_side.sh builds ggml and calls this (ROUNDS=3 ISA=avx512nobf16 side_by_side.sh ...).

    paired.py --ggml WORK/ggml_bench --deepinfer build/release/tools/deepinfer [--isa avx2] [--rounds 3]
              [--rows 1,4,16,64] [--threads 2] [--iters 3] [--cases moe,w1,...] [--pages 4k|huge|as-run]

--pages picks the engines' weight pages: 4k (default; both in 4 KB pages: `bench-ops --no-hugepages`, and ggml's
buffers as they come where transparent huge pages are madvise-only), huge (both in 2 MB pages: deepinfer's weight
arena as it runs, ggml's weight buffer madvised before its first touch, as THP "always" gives ggml's anonymous
buffers) or as-run (each as it runs where THP is madvise-only, Debian's default: deepinfer's arena asks for 2 MB
pages, ggml's buffers stay in 4 KB ones).

The environment passes through (DEEPINFER_AVX_VNNI for the AVX2 table's forms; OMP_WAIT_POLICY, which
side_by_side.sh leaves unset: libgomp's default, as llama.cpp runs).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

# case -> (ggml_bench arguments before "threads iters rows", its placement, bench-ops --only, kernel, weight).
# ggml's weights go where llama.cpp's loader puts them (auto: AMX for q8_0 where the CPU has AMX-INT8, CPU_REPACK
# for MXFP4, the plain buffer for bf16); the table names the buffer each case ran from.
CASES = {
    "moe": (["mmid", "mxfp4", "2304", "5120", "384", "6"], "auto", "moe", "gemm_fp4_grouped", "moe w1"),
    "w1": (["mm", "mxfp4", "2304", "5120"], "auto", "expert w1", "gemm_fp4", "expert w1"),
    "w2": (["mm", "mxfp4", "5120", "2304"], "auto", "expert w2", "gemm_fp4", "expert w2"),
    "wq_b": (["mm", "q8_0", "32768", "1280"], "auto", "wq_b", "gemm_fp8", "wq_b"),
    "wo_b": (["mm", "q8_0", "5120", "8192"], "auto", "wo_b", "gemm_fp8", "wo_b"),
    "wo_a": (["mm", "q8_0", "8192", "4096"], "auto", "gemm_fp8_bf16x", "gemm_fp8_bf16x", "wo_a"),
    "head": (["mm", "bf16", "129280", "5120"], "auto", "head", "gemm_f32_bf16w", "head"),
}


def run_ggml(args, case, rows):
    pre, mode = CASES[case][0], CASES[case][1]
    cmd = [args.ggml] + pre + [str(args.threads), str(args.iters), rows, mode, GGML_PAGES[args.pages]]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    times = {int(n): float(us) for n, us in re.findall(r"n=(\d+)\s+([\d.]+) us/op", out)}
    if not times:
        sys.exit(f"paired.py: no timings from {' '.join(cmd)}:\n{out}")
    buffer = re.search(r"(\S+) buffer", out)
    BUFFERS[case] = buffer.group(1) if buffer else "?"
    return times, None  # (no bandwidth probe)


def run_deepinfer(args, case, rows):
    _, _, only, kernel, weight = CASES[case]
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        pages = [] if DEEPINFER_HUGE[args.pages] else ["--no-hugepages"]
        cmd = [args.deepinfer, "bench-ops"] + pages + ["--threads", str(args.threads), "--iters", str(args.iters),
                                                       "--only", only, "--json", f.name, "--rows"] + rows.split(",")
        if args.isa:
            cmd += ["--isa", args.isa]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        report = json.load(f)
    times = {r["n"]: r["us_per_call"] for r in report["results"]
             if r["kernel"] == kernel and r["weight"].startswith(weight)}
    if not times:
        sys.exit(f"paired.py: no {kernel} {weight} results from {' '.join(cmd)}")
    return times, report["read_gbps"]


# --pages -> ggml_bench's page mode, and whether deepinfer's weights go in its arena's 2 MB pages
GGML_PAGES = {"4k": "4k", "huge": "huge", "as-run": "4k"}
DEEPINFER_HUGE = {"4k": False, "huge": True, "as-run": True}
BUFFERS = {}  # case -> the ggml buffer type its weights ran from
ENGINES = [("ggml", run_ggml), ("deepinfer", run_deepinfer)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ggml", required=True, help="ggml_bench built by side_by_side.sh")
    p.add_argument("--deepinfer", required=True)
    p.add_argument("--isa", default="", help="deepinfer bench-ops --isa (default: its best for this CPU)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rows", default="1,4,16,64")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--cases", default=",".join(CASES), help="of: " + ",".join(CASES))
    p.add_argument("--pages", default="4k", choices=list(GGML_PAGES), help="the engines' weight pages")
    args = p.parse_args()
    cases = args.cases.split(",")
    for c in cases:
        if c not in CASES:
            p.error(f"--cases: unknown case '{c}' (known: {', '.join(CASES)})")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    ns = [int(n) for n in args.rows.split(",")]
    # samples[case][n] = [(ggml us, deepinfer us)], one pair per round
    samples = {c: {n: [] for n in ns} for c in cases}
    bandwidth = []
    for r in range(args.rounds):
        for i, case in enumerate(cases):
            order = ENGINES if (r + i) % 2 == 0 else ENGINES[::-1]
            got = {}
            for engine, run in order:
                print(f"round {r + 1}/{args.rounds}: {case} {engine}", file=sys.stderr, flush=True)
                got[engine], gbps = run(args, case, args.rows)
                if gbps:
                    bandwidth.append(gbps)
            for n in ns:
                g, d = got["ggml"].get(n), got["deepinfer"].get(n)
                if g is not None and d is not None:
                    samples[case][n].append((g, d))
    print(f"# {args.rounds} paired rounds, {args.threads} threads, {args.pages} pages, "
          f"deepinfer {args.isa or 'native'} "
          f"(DEEPINFER_AVX_VNNI={os.environ.get('DEEPINFER_AVX_VNNI', 'unset')}); deepinfer's read probe "
          f"{min(bandwidth):.1f}-{max(bandwidth):.1f} GB/s")
    print("# ratio = ggml time / deepinfer time within each pair (> 1: deepinfer faster); median [range]")
    print(f"{'case':6} {'n':>3} {'ggml us':>10} {'deepinfer us':>13} {'ratio':>7}  {'range':9}  ggml buffer")
    for case in cases:
        for n in ns:
            pairs = samples[case][n]
            if not pairs:
                continue
            ratios = [g / d for g, d in pairs]
            print(f"{case:6} {n:>3} {statistics.median(g for g, _ in pairs):>10.1f} "
                  f"{statistics.median(d for _, d in pairs):>13.1f} {statistics.median(ratios):>7.2f}  "
                  f"{min(ratios):.2f}-{max(ratios):.2f}  {BUFFERS.get(case, '?')}")


if __name__ == "__main__":
    main()

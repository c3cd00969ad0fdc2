"""`deepinfer bench-ops` refuses what it would otherwise ignore: an option its mode does not read (--rowwise reads
none, --in-cache reads --isa, --rows and --only, --per-call has no --thread-profile, --iters or --json), and an --only
that selects nothing, naming what there is. --in-cache keeps only the kernels --only names. Env: DEEPINFER_BIN.
"""
import os
import re
import subprocess
import unittest

BIN = os.environ.get("DEEPINFER_BIN", "build/release/tools/deepinfer")


def bench_ops(*args, timeout=120):
    return subprocess.run([BIN, "bench-ops", *map(str, args)], capture_output=True, text=True, timeout=timeout)


class BenchOpsOptionsTest(unittest.TestCase):
    def assert_refused(self, args, *named):
        r = bench_ops(*args)
        self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
        for text in named:
            self.assertIn(text, r.stderr, args)
        self.assertNotIn("GB/s", r.stdout, args)  # refused before measuring anything

    def test_options_a_mode_does_not_read(self):
        self.assert_refused(["--rowwise", "--rows", 4], "--rowwise does not read --rows")
        self.assert_refused(["--rowwise", "--only", "fp8", "--threads", 1], "--only", "--threads")
        self.assert_refused(["--in-cache", "--threads", 1, "--iters", 3], "--in-cache does not read",
                            "--threads", "--iters")
        self.assert_refused(["--in-cache", "--json", "-"], "--in-cache does not read --json")
        self.assert_refused(["--per-call", 3, "--thread-profile"], "--per-call does not read --thread-profile")
        self.assert_refused(["--per-call", 3, "--json", "-", "--iters", 2], "--json", "--iters")
        self.assert_refused(["--per-call", 3, "--in-cache"], "--in-cache does not read --per-call")

    def test_only_that_selects_nothing(self):
        self.assert_refused(["--only", "no-such-weight"], "--only 'no-such-weight' matches no kernel or weight",
                            "wq_b (gemm_fp8)", "expert w2 (gemm_fp4)")
        self.assert_refused(["--in-cache", "--only", "wo_b"], "--only 'wo_b' matches no in-cache kernel",
                            "gemm_fp8, gemm_fp4")

    def test_in_cache_keeps_the_kernels_only_names(self):
        for only, kernels in (("bf16w", {"gemm_f32_bf16w"}), ("gemm_f32", {"gemm_f32_bf16w", "gemm_f32"})):
            r = bench_ops("--in-cache", "--rows", 1, "--only", only)
            self.assertEqual(r.returncode, 0, r.stderr)
            rows = [line.split() for line in r.stdout.splitlines() if re.match(r"^gemm_\w+\s+\d+x\d+\s+1\s", line)]
            self.assertEqual({row[0] for row in rows}, kernels, r.stdout)
            self.assertEqual(len(rows), len(kernels), r.stdout)


if __name__ == "__main__":
    unittest.main()

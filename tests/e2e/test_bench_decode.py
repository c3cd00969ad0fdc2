"""`deepinfer bench-decode --op-profile --json` on the built-in tiny checkpoint: every block is timed against its
roofline, and every linear of the op profile carries the flops its name implies (2 x rows x cols x activation rows per
GEMM) and a roofline that is the longer of its bytes at the measured bandwidth and its flops at the measured peak.
Env: DEEPINFER_BIN.
"""
import json
import os
import re
import subprocess
import unittest

BIN = os.environ.get("DEEPINFER_BIN", "build/release/tools/deepinfer")


class BenchDecodeTest(unittest.TestCase):
    def test_op_profile_flops_and_rooflines(self):
        batch, steps = 2, 2
        args = ["--batch", batch, "--steps", steps, "--rounds", 1, "--context", 16, "--threads", 2]
        r = subprocess.run([BIN, "bench-decode", *map(str, args), "--op-profile", "--json"], capture_output=True,
                           text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        report = json.loads(lines[-1])
        self.assertIn("x roof", r.stdout)  # the printed table
        self.assertEqual(report["batch"], batch)
        self.assertGreater(len(report["blocks"]), 0)
        for block in report["blocks"]:
            self.assertGreater(block["seconds"], 0)
            self.assertGreater(block["roofline_seconds"], 0)
        bandwidth = report["read_bandwidth_gbs"] * 1e9
        linears = report["linears"]
        self.assertGreater(len(linears), 3)
        single = re.compile(r"^(?P<kind>.+?) (?P<rows>\d+)x(?P<cols>\d+) n(?P<n>\d+)$")
        grouped = re.compile(r"^(?P<kind>.+?) grouped (?P<g>\d+)x (?P<rows>\d+)x(?P<cols>\d+) n(?P<n>\d+)$")
        checked = full_batch = 0
        for lin in linears:
            name = lin["linear"]
            self.assertGreater(lin["calls"], 0, name)
            self.assertGreater(lin["seconds"], 0, name)
            self.assertGreater(lin["bytes"], 0, name)
            self.assertGreater(lin["peak_gflops"], 0, name)
            self.assertEqual(lin["fp32_math"], name.startswith("f32"), name)
            m = grouped.match(name) or single.match(name)
            if m and "mixed shapes" not in name:
                per_call = 2.0 * int(m["rows"]) * int(m["cols"]) * int(m["n"]) * int(m.groupdict().get("g") or 1)
                self.assertAlmostEqual(lin["flops"], per_call * lin["calls"], delta=1e-6 * per_call * lin["calls"],
                                       msg=name)
                # decode: one row per sequence, fewer for an expert that not every sequence chose
                self.assertTrue(1 <= int(m["n"]) <= batch, name)
                full_batch += int(m["n"]) == batch
                checked += 1
            roof = max(lin["bytes"] / bandwidth, lin["flops"] / (lin["peak_gflops"] * 1e9))
            self.assertAlmostEqual(lin["roofline_seconds"], roof, delta=1e-9 * roof, msg=name)
        self.assertGreater(checked, 3)
        self.assertGreater(full_batch, 3)


if __name__ == "__main__":
    unittest.main()

"""`deepinfer bench`, offline (in-process engine) and online (against `deepinfer serve`), on tiny runs: the
JSON report accounts for every request and token, the latencies are ordered sensibly, and a failing server
makes the online run fail. Env: DEEPINFER_BIN.
"""
import json
import pathlib
import subprocess
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_fixture import BIN, ServerProcess  # noqa: E402


def bench(*args):
    r = subprocess.run([BIN, "bench", *map(str, args), "--json"], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


class BenchTest(unittest.TestCase):
    def check_results(self, report, runs, prompts, input_len, output_len):
        self.assertEqual(len(report["results"]), len(runs))
        for res, concurrency in zip(report["results"], runs):
            self.assertEqual(res["concurrency"], concurrency)
            self.assertEqual(res["completed"], prompts)
            self.assertEqual(res["failed"], 0)
            self.assertEqual(res["input_tokens"], prompts * input_len)
            self.assertEqual(res["output_tokens"], prompts * output_len)
            self.assertGreater(res["ttft_ms"]["mean"], 0)
            self.assertLessEqual(res["ttft_ms"]["p50"], res["ttft_ms"]["p99"])
            self.assertGreater(res["tpot_ms"]["mean"], 0)
            self.assertGreater(res["latency_ms"]["mean"], res["ttft_ms"]["mean"])
            self.assertAlmostEqual(res["output_throughput"], res["output_tokens"] / res["duration_s"], places=6)

    def test_offline(self):
        rc, out, err = bench("--input-lens", "24,40", "--output-len", 5, "--num-prompts", 3, "--concurrency", "1,3",
                             "--threads", 2)
        self.assertEqual(rc, 0, err)
        report = json.loads(out)
        self.assertEqual(report["mode"], "offline")
        self.assertEqual([r["input_len"] for r in report["results"]], [24, 24, 40, 40])
        for lens, res in zip([24, 24, 40, 40], report["results"]):
            self.check_results({"results": [res]}, [res["concurrency"]], 3, lens, 5)
        self.assertIn("requests done", err)  # progress output

    def test_options_of_the_other_mode_refused(self):
        # an online option offline, and an engine option online (the server has its own): refused before any run or
        # connection, naming them
        rc, out, err = bench("--request-rate", 5, "--api-key", "k", "--num-prompts", 1)
        self.assertEqual(rc, 2, err)
        self.assertIn("--request-rate, --api-key apply to an online run (--url) only", err)
        self.assertEqual(out, "")
        rc, out, err = bench("--url", "http://127.0.0.1:9", "--threads", 2, "--max-num-seqs", 4)
        self.assertEqual(rc, 2, err)
        self.assertIn("not --threads, --max-num-seqs (give them to deepinfer serve)", err)
        self.assertNotIn("127.0.0.1", err)  # no connection tried
        self.assertEqual(out, "")

    def test_online(self):
        server = ServerProcess()
        try:
            rc, out, err = bench("--url", server.url, "--input-lens", 32, "--output-len", 6, "--num-prompts", 4,
                                 "--concurrency", "1,4", "--request-rate", 50)
            self.assertEqual(rc, 0, err)
            report = json.loads(out)
            self.assertEqual(report["mode"], "online")
            self.assertEqual(report["model"], "deepinfer-tiny")
            self.check_results(report, [1, 4], 4, 32, 6)
            self.assertEqual(report["results"][0]["request_rate"], 50)
            # The server saw exactly these requests.
            m = server.metrics()
            self.assertEqual(m['deepinfer_request_success_total{finished_reason="length"}'], 8)
            self.assertEqual(m["deepinfer_e2e_request_latency_seconds_count"], 8)
            # A bad model name: every request fails and the run reports it.
            rc, out, err = bench("--url", server.url, "--input-lens", 8, "--output-len", 2, "--num-prompts", 2,
                                 "--served-model-name", "nope")
            self.assertEqual(rc, 1)
            self.assertEqual(json.loads(out)["results"][0]["failed"], 2)
            self.assertIn("HTTP 404", err)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()

"""Option combinations the CLI would otherwise resolve without a word are refused, naming the options, before any
work: `generate` with two prompt sources (one used, the other dropped), teacher forcing or the logits dump with
--prompts-file (they were ignored there, the dump written empty), or --max-tokens beside --teacher-ids (which sets the
step count itself); `make-tiny` with --vocab beside --tokenizer (whose V4.1-style tokenizer has its own size);
`make-tokenizer` with the option of the other --kind; `inspect --released-config` with --model.
(`bench-ops` and `bench`: tests/unit/test_bench_ops_cli.py, tests/e2e/test_server_bench.py.) Env: DEEPINFER_BIN.
"""
import os
import subprocess
import tempfile
import unittest

BIN = os.environ.get("DEEPINFER_BIN", "build/release/tools/deepinfer")


SHARED = os.environ.get("DEEPINFER_SHARED_DATA", "../shared/data")


def deepinfer(*args):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=120)


def generate(*args):
    return deepinfer("generate", *args)


class GenerateOptionsTest(unittest.TestCase):
    def assert_refused(self, args, message):
        r = generate(*args)
        self.assertEqual(r.returncode, 2, (args, r.stderr))
        self.assertIn(message, r.stderr, args)
        self.assertNotIn("loading", r.stderr, args)  # refused before the checkpoint loads
        self.assertEqual(r.stdout, "", args)

    def test_refused_combinations(self):
        with tempfile.TemporaryDirectory() as tmp:
            prompts = os.path.join(tmp, "p.jsonl")
            with open(prompts, "w") as f:
                f.write('{"prompt_ids": [1, 2, 3]}\n')
            dump = os.path.join(tmp, "x.npy")
            self.assert_refused(["--prompt", "hi", "--prompt-ids", "1,2"],
                                "give one of --prompt, --prompt-ids, --prompts-file, not --prompt, --prompt-ids")
            self.assert_refused(["--prompt-ids", "1,2", "--prompts-file", prompts], "not --prompt-ids, --prompts-file")
            self.assert_refused(["--prompts-file", prompts, "--dump-logits", dump],
                                "--dump-logits: one prompt only (--prompt or --prompt-ids), not --prompts-file")
            self.assert_refused(["--prompts-file", prompts, "--teacher-ids", "4,5", "--dump-logits", dump],
                                "--teacher-ids, --dump-logits: one prompt only")
            self.assert_refused(["--prompt-ids", "1,2", "--teacher-ids", "4,5", "--max-tokens", 3],
                                "--teacher-ids runs its length + 1 steps; not --max-tokens")
            self.assertFalse(os.path.exists(dump))

    def test_teacher_forcing_still_runs(self):
        # the goldens' form (tests/model/test_goldens.py): prompt ids, teacher ids, temperature 0, the dump
        with tempfile.TemporaryDirectory() as tmp:
            dump = os.path.join(tmp, "t.npy")
            r = generate("--threads", 2, "--prompt-ids", "1,2,3", "--teacher-ids", "5,6", "--temperature", 0,
                         "--dump-logits", dump)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(dump, "rb") as f:
                header = f.read(128).decode("latin-1")
            self.assertIn("'shape': (3,", header)  # rows 0..len(teacher)


class MakeTinyOptionsTest(unittest.TestCase):
    def test_vocab_with_the_v41_tokenizer_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "ckpt")
            r = deepinfer("make-tiny", "--out", out, "--tokenizer", os.path.join(SHARED, "deepseek-v3-tokenizer"),
                          "--vocab", 1024)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--vocab sizes the synthetic tokenizer; not with --tokenizer", r.stderr)
            self.assertFalse(os.path.exists(out))


class OtherOptionsTest(unittest.TestCase):
    def test_make_tokenizer_refuses_the_other_kinds_option(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "tok")
            for args, message in ((["--kind", "synthetic", "--from", "x.json"],
                                   "--kind synthetic does not read --from"),
                                  (["--kind", "v41", "--from", "x.json", "--vocab-size", 600],
                                   "--kind v41 does not read --vocab-size")):
                r = deepinfer("make-tokenizer", *args, "--out", out)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(message, r.stderr)
                self.assertFalse(os.path.exists(out))
            r = deepinfer("make-tokenizer", "--kind", "synthetic", "--vocab-size", 600, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.exists(os.path.join(out, "tokenizer.json")))

    def test_inspect_released_config_reads_no_model(self):
        r = deepinfer("inspect", "--released-config", "--model", "/nonexistent")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--released-config describes the release itself; not with --model", r.stderr)
        r = deepinfer("inspect", "--released-config")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("vocab 129280", r.stdout)


if __name__ == "__main__":
    unittest.main()

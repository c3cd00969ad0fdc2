"""Identity with HF tokenizers (the reference implementation) over a 10,000-string corpus, for the V3-family
tokenizer.json, the V4.1-style file made from it, and the synthetic tokenizer: same ids for every string, same
decoded text (with and without special tokens). The V3 run also sweeps every Unicode scalar value.

Invalid UTF-8 rule: our CLI gets the raw bytes (JSONL "hex"); HF gets bytes.decode("utf-8", "replace"),
because Python cannot hand it anything else. Equal ids mean our repair rule is Python's (see tokenizer.h).

Env: DEEPINFER_BIN (the CLI), DEEPINFER_SHARED_DATA (test data). Runs in about 20 s (2 cores).
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

from tokenizers import Tokenizer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from tokenizer_corpus import build_corpus  # noqa: E402

BIN = os.environ.get("DEEPINFER_BIN", "build/release/tools/deepinfer")
SHARED = pathlib.Path(os.environ.get("DEEPINFER_SHARED_DATA", "../shared/data"))
V3_PATH = SHARED / "deepseek-v3-tokenizer" / "tokenizer.json"


def run_cli(*args):
    result = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"deepinfer {' '.join(map(str, args))} failed: {result.stderr}")
    return result.stdout


def jsonl_rows(output):
    # Not str.splitlines(): decoded text may hold U+2028 or U+0085, which it treats as line breaks.
    return [json.loads(line) for line in output.split("\n") if line]


def as_text(item):
    return item if isinstance(item, str) else item.decode("utf-8", "replace")


class TokenizerCorpusTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="deepinfer-tokenizer-corpus-")
        tmp = pathlib.Path(cls.tmp.name)
        run_cli("make-tokenizer", "--kind", "v41", "--from", V3_PATH, "--out", tmp / "v41")
        run_cli("make-tokenizer", "--kind", "synthetic", "--out", tmp / "synthetic")
        cls.paths = {"v3": V3_PATH, "v41": tmp / "v41" / "tokenizer.json", "synthetic": tmp / "synthetic" / "tokenizer.json"}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def write_jsonl(self, name, rows):
        path = pathlib.Path(self.tmp.name) / name
        with open(path, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        return path

    def check_identity(self, name, path, items, add_special_tokens=False):
        hf = Tokenizer.from_file(str(path))
        texts = [as_text(x) for x in items]
        expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=add_special_tokens)]
        corpus = self.write_jsonl(f"{name}.jsonl", [{"text": x} if isinstance(x, str) else {"hex": x.hex()} for x in items])
        args = ["tokenize", "--tokenizer", path, "--jsonl", corpus] + (["--add-special-tokens"] if add_special_tokens else [])
        ours = [row["ids"] for row in jsonl_rows(run_cli(*args))]
        self.assertEqual(len(ours), len(items))
        bad = [i for i in range(len(items)) if ours[i] != expected[i]]
        details = "\n".join(f"  {items[i]!r:.120}\n    hf:   {expected[i][:24]}\n    ours: {ours[i][:24]}" for i in bad[:5])
        self.assertEqual(bad, [], f"{name}: {len(bad)} of {len(items)} strings encode differently from HF\n{details}")

        # Decoding: every string as is; the first 2,000 also without special tokens.
        for skip, count in ((False, len(items)), (True, min(len(items), 2000))):
            want = hf.decode_batch(expected[:count], skip_special_tokens=skip)
            ids_file = self.write_jsonl(f"{name}.ids.jsonl", [{"ids": ids} for ids in expected[:count]])
            args = ["detokenize", "--tokenizer", path, "--jsonl", ids_file] + (["--skip-special"] if skip else [])
            got = [row["text"] for row in jsonl_rows(run_cli(*args))]
            self.assertEqual(len(got), count)
            bad = [i for i in range(count) if got[i] != want[i]]
            details = "\n".join(f"  {expected[i][:16]}\n    hf:   {want[i]!r:.100}\n    ours: {got[i]!r:.100}" for i in bad[:5])
            self.assertEqual(bad, [], f"{name}: {len(bad)} decodes differ from HF (skip_special={skip})\n{details}")
        return hf

    def corpus_for(self, path):
        hf = Tokenizer.from_file(str(path))
        items = build_corpus([t.content for t in hf.get_added_tokens_decoder().values()])
        self.assertGreaterEqual(len(items), 10000)
        return items

    def test_v3_family_file(self):
        self.check_identity("v3", V3_PATH, self.corpus_for(V3_PATH))

    def test_v3_every_code_point(self):
        # Each scalar value, between context characters, 1024 code points per string: catches Unicode
        # category differences between PCRE2 and Oniguruma (onig_regex.h).
        context = [" ", "a", "1", "", "\n", ".", "", "  "]
        cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
        items = ["".join(chr(c) + context[(c * 7) % len(context)] for c in cps[k : k + 1024]) for k in range(0, len(cps), 1024)]
        self.check_identity("sweep", V3_PATH, items)

    def test_v41_style_file(self):
        path = self.paths["v41"]
        hf = self.check_identity("v41", path, self.corpus_for(path))
        self.assertEqual(hf.get_vocab_size(with_added_tokens=True), 129280)
        probe = "<｜begin▁of▁sentence｜><｜User｜>question<｜Assistant｜><think>reason</think>answer<｜end▁of▁sentence｜>"
        self.assertEqual(hf.encode(probe, add_special_tokens=False).ids, [0, 128803, 20072, 128804, 128821, 86512, 128822, 19995, 1])

    def test_synthetic_file(self):
        path = self.paths["synthetic"]
        self.check_identity("synthetic", path, self.corpus_for(path))

    def test_components_outside_deepseek_files(self):
        # The synthetic tokenizer with the components DeepSeek's files leave unused: normalizers (those with
        # exact HF semantics here; NFC/NFKC are not, see normalizer.cpp), a TemplateProcessing post-processor,
        # and lstrip / rstrip / single_word / normalized added tokens.
        doc = json.loads(pathlib.Path(self.paths["synthetic"]).read_text(encoding="utf-8"))
        doc["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Lowercase"}, {"type": "Replace", "pattern": {"String": "  "}, "content": " "},
            {"type": "Prepend", "prepend": "▁"}, {"type": "StripAccents"},
            {"type": "Strip", "strip_left": False, "strip_right": True}]}
        bos, eos = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
        doc["post_processor"] = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": eos, "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [0], "tokens": [bos]}, eos: {"id": eos, "ids": [1], "tokens": [eos]}}}
        for t in doc["added_tokens"]:
            if t["content"] == "<think>":
                t["lstrip"] = True
            elif t["content"] == "</think>":
                t["rstrip"] = True
            elif t["content"] == "<｜User｜>":
                t["single_word"] = True
            elif t["content"] == "<｜Assistant｜>":
                t["content"], t["normalized"] = "<｜ASSISTANT｜>", True
        path = pathlib.Path(self.tmp.name) / "variant.json"
        path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        hf = Tokenizer.from_file(str(path))
        items = build_corpus([t.content for t in hf.get_added_tokens_decoder().values()] + ["<｜assistant｜>"], size=3000)
        self.check_identity("variant", path, items, add_special_tokens=True)


if __name__ == "__main__":
    unittest.main()

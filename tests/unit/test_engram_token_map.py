"""The Engram compressed token map (spec §5.5.1) of our C++ build_engram_token_map against two Python
implementations of engram.py's build_compressed_token_map, over every id of the V3-family tokenizer, the
V4.1-style one (129,280 ids) and the synthetic one:

  * `reference_map`: engram.py's algorithm with the same HF tokenizers normalizers engram.py builds (it does not
    use Python's str functions): the exact reference semantics;
  * `unicodedata_map`: the documented algorithm written with unicodedata and str.lower() (Unicode 14, Python's
    final-sigma and strip rules), an independent second implementation. It normalizes four control
    characters differently (U+001C..U+001F: str.strip() removes them, HF's Strip does not), which happens not
    to change any class for these vocabularies.

Also pins the class counts and sha256 digests (little-endian int32 table). For the V4.1-style file they equal
the spec's values for the released tokenizer (99,092 classes, c60a8632...); the V3 values are measured.
Env: DEEPINFER_BIN, DEEPINFER_SHARED_DATA.
"""
import hashlib
import json
import os
import pathlib
import re
import struct
import subprocess
import tempfile
import unicodedata
import unittest

from tokenizers import Regex, Tokenizer, normalizers

BIN = os.environ.get("DEEPINFER_BIN", "build/release/tools/deepinfer")
SHARED = pathlib.Path(os.environ.get("DEEPINFER_SHARED_DATA", "../shared/data"))
V3_PATH = SHARED / "deepseek-v3-tokenizer" / "tokenizer.json"
SENTINEL = "\ue000"

EXPECTED = {
    "v3": (128815, 98627, "cd48cb62d9cca1baaf08d9e7795ad3d4c22b6c56f0f070178b9e3a52694ea930"),  # measured
    "v41": (129280, 99092, "c60a86322ec17b4142bfef3c57a8d81fb428550cdf487f88a4320cb59fe46481"),  # = spec §5.5.1
}


def hf_normalizer():
    return normalizers.Sequence([
        normalizers.NFKC(), normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[ \t\r\n]+"), " "), normalizers.Replace(Regex(r"^ $"), SENTINEL),
        normalizers.Strip(), normalizers.Replace(SENTINEL, " "),
    ])


def unicodedata_normalize(text):
    text = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text))
    text = "".join(c for c in text if not unicodedata.category(c).startswith("M")).lower()
    text = re.sub(r"[ \t\r\n]+", " ", text)
    if text == " ":
        text = SENTINEL
    return text.strip().replace(SENTINEL, " ")


def token_map(tok, vocab_size, normalize):
    """engram.py's loop: decode each id alone; U+FFFD -> raw token string, else normalized (or raw) text."""
    keys, lookup = {}, []
    for token_id in range(vocab_size):
        text = tok.decode([token_id], skip_special_tokens=False)
        if "\ufffd" in text:
            key = tok.id_to_token(token_id)
        else:
            key = normalize(text) or text
        lookup.append(keys.setdefault(key, len(keys)))
    return lookup, len(keys)


def digest(table):
    return hashlib.sha256(struct.pack(f"<{len(table)}i", *table)).hexdigest()


class EngramTokenMapTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="deepinfer-engram-")
        tmp = pathlib.Path(cls.tmp.name)
        for args in (["--kind", "v41", "--from", V3_PATH], ["--kind", "synthetic"]):
            subprocess.run([BIN, "make-tokenizer", *map(str, args), "--out", tmp / args[1]], check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def ours(self, path, name):
        out = pathlib.Path(self.tmp.name) / f"{name}.map"
        result = subprocess.run([BIN, "engram-map", "--tokenizer", str(path), "--out", str(out)], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        summary = json.loads(result.stdout)
        data = out.read_bytes()
        table = list(struct.unpack(f"<{len(data) // 4}i", data))
        self.assertEqual(summary["classes"], max(table) + 1)
        self.assertEqual(summary["sha256"], digest(table))
        return table, summary

    def check(self, name, path):
        tok = Tokenizer.from_file(str(path))
        vocab_size = tok.get_vocab_size(with_added_tokens=True)
        table, summary = self.ours(path, name)
        self.assertEqual(len(table), vocab_size)
        reference, n_reference = token_map(tok, vocab_size, hf_normalizer().normalize_str)
        bad = [i for i in range(vocab_size) if table[i] != reference[i]]
        self.assertEqual(bad[:10], [], f"{name}: {len(bad)} ids differ from engram.py's algorithm")
        self.assertEqual(summary["classes"], n_reference)
        second, n_second = token_map(tok, vocab_size, unicodedata_normalize)
        self.assertEqual(second, table, f"{name}: the unicodedata implementation disagrees")
        self.assertEqual(n_second, n_reference)
        return vocab_size, summary["classes"], summary["sha256"]

    def test_v3_family_file(self):
        self.assertEqual(self.check("v3", V3_PATH), EXPECTED["v3"])

    def test_v41_style_file(self):
        self.assertEqual(self.check("v41", pathlib.Path(self.tmp.name) / "v41" / "tokenizer.json"), EXPECTED["v41"])

    def test_synthetic_file(self):
        vocab_size, classes, _ = self.check("synthetic", pathlib.Path(self.tmp.name) / "synthetic" / "tokenizer.json")
        self.assertEqual(vocab_size, 1024)
        self.assertLess(classes, vocab_size)  # case and spacing variants merged


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""Encode throughput of deepinfer's tokenizer and HF tokenizers, side by side, single thread, same inputs.

Corpora: "test" = the 10,000-string corpus of tests/unit/tokenizer_corpus.py (many scripts, random code points,
whitespace runs, invalid UTF-8); "stdlib" = Python's standard library sources (English comments and code),
cut into 4 KB texts, up to --stdlib-mb MB. Both tools encode every text of a corpus once to warm their caches,
then repeatedly for at least --seconds; the rate counts UTF-8 bytes of input. HF runs encode_batch_fast (its
fastest path: no offsets) in one rayon thread; ours runs `deepinfer tokenize --bench` (Tokenizer::encode_into
per text). Ids are checked equal first.

Usage: .venv/bin/python tools/bench_tokenizer.py [--tokenizer FILE] [--bin build/release/tools/deepinfer]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import sysconfig
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its thread pool
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Tokenizer  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit"))
from tokenizer_corpus import build_corpus  # noqa: E402


def stdlib_corpus(megabytes):
    texts, total = [], 0
    for path in sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        source = path.read_text(encoding="utf-8", errors="replace")
        for k in range(0, len(source), 4096):
            texts.append(source[k : k + 4096])
            total += len(texts[-1].encode("utf-8"))
            if total >= megabytes * 1e6:
                return texts
    return texts


def bench_hf(tok, texts, seconds):
    tok.encode_batch_fast(texts, add_special_tokens=False)  # warm-up
    passes, start = 0, time.perf_counter()
    while True:
        tok.encode_batch_fast(texts, add_special_tokens=False)
        passes += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return passes, elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", default=str(ROOT.parent / "shared" / "data" / "deepseek-v3-tokenizer" / "tokenizer.json"))
    parser.add_argument("--bin", default=str(ROOT / "build" / "release" / "tools" / "deepinfer"))
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--stdlib-mb", type=float, default=4.0)
    args = parser.parse_args()

    tok = Tokenizer.from_file(args.tokenizer)
    corpora = {
        "test": build_corpus([t.content for t in tok.get_added_tokens_decoder().values()]),
        "stdlib": stdlib_corpus(args.stdlib_mb),
    }
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, items in corpora.items():
            texts = [x if isinstance(x, str) else x.decode("utf-8", "replace") for x in items]
            path = pathlib.Path(tmp) / f"{name}.jsonl"
            with open(path, "w", encoding="utf-8") as f:  # valid text only: both tools see the same strings
                for t in texts:
                    f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
            ours_ids = subprocess.run([args.bin, "tokenize", "--tokenizer", args.tokenizer, "--jsonl", str(path)],
                                      check=True, capture_output=True, text=True).stdout
            ours_ids = [json.loads(line)["ids"] for line in ours_ids.split("\n") if line]
            hf_ids = [e.ids for e in tok.encode_batch_fast(texts, add_special_tokens=False)]
            if ours_ids != hf_ids:
                sys.exit(f"{name}: ids differ from HF; fix correctness before measuring speed")
            n_bytes = sum(len(t.encode("utf-8")) for t in texts)
            passes, elapsed = bench_hf(tok, texts, args.seconds)
            hf_rate = n_bytes * passes / elapsed
            out = subprocess.run([args.bin, "tokenize", "--tokenizer", args.tokenizer, "--jsonl", str(path), "--bench",
                                  "--bench-seconds", str(args.seconds)], check=True, capture_output=True, text=True)
            ours = json.loads(out.stdout)
            results[name] = {"texts": len(texts), "mb": n_bytes / 1e6, "hf_mb_s": hf_rate / 1e6,
                             "ours_mb_s": ours["bytes_per_second"] / 1e6, "ratio": ours["bytes_per_second"] / hf_rate}
            r = results[name]
            print(f"{name:7s} {r['texts']:6d} texts {r['mb']:6.2f} MB | HF tokenizers {r['hf_mb_s']:7.2f} MB/s | "
                  f"deepinfer {r['ours_mb_s']:7.2f} MB/s | ratio {r['ratio']:.2f}x")
    print(json.dumps(results))


if __name__ == "__main__":
    main()

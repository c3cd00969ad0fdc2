#!/usr/bin/env python3
"""Our engine against the official DeepSeek-V4.1 reference: every golden under tests/data/goldens.

For each golden (tools/goldens/README.md): regenerate its checkpoint with `deepinfer make-tiny` (preset and
seed from golden.json; the checkpoint digest must equal the one the golden was made from), then
  * teacher forcing: `deepinfer generate --prompt-ids P --teacher-ids T --dump-logits F` and
    tools/goldens/compare.py: top-1 agreement at every step but near ties, cosine and relative error of
    the logits within the reference's own noise floor (thresholds: compare.py / README);
  * greedy free-running: `deepinfer generate --temperature 0 --max-tokens N --ignore-eos --json`, tokens
    identical up to the first near tie;
  * DSpark: `deepinfer draft --prompt-ids P --dump-logits F` (one drafting pass at the first decode
    position, as the golden records it): draft tokens up to the first near tie, logits and confidences
    within the noise floor of the drafting pass;
  * Engram row ids (exact) through tests/model/golden_probe (DEEPINFER_GOLDEN_PROBE; skipped with a message
    when unset).

Environment: DEEPINFER_BIN (the CLI), DEEPINFER_SOURCE_DIR, DEEPINFER_GOLDEN_PROBE (optional);
DEEPINFER_GOLDEN_MODE = fixed (default: the reference with its stale index-key read fixed, README "Reference
modes"; the engine computes the keys the spec defines and does not reproduce that upstream bug) or official
(the reference as it is); DEEPINFER_GOLDEN_ONLY = space-separated config/case names;
DEEPINFER_GOLDENS_DIR = another goldens folder (default tests/data/goldens).
numpy only: the reference (torch) never runs here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SRC = Path(os.environ.get("DEEPINFER_SOURCE_DIR", Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(SRC / "tools" / "goldens"))
import compare  # noqa: E402
import golden_io  # noqa: E402

GOLDENS = Path(os.environ.get("DEEPINFER_GOLDENS_DIR", SRC / "tests" / "data" / "goldens"))


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])} ... exited {p.returncode}:\n{p.stderr[-2000:]}")
    return p


def ids(values) -> str:
    return ",".join(str(int(v)) for v in values)


def checkpoint(bin_: str, meta: dict, tmp: Path, cache: dict) -> Path:
    key = (meta["make_tiny"]["preset"], meta["make_tiny"]["seed"])
    if key not in cache:
        out = tmp / f"{key[0]}-seed{key[1]}"
        run([bin_, "make-tiny", "--preset", key[0], "--seed", str(key[1]), "--out", str(out)])
        cache[key] = (out, golden_io.checkpoint_digest(out))
    return cache[key]


def check_case(bin_: str, probe: str | None, gdir: Path, mode: str, tmp: Path, ckpts: dict) -> tuple[bool, list[str]]:
    golden = golden_io.load_golden(gdir, mode)
    meta = golden.meta
    lines = []
    ckpt, digest = checkpoint(bin_, meta, tmp, ckpts)
    if digest != meta["checkpoint_digest"]:
        return False, [f"FAIL {golden.name}: `{meta['make_tiny']['command']}` no longer writes the checkpoint "
                       f"this golden was made from (digest {digest[:12]} != {meta['checkpoint_digest'][:12]}); "
                       f"regenerate the goldens (tools/goldens/README.md)"]
    work = tmp / golden.name.replace("/", "_").replace(" ", "_")
    work.mkdir()
    ok = True

    # teacher forcing
    logits_path = work / "teacher.npy"
    run([bin_, "generate", "--model", str(ckpt), "--prompt-ids", ids(golden.prompt_ids), "--teacher-ids",
         ids(golden.teacher_ids), "--temperature", "0", "--dump-logits", str(logits_path)])
    report = compare.compare_teacher(golden, np.load(logits_path))
    ok &= report.ok
    lines.append(report.format())
    if mode == "official" and meta.get("stale_index_k_steps"):
        other = compare.compare_teacher(golden_io.load_golden(gdir, "fixed"), np.load(logits_path))
        lines.append(f"  (for information, vs the fixed reference: {'PASS' if other.ok else 'FAIL'}, "
                     f"worst cosine {other.summary['worst_cosine']:.6f}, max rel err {other.summary['max_rel_err']:.3e}, "
                     f"top-1 {other.summary['top1_agree']}/{other.summary['steps']}; the official reference reads "
                     f"stale index keys at steps {meta['stale_index_k_steps']})")

    # greedy free-running
    n = len(meta["greedy"]["tokens"])
    out = run([bin_, "generate", "--model", str(ckpt), "--prompt-ids", ids(golden.prompt_ids), "--temperature", "0",
               "--max-tokens", str(n), "--ignore-eos", "--json"])
    tokens = json.loads(out.stdout.strip().splitlines()[0])["output_ids"]
    report = compare.compare_greedy(golden, tokens)
    ok &= report.ok
    lines.append(report.format())

    # DSpark: `deepinfer draft` runs the pass the golden records (prefill, greedy next token decoded at
    # p = len(prompt), draft from that row with the greedy token after it)
    if "dspark" in meta and golden.dspark_logits is not None:
        d = meta["dspark"]
        draft_logits = work / "dspark.npy"
        out = run([bin_, "draft", "--model", str(ckpt), "--prompt-ids", ids(golden.prompt_ids),
                   "--dump-logits", str(draft_logits)])
        j = json.loads(out.stdout.strip().splitlines()[-1])
        inputs = (j["prefill_next"], j["decode_position"], j["tokens"][0])
        want = (meta["greedy"]["tokens"][0], d["pos"], d["input_token"])
        if inputs != want:
            # the engine's greedy picks before the draft differ: the greedy report says whether at a near tie
            lines.append(f"SKIP dspark {golden.name}: drafting inputs (next, position, sampled) {inputs} differ "
                         f"from the reference's {want}; nothing to compare")
        else:
            report = compare.compare_dspark(golden, j["tokens"], np.load(draft_logits), j["confidence"])
            ok &= report.ok
            lines.append(report.format())

    # Engram row ids through golden_probe (the CLI does not print them)
    if meta["engram"]["rows"]:
        if probe is None:
            lines.append(f"SKIP engram {golden.name}: golden_probe not built (DEEPINFER_GOLDEN_PROBE unset)")
        else:
            run([probe, "--model", str(ckpt), "--out", str(work), "--engram-ids",
                 ids(golden.prompt_ids + golden.teacher_ids), "--engram-positions", ids(meta["engram"]["positions"])])
            rows = {int(k): v for k, v in json.loads((work / "engram.json").read_text()).items()}
            report = compare.compare_engram(golden, rows)
            ok &= report.ok
            lines.append(report.format())
    return ok, lines


def main() -> int:
    bin_ = os.environ.get("DEEPINFER_BIN")
    if not bin_:
        print("DEEPINFER_BIN is not set (ctest sets it)", file=sys.stderr)
        return 2
    probe = os.environ.get("DEEPINFER_GOLDEN_PROBE") or None
    mode = os.environ.get("DEEPINFER_GOLDEN_MODE", "fixed")
    only = set(os.environ.get("DEEPINFER_GOLDEN_ONLY", "").split())
    goldens = [g for g in golden_io.find_goldens(GOLDENS) if not only or f"{g.parent.name}/{g.name}" in only]
    if not goldens:
        print(f"no goldens under {GOLDENS}", file=sys.stderr)
        return 1
    failed = []
    with tempfile.TemporaryDirectory(prefix="goldens-") as tmp_name:
        tmp, ckpts = Path(tmp_name), {}
        for gdir in goldens:
            name = f"{gdir.parent.name}/{gdir.name}"
            try:
                ok, lines = check_case(bin_, probe, gdir, mode, tmp, ckpts)
            except (RuntimeError, OSError, ValueError, KeyError) as e:
                ok, lines = False, [f"FAIL {name}: {e}"]
            print("\n".join(lines), flush=True)
            if not ok:
                failed.append(name)
    print(f"\n{len(goldens) - len(failed)}/{len(goldens)} goldens pass against the {mode} reference"
          + (f"; failing: {' '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Write the golden data of tests/data/goldens from the official DeepSeek-V4.1 reference.

    python tools/goldens/make_goldens.py --reference-dir REF --deepinfer build/release/tools/deepinfer
    python tools/goldens/make_goldens.py --reference-dir REF --deepinfer ... --check   # regenerate, compare bytes

For every case of cases.json: make the tiny checkpoint (`deepinfer make-tiny --preset P --seed S`, or take it
from --checkpoints DIR/<config>), convert it as the official convert.py does, build the reference
Transformer under bf16 default dtype (torch.set_num_threads(1): deterministic), and record
  * teacher forcing: prefill the prompt, then decode teacher_ids one token at a time; fp32 logits of every
    step and the reference's top-1 / top-2 / margin per step;
  * greedy free-running tokens after the prefill (temperature 0), with the top-2 margin per step;
  * the DSpark draft pass: forward_spec seeds the DSpark rings after the prefill (start_pos 0); at the first
    decode position p = len(prompt) the backbone forward consumes greedy[0] and returns greedy[1], then
    forward_spec(greedy[1], main_hidden, p) drafts: tokens, Markov-biased logits, confidence;
  * the Engram hash row ids (absolute table rows) at a few prompt and decode positions;
  * the reference's own noise floor per step: the same runs repeated under each deterministic variant of
    variants.py (equivalent computation, other summation order); compare.py derives its thresholds from it;
  * all of the above (but the Engram rows) twice: for the reference as it is ("official") and with the
    stale index-key read fixed ("fixed", reference.stale_index_key_fix; README explains).
See tools/goldens/README.md.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import golden_io  # noqa: E402

REPO = HERE.parent.parent
DEFAULT_OUT = REPO / "tests" / "data" / "goldens"


# ---------------------------------------------------------------------------------------------------
# inputs


def make_prompt(seed: int, length: int, ordinary_ids: list[int], bos: int) -> tuple[np.random.Generator, list[int]]:
    """BOS, then ordinary (non-added) tokens drawn uniformly, with every so often a copy of an earlier span
    of 4-12 tokens so that n-grams repeat (Engram) and attention has something to find. Deterministic
    for (seed, length, ordinary_ids); returns the generator to draw the teacher continuation from."""
    rng = np.random.default_rng(seed)
    ids = [bos]
    while len(ids) < length:
        if len(ids) > 16 and rng.random() < 0.1:
            n = int(rng.integers(4, 13))
            start = int(rng.integers(1, len(ids) - n))
            ids.extend(ids[start : start + n])
        else:
            ids.append(int(ordinary_ids[int(rng.integers(0, len(ordinary_ids)))]))
    return rng, ids[:length]


def make_teacher(rng: np.random.Generator, steps: int, ordinary_ids: list[int]) -> list[int]:
    return [int(ordinary_ids[int(rng.integers(0, len(ordinary_ids)))]) for _ in range(steps)]


def case_inputs(case: dict, tokenizer, config: dict) -> tuple[list[int], list[int]]:
    vocab = config["text_config"]["vocab_size"]
    added = tokenizer.added_token_ids()
    ordinary = [i for i in range(vocab) if i not in added]
    rng, prompt = make_prompt(case["prompt_seed"], case["prompt_len"], ordinary, config.get("bos_token_id", 0))
    teacher = make_teacher(rng, case["teacher_steps"], ordinary)
    return prompt, teacher


def make_tiny(deepinfer: str, preset: str, seed: int, out: Path) -> None:
    cmd = [deepinfer, "make-tiny", "--preset", preset, "--seed", str(seed), "--out", str(out)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ---------------------------------------------------------------------------------------------------
# reference runs (shared with noise_floor.py)


def top2(logits) -> tuple[int, int, float]:
    """(top-1 id, top-2 id, top-1 minus top-2 logit) of an fp32 vector."""
    v = np.asarray(logits, dtype=np.float32)
    order = np.argsort(-v, kind="stable")[:2]
    return int(order[0]), int(order[1]), float(v[order[0]]) - float(v[order[1]])


def run_teacher(ref, prompt: list[int], teacher: list[int], engram_positions: list[int] | None = None):
    """Prefill, then decode teacher tokens one at a time. Returns (logits fp32 [T+1, V], engram rows by
    position) where the engram rows are [n_engram_layers, n_cols] for each requested position."""
    import torch

    model = ref.fresh()
    captured: dict[int, list] = {}
    hook = None
    if engram_positions and model.engram_hash is not None:
        wanted = set(engram_positions)

        def capture(module, inputs, output):
            start_pos = inputs[1]
            for j in range(output.size(1)):
                if start_pos + j in wanted:
                    captured[start_pos + j] = output[0, j].tolist()

        hook = model.engram_hash.register_forward_hook(capture)
    rows = [ref.forward(prompt, 0).logits]
    for i, tok in enumerate(teacher):
        rows.append(ref.forward([tok], len(prompt) + i).logits)
    if hook is not None:
        hook.remove()
    logits = torch.stack(rows).numpy().astype(np.float32)
    return logits, captured


def run_greedy(ref, prompt: list[int], steps: int, dspark: bool = True):
    """Greedy free-running: `steps` tokens after the prefill, each with its top-2 margin. With dspark, the
    DSpark rings are seeded after the prefill and one drafting pass runs at the first decode position."""
    ref.fresh()
    out = ref.forward(prompt, 0)
    if dspark and len(ref.model.mtp):
        assert ref.forward_spec(out.output_ids, out.main_hidden, 0) is None
    tokens, margins, seconds = [out.token], [], []
    _, second, margin = top2(out.logits.numpy())
    margins.append(margin)
    seconds.append(second)
    draft = None
    while len(tokens) < steps:
        pos = len(prompt) + len(tokens) - 1
        out = ref.forward([tokens[-1]], pos)
        _, second, margin = top2(out.logits.numpy())
        if dspark and draft is None and len(ref.model.mtp):
            ids, dlogits, conf = ref.forward_spec(out.output_ids, out.main_hidden, pos)
            draft = {
                "pos": pos,
                "input_token": out.token,
                "tokens": [int(t) for t in ids[0].tolist()],
                "confidence": [float(c) for c in conf[0].float().tolist()],
                "logits": dlogits[0].float().numpy().astype(np.float32),
            }
        tokens.append(out.token)
        margins.append(margin)
        seconds.append(second)
    return {"tokens": tokens, "margins": margins, "second": seconds}, draft


def engram_positions_for(prompt_len: int, teacher_steps: int) -> list[int]:
    """A few positions: the sequence start (n-grams cut by the start), the middle, the end of the prompt,
    and the first decode steps (the decode-time hash path)."""
    ps = {0, 1, 2, 3, 4, prompt_len // 2, prompt_len - 2, prompt_len - 1}
    ps |= {prompt_len + i for i in range(min(3, teacher_steps))}
    return sorted(p for p in ps if 0 <= p < prompt_len + teacher_steps)


def _margins(logits: np.ndarray) -> np.ndarray:
    top = np.sort(logits.astype(np.float64), axis=-1)[:, -2:]
    return top[:, 1] - top[:, 0]


def _row_stats(base: np.ndarray, other: np.ndarray) -> dict:
    """Per row of two [steps, vocab] logit arrays: relative error, cosine, max |delta|, |delta margin|, top-1 flip."""
    b = base.astype(np.float64)
    o = other.astype(np.float64)
    nb, no = np.linalg.norm(b, axis=1), np.linalg.norm(o, axis=1)
    return {
        "rel_err": np.linalg.norm(o - b, axis=1) / nb,
        "cosine": (b * o).sum(1) / (nb * no),
        "max_abs": np.abs(o - b).max(1),
        "margin_delta": np.abs(_margins(other) - _margins(base)),
        "top1_flip": base.argmax(1) != other.argmax(1),
    }


def variant_diff(base: dict, other: dict) -> dict:
    """How far a variant run moved from the baseline run (both from run_all)."""
    t = _row_stats(base["teacher"], other["teacher"])
    bg, og = base["greedy"]["tokens"], other["greedy"]["tokens"]
    n = len(bg)
    div = next((i for i in range(n) if og[i] != bg[i]), n)
    out = {
        "teacher": t,
        "greedy": {"first_divergence": div,
                   "margin_delta": np.abs(np.subtract(other["greedy"]["margins"][:div], base["greedy"]["margins"][:div]))},
    }
    bd, od = base["dspark"], other["dspark"]
    if bd is not None and od is not None:
        same_input = bd["input_token"] == od["input_token"]
        out["dspark"] = {
            "same_input": same_input,
            "tokens_equal": bd["tokens"] == od["tokens"],
            "first_divergence": next((i for i, (a, b) in enumerate(zip(bd["tokens"], od["tokens"])) if a != b),
                                     len(bd["tokens"])),
            "rows": _row_stats(bd["logits"], od["logits"]) if same_input else None,
            "confidence_abs": np.abs(np.subtract(od["confidence"], bd["confidence"])) if same_input else None,
        }
    return out


def run_all(ref, prompt: list[int], teacher: list[int], greedy_steps: int, engram_positions=None) -> dict:
    logits, engram = run_teacher(ref, prompt, teacher, engram_positions)
    greedy, draft = run_greedy(ref, prompt, greedy_steps)
    return {"teacher": logits, "engram": engram, "greedy": greedy, "dspark": draft}


def floor_summary(diffs: dict[str, dict]) -> dict:
    """Per-step noise floor over the variants: the largest movement of any variant (JSON-ready)."""
    t = [d["teacher"] for d in diffs.values()]
    out = {
        "variants": sorted(diffs),
        "teacher": {
            "rel_err": np.max([x["rel_err"] for x in t], axis=0).tolist(),
            "cosine": np.min([x["cosine"] for x in t], axis=0).tolist(),
            "max_abs": np.max([x["max_abs"] for x in t], axis=0).tolist(),
            "margin_delta": np.max([x["margin_delta"] for x in t], axis=0).tolist(),
            "top1_flip": [bool(v) for v in np.any([x["top1_flip"] for x in t], axis=0)],
        },
    }
    div = min(d["greedy"]["first_divergence"] for d in diffs.values())
    out["greedy"] = {
        "first_divergence": div,
        "first_divergence_by_variant": {k: d["greedy"]["first_divergence"] for k, d in sorted(diffs.items())},
        "margin_delta": np.max([d["greedy"]["margin_delta"][:div] for d in diffs.values()], axis=0).tolist()
        if div else [],
    }
    ds = [d["dspark"] for d in diffs.values() if "dspark" in d]
    if ds:
        same = [x for x in ds if x["same_input"]]
        out["dspark"] = {
            "variants_with_same_input": len(same),
            "tokens_equal": all(x["tokens_equal"] for x in ds),
            "first_divergence": min(x["first_divergence"] for x in ds),
        }
        if same:
            out["dspark"].update({
                "rel_err": np.max([x["rows"]["rel_err"] for x in same], axis=0).tolist(),
                "cosine": np.min([x["rows"]["cosine"] for x in same], axis=0).tolist(),
                "margin_delta": np.max([x["rows"]["margin_delta"] for x in same], axis=0).tolist(),
                "confidence_abs": np.max([x["confidence_abs"] for x in same], axis=0).tolist(),
            })
    return out


# ---------------------------------------------------------------------------------------------------
# one case


def mode_record(base: dict, diffs: dict) -> dict:
    """The small outputs of one reference mode (JSON-ready)."""
    tf = [top2(row) for row in base["teacher"]]
    rec = {
        "teacher": {"top1": [t[0] for t in tf], "top2": [t[1] for t in tf], "margin": [t[2] for t in tf]},
        "greedy": {"tokens": base["greedy"]["tokens"], "margin": base["greedy"]["margins"],
                   "top2": base["greedy"]["second"]},
        "noise_floor": floor_summary(diffs) if diffs else None,
    }
    draft = base["dspark"]
    if draft is not None:
        rec["dspark"] = {k: v for k, v in draft.items() if k != "logits"}
        rec["dspark"]["top2"] = [list(top2(row)) for row in draft["logits"]]
    return rec


def generate_case(ref, ref_dir: Path, case: dict, cfg: dict, ckpt: Path, digest: str, out_dir: Path,
                  variant_names=None) -> None:
    import torch

    import variants
    from reference import MODES, reference_fingerprint, reference_mode

    variant_names = variants.DETERMINISTIC if variant_names is None else variant_names
    prompt, teacher = case_inputs(case, ref.tokenizer, ref.config)
    positions = engram_positions_for(len(prompt), len(teacher))
    runs = {}
    for mode in MODES:
        with reference_mode(ref.mod, mode):
            base = run_all(ref, prompt, teacher, case["greedy_steps"], positions)
            diffs = {}
            for name in variant_names:
                with variants.variant(ref.mod, name):
                    diffs[name] = variant_diff(base, run_all(ref, prompt, teacher, case["greedy_steps"]))
        runs[mode] = (base, diffs)
    official, fixed = runs["official"][0], runs["fixed"][0]
    engram = official["engram"]
    assert engram == fixed["engram"]

    meta = {
        "format_version": golden_io.FORMAT_VERSION,
        "config": case["config"],
        "case": case["case"],
        "make_tiny": {
            "preset": cfg["preset"],
            "seed": cfg["seed"],
            "command": f"deepinfer make-tiny --preset {cfg['preset']} --seed {cfg['seed']} --out DIR",
        },
        "checkpoint_digest": digest,
        "prompt": {"length": case["prompt_len"], "seed": case["prompt_seed"],
                   "generator": "tools/goldens/make_goldens.py make_prompt"},
        "prompt_ids": prompt,
        "teacher_ids": teacher,
        **mode_record(*runs["official"]),
        "fixed": mode_record(*runs["fixed"]),
        "stale_index_k_steps": [i for i, (a, b) in enumerate(zip(official["teacher"], fixed["teacher"]))
                                if not np.array_equal(a, b)],
        "engram": {
            "layer_ids": list(ref.args.engram_layer_ids),
            "positions": positions,
            "rows": [engram[p] for p in positions] if engram else [],
            "sequence": "prompt_ids + teacher_ids (captured in the teacher-forced run)",
        },
        "reference": {
            "files_sha256": reference_fingerprint(ref_dir),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "threads": torch.get_num_threads(),
            "default_dtype": "bfloat16",
            "max_seq_len": ref.args.max_seq_len,
            "modes": {"official": "the reference files as they are",
                      "fixed": "official + reference.stale_index_key_fix (README: the stale index-key read)"},
        },
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / golden_io.GOLDEN_JSON).write_text(golden_io.dump_json(meta))
    for mode, suffix in (("official", ""), ("fixed", golden_io.FIXED_SUFFIX)):
        base = runs[mode][0]
        np.save(out_dir / golden_io.TEACHER_LOGITS.replace(".npy", suffix + ".npy"), base["teacher"])
        if base["dspark"] is not None:
            np.save(out_dir / golden_io.DSPARK_LOGITS.replace(".npy", suffix + ".npy"), base["dspark"]["logits"])
    shutil.copyfile(ckpt / "config.json", out_dir / "config.json")


def max_seq_len_for(cases: list[dict], block: int) -> int:
    need = max(c["prompt_len"] + max(c["teacher_steps"], c["greedy_steps"]) for c in cases) + block + 2
    return (need + 255) // 256 * 256


# ---------------------------------------------------------------------------------------------------


def checkpoints(args, configs: dict, names: list[str], tmp: Path) -> dict[str, Path]:
    out = {}
    for name in names:
        if args.checkpoints:
            out[name] = Path(args.checkpoints) / name
        else:
            out[name] = tmp / name
            make_tiny(args.deepinfer, configs[name]["preset"], configs[name]["seed"], out[name])
    return out


def generate(args, out_root: Path, tmp: Path) -> list[Path]:
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)  # nothing is sampled (temperature 0); set for good measure
    spec = json.loads(Path(args.cases).read_text())
    cases = [c for c in spec["cases"] if not args.only or f"{c['config']}/{c['case']}" in args.only]
    if not cases:
        raise SystemExit("no case selected")
    names = sorted({c["config"] for c in cases}, key=list(spec["configs"]).index)
    ckpts = checkpoints(args, spec["configs"], names, tmp)
    from reference import Reference

    written = []
    for name in names:
        mine = [c for c in cases if c["config"] == name]
        digest = golden_io.checkpoint_digest(ckpts[name])
        cfg = json.loads((ckpts[name] / "config.json").read_text())
        block = cfg["text_config"].get("dspark_block_size", 0)
        ref = Reference(args.reference_dir, ckpts[name], max_seq_len_for(mine, block))
        for case in mine:
            out_dir = out_root / name / case["case"]
            print(f"{name}/{case['case']}: prompt {case['prompt_len']}, teacher {case['teacher_steps']}, "
                  f"greedy {case['greedy_steps']}", flush=True)
            generate_case(ref, Path(args.reference_dir), case, spec["configs"][name], ckpts[name], digest, out_dir,
                          args.variants)
            written.append(out_dir)
        # one reference per process: module globals (shared_attn, default dtype) belong to the last model
        del ref
    return written


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reference-dir", required=True, help="folder with the official model.py, engram.py, "
                   "kernel_cpu.py, vision.py, image_processor.py (see README)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--deepinfer", help="the deepinfer CLI, to run make-tiny")
    src.add_argument("--checkpoints", help="folder with one make-tiny checkpoint per config name")
    p.add_argument("--cases", default=str(HERE / "cases.json"))
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--only", nargs="*", help="config/case names to (re)generate")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 for the committed goldens)")
    p.add_argument("--variants", nargs="*", default=None,
                   help="noise-floor variants recorded per step (default: variants.DETERMINISTIC)")
    p.add_argument("--check", action="store_true",
                   help="regenerate into a temporary folder and compare with --out byte for byte")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="goldens-") as tmp_name:
        tmp = Path(tmp_name)
        out_root = tmp / "out" if args.check else Path(args.out)
        written = generate(args, out_root, tmp / "ckpt")
        if not args.check:
            return 0
        bad = 0
        for d in written:
            rel = d.relative_to(out_root)
            committed = Path(args.out) / rel
            for f in sorted(d.iterdir()):
                same = (committed / f.name).exists() and filecmp.cmp(f, committed / f.name, shallow=False)
                print(f"{'same' if same else 'DIFFERENT'}  {rel / f.name}")
                bad += not same
        print(f"{'OK' if not bad else 'FAIL'}: {bad} file(s) differ")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The reference's own noise floor, and a calibration of compare.py's thresholds against it.

    python tools/goldens/noise_floor.py --reference-dir REF --deepinfer BIN [--out tools/goldens/noise_floor.json]
    python tools/goldens/noise_floor.py --table tools/goldens/noise_floor.json      # the README tables

Runs every case of cases.json with the baseline (the goldens' settings: torch threads 1, the reference
as it is) and with every variant of variants.py (the same mathematics in another summation order,
threads4 included), and records how far each moves the teacher-forced logits (cosine, relative error,
max |delta|, top-2 margin change, top-1 flips), the greedy tokens (first divergence) and the DSpark drafts.

Calibration (leave one variant out): compare.py judges an engine by limits built from the recorded
variants (module docstring there). Here each variant in turn plays the engine, judged by compare.py with
the noise floor of the other deterministic variants, for a grid of FACTOR and TRACK_ALLOWANCE values; the
smallest values for which no held-out variant of the reference fails are what the thresholds need at the
least -- an implementation exactly as good as the reference must pass.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402
import golden_io  # noqa: E402
import make_goldens as mg  # noqa: E402
import variants  # noqa: E402

FACTORS = (1.5, 2.0, 3.0)
ALLOWANCES = (0.0, 0.1, 0.25)


def held_out(base: dict, runs: dict, held: str, th) -> dict:
    """compare.py's verdict on variant `held` of the reference, with the noise floor of the other
    deterministic variants: True where it would fail like an engine would."""
    others = {k: mg.variant_diff(base, r) for k, r in runs.items() if k != held and k in variants.DETERMINISTIC}
    floor = mg.floor_summary(others)
    limits = compare.golden_thresholds_from_floor(floor, base["teacher"], th)
    teacher = compare.compare_logits(base["teacher"], runs[held]["teacher"], limits)
    checked = compare.greedy_checked_steps(base["greedy"]["margins"], floor["greedy"], th.factor, th.near_tie_min)
    greedy = compare.compare_tokens(base["greedy"]["tokens"], runs[held]["greedy"]["tokens"], checked)
    out = {"teacher": not teacher.ok, "greedy": not greedy.ok,
           "over_tracking_limit": teacher.summary["over_tracking_limit"], "hard": teacher.summary["hard"]}
    bd, hd = base["dspark"], runs[held]["dspark"]
    if bd is not None and hd is not None and "dspark" in floor and bd["input_token"] == hd["input_token"]:
        meta = {"config": "", "case": "", "dspark": {"tokens": bd["tokens"], "confidence": bd["confidence"]},
                "noise_floor": {"dspark": floor["dspark"]}}
        g = golden_io.Golden(Path("."), meta, "official", base["teacher"], bd["logits"])
        out["dspark"] = not compare.compare_dspark(g, hd["tokens"], hd["logits"], hd["confidence"], th).ok
    return out


def markdown(path: str) -> str:
    """The README tables from a noise_floor.json."""
    d = json.loads(Path(path).read_text())
    out = ["| mode | variant | worst cos | worst cos, prefill | max rel err | max rel err, prefill | median rel err | "
           "top-1 flips / steps | greedy diverged | DSpark worst cos | DSpark conf. max abs |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, x in d["summary"].items():
        mode, variant = key.split(" ", 1)
        out.append(f"| {mode} | {variant} | {x['worst_cosine']:.4f} | {x['worst_cosine_prefill']:.4f} | "
                   f"{x['rel_err_max']:.3f} | {x['rel_err_max_prefill']:.3f} | {x['rel_err_median_of_cases']:.3f} | "
                   f"{x['top1_flips']} / {x['teacher_steps']} | {x['greedy_diverged_cases']} of 8 | "
                   f"{x['dspark_worst_cosine']:.4f} | {x['dspark_confidence_max_abs']:.3f} |")
    out += ["", "| case (all variants) | prefill rel err | prefill cos | max rel err | worst cos | max margin change | "
            "top-1 flips | greedy: first divergence |", "|---|---|---|---|---|---|---|---|"]
    for case, vs in d["cases"].items():
        x = list(vs.values())
        out.append(f"| {case} | {max(v['rel_err_prefill'] for v in x):.2e} | {min(v['cosine_prefill'] for v in x):.5f} | "
                   f"{max(v['rel_err_max'] for v in x):.3f} | {min(v['worst_cosine'] for v in x):.4f} | "
                   f"{max(v['margin_delta_max'] for v in x):.3f} | {sum(len(v['top1_flips']) for v in x)} / "
                   f"{sum(v['steps'] for v in x)} | {min(v['greedy_first_divergence'] for v in x)} of "
                   f"{x[0]['greedy_tokens']} |")
    out += ["", "| FACTOR, TRACK_ALLOWANCE | held-out variants failing: teacher / greedy / dspark (of 80) |", "|---|---|"]
    for key, x in d["calibration"]["held_out_failures"].items():
        out.append(f"| {key.replace('factor ', '').replace(' allowance ', ', ')} | "
                   f"{x['teacher']} / {x['greedy']} / {x['dspark']} |")
    return "\n".join(out)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--table":
        print(markdown(sys.argv[2]))
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reference-dir", required=True)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--deepinfer")
    src.add_argument("--checkpoints")
    p.add_argument("--cases", default=str(HERE / "cases.json"))
    p.add_argument("--only", nargs="*")
    p.add_argument("--out", default=str(HERE / "noise_floor.json"))
    p.add_argument("--rel-min", type=float, default=compare.REL_ERR_MIN)
    p.add_argument("--near-tie-min", type=float, default=compare.NEAR_TIE_MIN)
    p.add_argument("--modes", nargs="*", default=["official", "fixed"])
    args = p.parse_args()

    import torch

    from reference import Reference, reference_fingerprint, reference_mode

    torch.set_num_threads(1)
    spec = json.loads(Path(args.cases).read_text())
    cases = [c for c in spec["cases"] if not args.only or f"{c['config']}/{c['case']}" in args.only]
    names = sorted({c["config"] for c in cases}, key=list(spec["configs"]).index)
    per_case, loo = {}, {(f, a): {} for f in FACTORS for a in ALLOWANCES}
    with tempfile.TemporaryDirectory(prefix="noise-") as tmp:
        ckpts = mg.checkpoints(args, spec["configs"], names, Path(tmp))
        for name in names:
            mine = [c for c in cases if c["config"] == name]
            cfg = json.loads((ckpts[name] / "config.json").read_text())
            ref = Reference(args.reference_dir, ckpts[name],
                            mg.max_seq_len_for(mine, cfg["text_config"].get("dspark_block_size", 0)))
            for case, mode in [(c, m) for c in mine for m in args.modes]:
                key = f"{name}/{case['case']}" + ("" if mode == "official" else f" ({mode})")
                prompt, teacher = mg.case_inputs(case, ref.tokenizer, ref.config)
                with reference_mode(ref.mod, mode):
                    base = mg.run_all(ref, prompt, teacher, case["greedy_steps"])
                    runs = {}
                    for v in variants.ALL:
                        with variants.variant(ref.mod, v):
                            runs[v] = mg.run_all(ref, prompt, teacher, case["greedy_steps"])
                diffs = {v: mg.variant_diff(base, r) for v, r in runs.items()}
                per_case[key] = {v: case_summary(d, base) for v, d in diffs.items()}
                for f, a in [(f, a) for f in FACTORS for a in ALLOWANCES]:
                    th = compare.Thresholds(factor=f, rel_err_min=args.rel_min, near_tie_min=args.near_tie_min,
                                            track_allowance=a)
                    loo[(f, a)][key] = {v: held_out(base, runs, v, th) for v in variants.ALL}
                for v, s in per_case[key].items():
                    print(f"{v:9s} {key:15s} cos {s['worst_cosine']:.6f} rel max {s['rel_err_max']:.3e} "
                          f"prefill {s['rel_err_prefill']:.2e} maxabs {s['max_abs']:.3f} "
                          f"dmargin {s['margin_delta_max']:.3f} flips {len(s['top1_flips'])} "
                          f"greedy div {s['greedy_first_divergence']}", flush=True)
            del ref
    summary = summarize(per_case)
    calibration = {
        "rel_err_min": args.rel_min,
        "near_tie_min": args.near_tie_min,
        "held_out_failures": {
            f"factor {f} allowance {a}": {k: sum(bool(x.get(k)) for case in loo[(f, a)].values() for x in case.values())
                                          for k in ("teacher", "greedy", "dspark")}
            for f, a in loo
        },
        "detail": {f"factor {f} allowance {a}": loo[(f, a)] for f, a in loo},
    }
    out = {
        "about": "tools/goldens/noise_floor.py: the reference vs itself under equivalent computations "
                 "(variants.py); see tools/goldens/README.md",
        "torch": torch.__version__,
        "reference_files_sha256": reference_fingerprint(args.reference_dir),
        "summary": summary,
        "calibration": calibration,
        "cases": per_case,
    }
    Path(args.out).write_text(golden_io.dump_json(out))
    print(json.dumps({"summary": summary, "held_out_failures": calibration["held_out_failures"]}, indent=1))
    return 0


def case_summary(d: dict, base: dict) -> dict:
    t = d["teacher"]
    margins = mg._margins(base["teacher"])
    out = {
        "steps": len(t["rel_err"]),
        "worst_cosine": float(t["cosine"].min()),
        "rel_err_max": float(t["rel_err"].max()),
        "rel_err_median": float(np.median(t["rel_err"])),
        "rel_err_prefill": float(t["rel_err"][0]),
        "cosine_prefill": float(t["cosine"][0]),
        "max_abs": float(t["max_abs"].max()),
        "margin_delta_max": float(t["margin_delta"].max()),
        "top1_flips": [{"step": int(i), "ref_margin": float(margins[i])} for i in np.nonzero(t["top1_flip"])[0]],
        "bit_identical_steps": int(np.sum(t["max_abs"] == 0)),
        "greedy_first_divergence": d["greedy"]["first_divergence"],
        "greedy_tokens": len(base["greedy"]["tokens"]),
    }
    if "dspark" in d:
        ds = d["dspark"]
        out["dspark_tokens_equal"] = ds["tokens_equal"]
        if ds["rows"] is not None:
            out["dspark_worst_cosine"] = float(ds["rows"]["cosine"].min())
            out["dspark_rel_err_max"] = float(ds["rows"]["rel_err"].max())
            out["dspark_confidence_max_abs"] = float(ds["confidence_abs"].max())
    return out


def summarize(per_case: dict) -> dict:
    by_variant: dict = {}
    for key, vs in per_case.items():
        mode = "fixed" if key.endswith("(fixed)") else "official"
        for v, s in vs.items():
            by_variant.setdefault(f"{mode} {v}", {})[key] = s
    out = {}
    for v, cases in by_variant.items():
        c = list(cases.values())
        flips = [f for x in c for f in x["top1_flips"]]
        out[v] = {
            "worst_cosine": min(x["worst_cosine"] for x in c),
            "worst_cosine_prefill": min(x["cosine_prefill"] for x in c),
            "rel_err_max": max(x["rel_err_max"] for x in c),
            "rel_err_max_prefill": max(x["rel_err_prefill"] for x in c),
            "rel_err_median_of_cases": float(np.median([x["rel_err_median"] for x in c])),
            "max_abs": max(x["max_abs"] for x in c),
            "margin_delta_max": max(x["margin_delta_max"] for x in c),
            "top1_flips": len(flips),
            "largest_margin_flipped": max((f["ref_margin"] for f in flips), default=None),
            "teacher_steps": sum(x["steps"] for x in c),
            "bit_identical_steps": sum(x["bit_identical_steps"] for x in c),
            "greedy_diverged_cases": sum(x["greedy_first_divergence"] < x["greedy_tokens"] for x in c),
            "dspark_tokens_differ": sum(not x.get("dspark_tokens_equal", True) for x in c),
            "dspark_worst_cosine": min((x["dspark_worst_cosine"] for x in c if "dspark_worst_cosine" in x),
                                       default=None),
            "dspark_confidence_max_abs": max((x["dspark_confidence_max_abs"] for x in c
                                              if "dspark_confidence_max_abs" in x), default=None),
        }
    return out


if __name__ == "__main__":
    sys.exit(main())

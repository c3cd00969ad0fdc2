#!/usr/bin/env python3
"""Compare engine output with a golden of the official reference (numpy only; importable and a CLI).

    python tools/goldens/compare.py teacher GOLDEN_DIR ENGINE_LOGITS.npy     (`generate --dump-logits`)
    python tools/goldens/compare.py greedy  GOLDEN_DIR ENGINE_OUTPUT.json    (`generate --json`: output_ids)
    python tools/goldens/compare.py dspark  GOLDEN_DIR DRAFT.json --logits DRAFT.npy
                                            (`deepinfer draft --prompt-ids P --dump-logits DRAFT.npy`)
Exit status 0 when every check passes, 1 when one fails, 2 on bad input. -v prints every step.

Per teacher-forced step i (row i = logits after prompt + teacher[:i]) the report gives the reference and
engine top-1, whether they agree, the near-tie flag, the cosine similarity and the relative error
||engine - ref|| / ||ref|| of the fp32 logits, and the limits of that step. The limits come from the
reference's own noise floor recorded in the golden (noise_floor: how far each variant of the reference --
variants.py, the same mathematics in another summation order -- moved from the golden at every step):

  tracking limit  rel_i <= max(REL_ERR_MIN, FACTOR * env_rel_i), cos_i >= min(MIN_COSINE, 1 - FACTOR^2 (1 - env_cos_i)),
                  env_* = the variants' worst value at any step <= i (a running envelope: equivalent runs
                  drift further apart as they consume more tokens);
  hard limit      the same with env_* = the variants' worst value over the whole case.

A case passes when no step exceeds its hard limit, the prefill row (step 0) is within its tracking limit,
and at most TRACK_ALLOWANCE of the steps exceed their tracking limit. The allowance exists because these
tiny random models are chaotic: a last-ulp difference is amplified by fp8 / fp4 re-quantization of
activations and caches and by discrete choices (indexer top-k on bf16 scores, candidate blocks, expert
routing), so an implementation as exact as the reference meets such an event at another step than the
handful of recorded variants did (README "Noise floor and thresholds": FACTOR, the minimums and the
allowance are calibrated so that every held-out variant of the reference passes).

Top-1 must agree except at near ties. Near tie (the documented rule): the reference's top-1 minus top-2
logit is below max(NEAR_TIE_MIN, FACTOR * env_margin_i) -- env_margin_i the largest change of that margin
any variant showed at a step <= i --, or a variant of the reference itself picked another top-1 at step
i, or the engine's pick is within that band of the reference's best logit. A top-1 difference outside
the band counts as a tracking violation; outside FACTOR * the case's largest margin change it is a hard
failure.

Greedy free-running tokens must be identical for the steps before the first near tie of the greedy run
(same rule, with the margins and margin changes of the greedy run) and before the first step at which any
variant of the reference produced another token; later tokens are reported, not required.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_io import Golden, load_golden  # noqa: E402

# Thresholds: see the module docstring and README "Noise floor and thresholds" (noise_floor.py calibrates).
MIN_COSINE = 0.999  # never require more than this (the lead's bound; the floor allows it only where stable)
FACTOR = 2.0  # engine vs reference may move FACTOR x as far as the reference moves vs itself
REL_ERR_MIN = 2e-2  # relative-error limit where the variants moved less
NEAR_TIE_MIN = 1e-2  # logits; near-tie band where the variants' margins moved less
TRACK_ALLOWANCE = 0.25  # fraction of the steps that may exceed their tracking limit (never the prefill row)
CONFIDENCE_MIN = 0.05  # DSpark confidence (raw logit) absolute error allowed where the variants moved less


@dataclass
class Thresholds:
    factor: float = FACTOR
    rel_err_min: float = REL_ERR_MIN
    near_tie_min: float = NEAR_TIE_MIN
    min_cosine: float = MIN_COSINE
    confidence_min: float = CONFIDENCE_MIN
    track_allowance: float = TRACK_ALLOWANCE


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    den = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / den) if den > 0 else (1.0 if not a.any() and not b.any() else 0.0)


def rel_err(engine: np.ndarray, ref: np.ndarray) -> float:
    """||engine - ref|| / ||ref|| (L2 over the vocabulary)."""
    e = np.asarray(engine, np.float64).ravel()
    r = np.asarray(ref, np.float64).ravel()
    n = np.linalg.norm(r)
    return float(np.linalg.norm(e - r) / n) if n > 0 else float(np.linalg.norm(e))


def margin(row: np.ndarray) -> float:
    """Top-1 minus top-2 logit."""
    top = np.sort(np.asarray(row, np.float64))[-2:]
    return float(top[1] - top[0])


# ---------------------------------------------------------------------------------------------------
# thresholds from a recorded noise floor


def golden_thresholds_from_floor(floor: dict | None, ref_logits: np.ndarray, th: "Thresholds | None" = None) -> dict:
    """Per-step limits (arrays over the teacher-forced steps) from golden.json's noise_floor["teacher"]."""
    th = th or Thresholds()
    n = len(ref_logits)
    if floor is None:  # no recorded floor: the minimums only
        t = {"rel_err": np.zeros(n), "cosine": np.ones(n), "margin_delta": np.zeros(n),
             "top1_flip": np.zeros(n, bool)}
    else:
        t = {k: np.asarray(v) for k, v in floor["teacher"].items()}

    def limits(env_rel, env_cos, env_margin):
        return (np.maximum(th.rel_err_min, th.factor * env_rel),
                np.minimum(th.min_cosine, 1 - th.factor**2 * (1 - env_cos)),
                np.maximum(th.near_tie_min, th.factor * env_margin))

    rel, cos, band = limits(np.maximum.accumulate(t["rel_err"]), np.minimum.accumulate(t["cosine"]),
                            np.maximum.accumulate(t["margin_delta"]))
    rel_h, cos_h, band_h = limits(np.full(n, t["rel_err"].max()), np.full(n, t["cosine"].min()),
                                  np.full(n, t["margin_delta"].max()))
    return {"rel_err": rel, "cosine": cos, "near_tie_margin": band, "near_tie": np.asarray(t["top1_flip"], bool),
            "rel_err_hard": rel_h, "cosine_hard": cos_h, "near_tie_margin_hard": band_h,
            "track_allowance": th.track_allowance}


def greedy_checked_steps(ref_margins: list[float], greedy_floor: dict | None, factor: float = FACTOR,
                         near_min: float = NEAR_TIE_MIN) -> int:
    """How many leading greedy tokens must match: up to the first near tie or the first step at which a
    variant of the reference produced another token."""
    n = len(ref_margins)
    limit = n if greedy_floor is None else min(n, greedy_floor["first_divergence"])
    deltas = [] if greedy_floor is None else greedy_floor["margin_delta"]
    env = 0.0
    for i in range(limit):
        env = max(env, deltas[i] if i < len(deltas) else 0.0)
        if ref_margins[i] < max(near_min, factor * env):
            return i
    return limit


# ---------------------------------------------------------------------------------------------------
# reports


@dataclass
class StepReport:
    step: int
    ref_top1: int
    engine_top1: int
    agree: bool
    near_tie: bool
    ref_margin: float
    cosine: float
    rel_err: float
    max_abs: float
    min_cosine: float
    max_rel_err: float
    ok: bool  # within the tracking limits
    hard: bool = False  # beyond the hard limits
    why: str = ""


@dataclass
class Report:
    name: str
    kind: str
    ok: bool
    steps: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    def format(self, verbose: bool = False) -> str:
        lines = [f"{'PASS' if self.ok else 'FAIL'} {self.kind} {self.name}: "
                 + ", ".join(f"{k} {_fmt(v)}" for k, v in self.summary.items())]
        rows = self.steps if verbose else [s for s in self.steps if isinstance(s, StepReport) and not s.ok]
        for s in rows:
            if isinstance(s, StepReport):
                lines.append(f"  step {s.step:3d}: ref {s.ref_top1:6d} engine {s.engine_top1:6d} "
                             f"{'agree ' if s.agree else 'DIFFER'}{' near-tie' if s.near_tie else '         '} "
                             f"margin {s.ref_margin:7.4f} cos {s.cosine:.6f} (>= {s.min_cosine:.6f}) "
                             f"rel {s.rel_err:.2e} (<= {s.max_rel_err:.2e}) maxabs {s.max_abs:.2e}"
                             f"{'' if s.ok else ('  <== HARD ' if s.hard else '  <-- ') + s.why}")
            else:
                lines.append(f"  {s}")
        lines.extend(f"  {f}" for f in self.failures)
        return "\n".join(lines)


def _fmt(v) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def compare_logits(ref: np.ndarray, eng: np.ndarray, limits: dict, name: str = "", kind: str = "teacher") -> Report:
    """Row-by-row comparison of [steps, vocab] logits with per-row limits (golden_thresholds_from_floor);
    the case rule of the module docstring."""
    ref = np.asarray(ref, np.float32)
    eng = np.asarray(eng, np.float32)
    if ref.shape != eng.shape:
        return Report(name, kind, False, failures=[f"shape: engine {eng.shape}, reference {ref.shape}"])
    steps = []
    for i in range(ref.shape[0]):
        r, e = ref[i], eng[i]
        r1, e1 = int(np.argmax(r)), int(np.argmax(e))
        m = margin(r)
        gap = float(r[r1]) - float(r[e1])  # the engine's pick, in reference logits, below the best
        band, band_h = float(limits["near_tie_margin"][i]), float(limits["near_tie_margin_hard"][i])
        near = bool(limits["near_tie"][i]) or m < band or (e1 != r1 and gap < band)
        c, re = cosine(e, r), rel_err(e, r)
        min_cos, max_rel = float(limits["cosine"][i]), float(limits["rel_err"][i])
        why, hard = [], False
        if r1 != e1 and not near:
            why.append(f"top-1 differs (margin {m:.4f} >= near-tie band {band:.4f})")
            hard |= not (m < band_h or gap < band_h)
        if not np.isfinite(e).all():
            why.append("non-finite logits")
            hard = True
        if not c >= min_cos:
            why.append(f"cosine {c:.6f} < {min_cos:.6f}")
            hard |= not c >= float(limits["cosine_hard"][i])
        if not re <= max_rel:
            why.append(f"rel err {re:.3e} > {max_rel:.3e}")
            hard |= not re <= float(limits["rel_err_hard"][i])
        if hard:
            why.append(f"beyond the hard limits (rel {float(limits['rel_err_hard'][i]):.3e}, "
                       f"cos {float(limits['cosine_hard'][i]):.6f})")
        steps.append(StepReport(i, r1, e1, r1 == e1, near, m, c, re, float(np.max(np.abs(e - r))), min_cos, max_rel,
                                not why, hard, "; ".join(why)))
    n_track = sum(not s.ok for s in steps)
    allowed = int(np.floor(limits.get("track_allowance", 0.0) * len(steps)))
    failures = []
    if any(s.hard for s in steps):
        failures.append(f"{sum(s.hard for s in steps)} step(s) beyond the hard limits")
    if not steps[0].ok:
        failures.append("the prefill row exceeds its limits")
    if n_track > allowed:
        failures.append(f"{n_track} steps exceed their tracking limits (allowed {allowed})")
    summary = {
        "steps": len(steps),
        "top1_agree": sum(s.agree for s in steps),
        "near_ties": sum(s.near_tie for s in steps),
        "differ_at_near_tie": sum((not s.agree) and s.near_tie for s in steps),
        "worst_cosine": min(s.cosine for s in steps),
        "max_rel_err": max(s.rel_err for s in steps),
        "median_rel_err": float(np.median([s.rel_err for s in steps])),
        "prefill_rel_err": steps[0].rel_err,
        "worst_rel_err_over_limit": max(s.rel_err / s.max_rel_err for s in steps),
        "over_tracking_limit": n_track,
        "allowed": allowed,
        "hard": sum(s.hard for s in steps),
    }
    return Report(name, kind, not failures, steps, summary, failures)


def compare_teacher(golden: Golden, engine_logits: np.ndarray, th: Thresholds | None = None) -> Report:
    th = th or Thresholds()
    limits = golden_thresholds_from_floor(golden.meta.get("noise_floor"), golden.teacher_logits, th)
    return compare_logits(golden.teacher_logits, engine_logits, limits, golden.name, "teacher")


def compare_tokens(ref_tokens: list[int], engine_tokens: list[int], checked: int, ref_margins=None,
                   name: str = "", kind: str = "greedy") -> Report:
    """Tokens must be identical for the first `checked` positions; the rest is reported only."""
    n = len(ref_tokens)
    engine_tokens = [int(t) for t in engine_tokens]
    first_diff = next((i for i in range(n) if i >= len(engine_tokens) or engine_tokens[i] != ref_tokens[i]), n)
    failures = []
    if first_diff < checked:
        got = engine_tokens[first_diff] if first_diff < len(engine_tokens) else "(none)"
        m = f" (reference margin {ref_margins[first_diff]:.4f})" if ref_margins is not None else ""
        failures.append(f"token {first_diff} differs before the first near tie (token {checked}): "
                        f"reference {ref_tokens[first_diff]}{m}, engine {got}")
    summary = {"tokens": n, "identical_prefix": first_diff, "required": checked}
    lines = [f"reference {ref_tokens}", f"engine    {engine_tokens[:n]}"]
    return Report(name, kind, not failures, lines, summary, failures)


def compare_greedy(golden: Golden, engine_tokens: list[int], th: Thresholds | None = None) -> Report:
    th = th or Thresholds()
    g = golden.meta["greedy"]
    floor = (golden.meta.get("noise_floor") or {}).get("greedy")
    checked = greedy_checked_steps(g["margin"], floor, th.factor, th.near_tie_min)
    return compare_tokens(g["tokens"], engine_tokens, checked, g["margin"], golden.name, "greedy")


def compare_dspark(golden: Golden, engine_tokens: list[int], engine_logits: np.ndarray,
                   engine_confidence: list[float], th: Thresholds | None = None) -> Report:
    """DSpark drafts. Tokens [sampled, d1..dk]: identical up to the first near tie of the draft logits or
    the first draft a variant of the reference changed. Logits per draft row and the confidences within
    the noise floor of the drafting pass (all rows of one pass share one envelope)."""
    th = th or Thresholds()
    d = golden.meta["dspark"]
    floor = (golden.meta.get("noise_floor") or {}).get("dspark") or {}
    k = len(golden.dspark_logits)
    env_rel = max(floor.get("rel_err", [0.0]))
    env_cos = min(floor.get("cosine", [1.0]))
    env_margin = max(floor.get("margin_delta", [0.0]))
    band = max(th.near_tie_min, th.factor * env_margin)
    margins = [margin(r) for r in golden.dspark_logits]
    # token j + 1 is sampled from logits row j; token 0 is the input and must match
    checked = min(floor.get("first_divergence", k + 1),
                  next((j + 1 for j in range(k) if margins[j] < band), k + 1))
    tok = compare_tokens(d["tokens"], engine_tokens, checked, None, golden.name, "dspark")
    rel_lim = np.full(k, max(th.rel_err_min, th.factor * env_rel))
    cos_lim = np.full(k, min(th.min_cosine, 1 - th.factor**2 * (1 - env_cos)))
    limits = {"rel_err": rel_lim, "cosine": cos_lim, "near_tie_margin": np.full(k, band), "near_tie": np.zeros(k, bool),
              "rel_err_hard": rel_lim, "cosine_hard": cos_lim, "near_tie_margin_hard": np.full(k, band),
              "track_allowance": 0.0}
    # draft rows past the first token divergence are conditioned on other tokens: compare up to it
    rows = min(k, max(1, tok.summary["identical_prefix"]))
    lg = compare_logits(golden.dspark_logits[:rows], np.asarray(engine_logits)[:rows],
                        {a: (b[:rows] if isinstance(b, np.ndarray) else b) for a, b in limits.items()}, golden.name,
                        "dspark")
    conf_err = np.abs(np.asarray(engine_confidence[:rows], np.float64) - np.asarray(d["confidence"][:rows]))
    conf_limit = max(th.confidence_min, th.factor * max(floor.get("confidence_abs", [0.0])))
    failures = tok.failures + ([] if lg.ok else [f"draft row {s.step}: {s.why}" for s in lg.steps if not s.ok])
    if not float(conf_err.max()) <= conf_limit:
        failures.append(f"confidence max abs err {float(conf_err.max()):.3e} > {conf_limit:.3e}")
    summary = {**{f"tokens_{a}": b for a, b in tok.summary.items()},
               "logits_worst_cosine": lg.summary.get("worst_cosine"), "logits_max_rel_err": lg.summary.get("max_rel_err"),
               "confidence_max_abs_err": float(conf_err.max())}
    if floor and floor.get("variants_with_same_input", 1) == 0:
        # every variant of the reference drafted from another input token (greedy[1] is at a near tie):
        # no measured floor for this pass, so its logits and confidences are reported, not judged
        summary["note"] = "no noise floor (every variant drafted from another input token): reported only"
        failures = tok.failures
    return Report(golden.name, "dspark", not failures, tok.steps + lg.steps, summary, failures)


def compare_engram(golden: Golden, rows_by_position: dict[int, list]) -> Report:
    """Engram hash row ids: exact."""
    e = golden.meta["engram"]
    failures = [f"position {p}: reference {want}, engine {rows_by_position.get(p)}"
                for p, want in zip(e["positions"], e["rows"]) if rows_by_position.get(p) != want]
    return Report(golden.name, "engram", not failures, [], {"positions": len(e["positions"])}, failures)


# ---------------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["teacher", "greedy", "dspark"])
    p.add_argument("golden", help="golden case folder (tests/data/goldens/<config>/<case>)")
    p.add_argument("--mode", choices=["official", "fixed"], default="official",
                   help="reference mode to compare with (README \"Reference modes\")")
    p.add_argument("engine", help="teacher: .npy logits; greedy: JSON (first line) with output_ids; dspark: JSON "
                   "(last line) with tokens and confidence")
    p.add_argument("--logits", help="dspark: the draft logits .npy")
    p.add_argument("--factor", type=float, default=FACTOR, help="multiple of the reference's noise floor")
    p.add_argument("--rel-err-min", type=float, default=REL_ERR_MIN)
    p.add_argument("--near-tie-min", type=float, default=NEAR_TIE_MIN)
    p.add_argument("--min-cosine", type=float, default=MIN_COSINE, help="the strictest cosine ever required")
    p.add_argument("--confidence-min", type=float, default=CONFIDENCE_MIN)
    p.add_argument("--track-allowance", type=float, default=TRACK_ALLOWANCE)
    p.add_argument("-v", "--verbose", action="store_true", help="print every step")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    args = p.parse_args(argv)
    th = Thresholds(args.factor, args.rel_err_min, args.near_tie_min, args.min_cosine, args.confidence_min,
                    args.track_allowance)
    try:
        golden = load_golden(args.golden, args.mode)
        if args.kind == "teacher":
            report = compare_teacher(golden, np.load(args.engine), th)
        elif args.kind == "greedy":
            text = Path(args.engine).read_text().strip().splitlines()[0]
            report = compare_greedy(golden, json.loads(text)["output_ids"], th)
        else:
            j = json.loads(Path(args.engine).read_text().strip().splitlines()[-1])
            if not args.logits:
                raise ValueError("dspark needs --logits (deepinfer draft --dump-logits)")
            logits = np.load(args.logits)
            report = compare_dspark(golden, j["tokens"], logits, j["confidence"], th)
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_json(), indent=1, default=str) if args.json else report.format(args.verbose))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

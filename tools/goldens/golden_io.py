"""Golden-data files and checkpoint fingerprints. numpy only (no torch): the model tests import this.

A golden case is a folder tests/data/goldens/<config>/<case>/ holding
  golden.json          inputs (prompt / teacher ids, make-tiny command, checkpoint digest) and the
                       reference's small outputs (greedy tokens, top-2 margins, DSpark drafts, Engram rows)
  teacher_logits.npy   fp32 [len(teacher_ids) + 1, vocab]: row i = logits after prompt + teacher[:i]
  dspark_logits.npy    fp32 [dspark_block_size, vocab]: the Markov-biased draft logits
  *_fixed.npy          the same from the reference in mode "fixed" (golden.json "fixed" holds its small
                       outputs; tools/goldens/README.md "Reference modes")
  config.json          copy of the checkpoint's config.json (for reading; the digest is what is checked)
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FORMAT_VERSION = 1
GOLDEN_JSON = "golden.json"
TEACHER_LOGITS = "teacher_logits.npy"
DSPARK_LOGITS = "dspark_logits.npy"
FIXED_SUFFIX = "_fixed"
MODES = ("official", "fixed")


def read_safetensors_header(path: Path) -> tuple[dict, int]:
    """(header without __metadata__, byte offset of the data section)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header, 8 + n


def checkpoint_files(ckpt: Path) -> list[Path]:
    """The safetensors shards of a checkpoint directory (from the index when there is one)."""
    index = ckpt / "model.safetensors.index.json"
    if index.exists():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [ckpt / n for n in names]
    return sorted(ckpt.glob("*.safetensors"))


def checkpoint_digest(ckpt: str | Path) -> str:
    """sha256 over every tensor (name, dtype, shape, bytes) in name order, plus config.json and
    tokenizer.json. Independent of sharding and of safetensors header layout, so it changes exactly when
    the weights, the config or the tokenizer change -- i.e. when a golden no longer applies."""
    ckpt = Path(ckpt)
    entries = []
    for shard in checkpoint_files(ckpt):
        header, base = read_safetensors_header(shard)
        for name, info in header.items():
            entries.append((name, info["dtype"], tuple(info["shape"]), shard, base + info["data_offsets"][0],
                            info["data_offsets"][1] - info["data_offsets"][0]))
    entries.sort()
    h = hashlib.sha256()
    handles: dict[Path, object] = {}
    try:
        for name, dtype, shape, shard, offset, size in entries:
            f = handles.setdefault(shard, open(shard, "rb"))
            f.seek(offset)
            data = f.read(size)
            h.update(f"{name}|{dtype}|{','.join(map(str, shape))}|{size}\n".encode())
            h.update(data)
    finally:
        for f in handles.values():
            f.close()
    for extra in ("config.json", "tokenizer.json"):
        h.update(f"{extra}\n".encode())
        h.update((ckpt / extra).read_bytes())
    return h.hexdigest()


@dataclass
class Golden:
    """One golden case, loaded, in one reference mode: meta's teacher / greedy / dspark / noise_floor are
    those of that mode."""

    path: Path
    meta: dict
    mode: str
    teacher_logits: np.ndarray  # fp32 [T + 1, vocab]
    dspark_logits: np.ndarray | None  # fp32 [block, vocab]

    @property
    def name(self) -> str:
        return f"{self.meta['config']}/{self.meta['case']}" + ("" if self.mode == "official" else f" ({self.mode})")

    @property
    def prompt_ids(self) -> list[int]:
        return self.meta["prompt_ids"]

    @property
    def teacher_ids(self) -> list[int]:
        return self.meta["teacher_ids"]


def load_golden(path: str | Path, mode: str = "official") -> Golden:
    """mode "official" (the reference as it is) or "fixed" (README "Reference modes")."""
    path = Path(path)
    meta = json.loads((path / GOLDEN_JSON).read_text())
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: golden format_version {meta.get('format_version')}, expected {FORMAT_VERSION}")
    if mode not in MODES:
        raise ValueError(f"reference mode {mode!r}: expected one of {MODES}")
    suffix = ""
    if mode != "official":
        meta = {**meta, **meta[mode]}
        suffix = FIXED_SUFFIX
    teacher = np.load(path / TEACHER_LOGITS.replace(".npy", suffix + ".npy"))
    dspark_path = path / DSPARK_LOGITS.replace(".npy", suffix + ".npy")
    dspark = np.load(dspark_path) if dspark_path.exists() else None
    if teacher.dtype != np.float32 or teacher.shape[0] != len(meta["teacher_ids"]) + 1:
        raise ValueError(f"{path}: {TEACHER_LOGITS} is {teacher.dtype} {teacher.shape}, "
                         f"expected float32 [{len(meta['teacher_ids']) + 1}, vocab]")
    return Golden(path, meta, mode, teacher, dspark)


def find_goldens(root: str | Path) -> list[Path]:
    """Every case folder under root (sorted)."""
    return sorted(p.parent for p in Path(root).glob(f"*/*/{GOLDEN_JSON}"))


def dump_json(obj) -> str:
    """Deterministic JSON text (sorted keys, fixed layout) so regenerated goldens are byte-identical.
    A list of scalars stays on one line; other containers are indented."""

    def scalar(v) -> bool:
        return not isinstance(v, (dict, list, tuple))

    def emit(v, indent: int) -> str:
        pad = " " * indent
        if isinstance(v, dict):
            if not v:
                return "{}"
            items = [f'{pad} {json.dumps(str(k))}: {emit(v[k], indent + 1)}' for k in sorted(v)]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(v, (list, tuple)):
            if all(scalar(x) for x in v):
                return "[" + ", ".join(json.dumps(x) for x in v) + "]"
            items = [f"{pad} {emit(x, indent + 1)}" for x in v]
            return "[\n" + ",\n".join(items) + "\n" + pad + "]"
        return json.dumps(v)

    return emit(obj, 0) + "\n"

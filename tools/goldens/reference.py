"""Run the official DeepSeek-V4.1 reference (inference/model.py as vendored by tenstorrent/tt-metal, with
its CPU kernel port) on a `deepinfer make-tiny` checkpoint. Needs torch (>= 2.9: float8_e8m0fnu and
float4_e2m1fn_x2), numpy, sympy and tokenizers. Nothing here is imported by the default test suite.

The reference files are not part of this repository (tools/goldens/README.md says where to get them);
`import_reference(dir)` loads them from a folder as a package, because model.py imports its siblings
package-relatively (`from .engram import ...`).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
import types
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_io import checkpoint_files, read_safetensors_header  # noqa: E402

REFERENCE_FILES = ("model.py", "engram.py", "kernel_cpu.py", "vision.py", "image_processor.py")
_PACKAGE = "deepseek_v41_reference"


def import_reference(ref_dir: str | Path) -> types.ModuleType:
    """Import <ref_dir>/model.py as `deepseek_v41_reference.model` and return it."""
    ref_dir = Path(ref_dir).resolve()
    missing = [f for f in REFERENCE_FILES if not (ref_dir / f).is_file()]
    if missing:
        raise FileNotFoundError(f"--reference-dir {ref_dir}: missing {', '.join(missing)} (see tools/goldens/README.md)")
    _require_pillow()
    if _PACKAGE in sys.modules:
        loaded = Path(sys.modules[_PACKAGE].__path__[0])
        if loaded != ref_dir:
            raise RuntimeError(f"reference already imported from {loaded}; one reference per process")
    else:
        pkg = types.ModuleType(_PACKAGE)
        pkg.__path__ = [str(ref_dir)]
        sys.modules[_PACKAGE] = pkg
    return importlib.import_module(_PACKAGE + ".model")


def _require_pillow() -> None:
    """image_processor.py (imported by model.py) imports PIL at module level (for image inputs, which the
    goldens never use): Pillow must be installed (scripts/setup.sh --with-torch does)."""
    try:
        import PIL  # noqa: F401
    except ImportError as e:
        raise ImportError("the reference imports PIL: install Pillow (scripts/setup.sh --with-torch)") from e


def reference_fingerprint(ref_dir: str | Path) -> dict[str, str]:
    """sha256 of each reference file, recorded in the goldens."""
    ref_dir = Path(ref_dir)
    return {f: hashlib.sha256((ref_dir / f).read_bytes()).hexdigest() for f in REFERENCE_FILES}


# --------------------------------------------------------------------------------------------------
# config.json (nested HF layout) -> reference ModelArgs (spec §2.3)

# text_config key -> ModelArgs field (identical names are listed with themselves)
_TEXT_TO_ARGS = {
    "vocab_size": "vocab_size",
    "hidden_size": "dim",
    "moe_intermediate_size": "moe_inter_dim",
    "num_hidden_layers": "n_layers",
    "num_nextn_predict_layers": "n_mtp_layers",
    "num_attention_heads": "n_heads",
    "n_routed_experts": "n_routed_experts",
    "n_shared_experts": "n_shared_experts",
    "num_experts_per_tok": "n_activated_experts",
    "scoring_func": "score_func",
    "gate_temp": "gate_temp",
    "norm_topk_prob": "norm_topk_prob",
    "routed_scaling_factor": "route_scale",
    "swiglu_limit": "swiglu_limit",
    "q_lora_rank": "q_lora_rank",
    "head_dim": "head_dim",
    "qk_rope_head_dim": "rope_head_dim",
    "rms_norm_eps": "norm_eps",
    "o_groups": "o_groups",
    "o_lora_rank": "o_lora_rank",
    "sliding_window": "window_size",
    "compress_ratios": "compress_ratios",
    "kv_source_layer_ids": "kv_source_layers",
    "index_source_layer_ids": "index_source_layers",
    "compress_rope_theta": "compress_rope_theta",
    "rope_theta": "rope_theta",
    "index_n_heads": "index_n_heads",
    "index_head_dim": "index_head_dim",
    "index_topk": "index_topk",
    "candidate_source_layer_id": "candidate_source_layer",
    "candidate_topk_blocks": "candidate_topk_blocks",
    "candidate_block_size": "candidate_block_size",
    "hc_mult": "hc_mult",
    "hc_sinkhorn_iters": "hc_sinkhorn_iters",
    "hc_eps": "hc_eps",
    "engram_layer_ids": "engram_layer_ids",
    "engram_num_embeddings": "engram_num_embeddings",
    "engram_max_ngram_size": "engram_max_ngram_size",
    "engram_vocab_size": "engram_vocab_size",
    "engram_n_heads": "engram_n_heads",
    "engram_head_dim": "engram_head_dim",
    "engram_pad_token_id": "engram_pad_id",
    "engram_compressed_vocab_size": "engram_compressed_vocab_size",
    "dspark_block_size": "dspark_block_size",
    "dspark_noise_token_id": "dspark_noise_token_id",
    "dspark_target_layer_ids": "dspark_target_layer_ids",
    "dspark_markov_rank": "dspark_markov_rank",
    "dspark_n_routed_experts": "dspark_n_routed_experts",
    "dspark_num_experts_per_tok": "dspark_n_activated_experts",
}
# text_config keys with no ModelArgs field, and the only value the reference supports for each
_TEXT_FIXED = {
    "model_type": None,  # any
    "dtype": "bfloat16",
    "num_key_value_heads": 1,
    "attention_bias": False,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "topk_method": "noaux_tc",
    "max_position_embeddings": None,  # not model shape; max_seq_len is set by the caller
    "rope_scaling": None,  # handled below
    "bos_token_id": None,
    "eos_token_id": None,
    "pad_token_id": None,
}


def model_args_from_config(model_mod, config: dict, max_seq_len: int, temperature: float = 0.0):
    """ModelArgs for the reference from our nested config.json. Unknown keys are an error, so a new
    config field cannot be silently dropped."""
    text = config["text_config"]
    quant = config.get("quantization_config") or {}
    kw: dict = {}
    for key, value in text.items():
        if key in _TEXT_TO_ARGS:
            kw[_TEXT_TO_ARGS[key]] = tuple(value) if isinstance(value, list) else value
        elif key in _TEXT_FIXED:
            want = _TEXT_FIXED[key]
            if want is not None and value != want:
                raise ValueError(f"config.json text_config.{key} = {value!r}: the reference supports only {want!r}")
        else:
            raise ValueError(f"config.json text_config.{key}: no mapping to the reference's ModelArgs")
    rope = text.get("rope_scaling")
    if rope:
        if rope.get("rope_type", rope.get("type")) != "yarn":
            raise ValueError(f"rope_scaling {rope}: the reference implements YaRN only")
        kw["original_seq_len"] = int(rope["original_max_position_embeddings"])
        kw["rope_factor"] = float(rope["factor"])
        kw["beta_fast"] = int(rope["beta_fast"])
        kw["beta_slow"] = int(rope["beta_slow"])
    else:
        kw["original_seq_len"] = 0
    if quant.get("quant_method") != "fp8" or list(quant.get("weight_block_size", [])) != [32, 32]:
        raise ValueError(f"quantization_config {quant}: the reference needs fp8 with 32x32 blocks")
    if quant.get("scale_fmt") != "ue8m0":
        raise ValueError(f"quantization_config.scale_fmt {quant.get('scale_fmt')!r}: the reference uses ue8m0")
    kw["dtype"] = "fp8"
    kw["expert_dtype"] = quant.get("expert_dtype", "fp4")
    if kw["expert_dtype"] != "fp4":
        raise ValueError(f"expert_dtype {kw['expert_dtype']!r}: only fp4 (MXFP4) checkpoints are supported")
    kw["image_token_id"] = config.get("image_token_id", 129264)
    kw["max_batch_size"] = 1
    kw["max_seq_len"] = max_seq_len
    kw["temperature"] = temperature  # sample(): temperature 0 -> argmax
    kw["vision_n_layers"] = 0
    known = {f.name for f in fields(model_mod.ModelArgs)}
    assert set(kw) <= known, set(kw) - known
    return model_mod.ModelArgs(**kw)


# --------------------------------------------------------------------------------------------------
# checkpoint reading and the convert.py transforms (spec §3.4)

_DTYPES = {
    "BF16": torch.bfloat16,
    "F16": torch.float16,
    "F32": torch.float32,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E8M0": torch.float8_e8m0fnu,
    "I8": torch.int8,
    "U8": torch.uint8,
    "I32": torch.int32,
    "I64": torch.int64,
}


def read_checkpoint(ckpt: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint in its storage dtype (F8_E8M0 read as float8_e8m0fnu)."""
    out: dict[str, torch.Tensor] = {}
    for shard in checkpoint_files(Path(ckpt)):
        header, base = read_safetensors_header(shard)
        data = bytearray(shard.read_bytes())
        for name, info in header.items():
            begin, end = info["data_offsets"]
            raw = torch.frombuffer(data, dtype=torch.uint8, offset=base + begin, count=end - begin) if end > begin \
                else torch.empty(0, dtype=torch.uint8)
            out[name] = raw.view(_DTYPES[info["dtype"]]).reshape(info["shape"]).clone()
    return out


def dequant_fp8_block(weight: torch.Tensor, scale: torch.Tensor, block: int = 32) -> torch.Tensor:
    """fp8 e4m3 [out, in] x e8m0 [ceil(out/b), ceil(in/b)] -> bf16: product in fp32, rounded to bf16."""
    rows, cols = weight.shape
    s = scale.float().repeat_interleave(block, 0)[:rows].repeat_interleave(block, 1)[:, :cols]
    return (weight.float() * s).to(torch.bfloat16)


def convert_checkpoint(tensors: dict[str, torch.Tensor], vision: bool = False) -> dict[str, torch.Tensor]:
    """What the official convert.py does for one rank (spec §3.4), plus dropping the vision-only tensors:
    * mtp.*.embed / mtp.*.head are dropped (the DSpark blocks share the backbone's);
    * wo_a is dequantized to bf16 (fp8 x its 32x32 e8m0 block scale, product in fp32, rounded) and its
      scale dropped;
    * routed-expert I8 weights are reinterpreted as float4_e2m1fn_x2 (no data change);
    * F8_E8M0 scales stay float8_e8m0fnu;
    * without vision, gate.bias_vl (present on every block of the release) is dropped."""
    out: dict[str, torch.Tensor] = {}
    for name, t in tensors.items():
        if name.startswith("mtp.") and (".embed." in name or ".head." in name) and "markov_head" not in name:
            continue
        if name.endswith(".wo_a.scale"):
            continue
        if name.endswith(".wo_a.weight"):
            t = dequant_fp8_block(t, tensors[name[: -len("weight")] + "scale"])
        elif t.dtype == torch.int8:
            if ".experts." not in name:
                raise ValueError(f"{name}: I8 outside the routed experts")
            t = t.view(torch.float4_e2m1fn_x2)
        if not vision and (name.endswith(".gate.bias_vl") or name.startswith(("vision.", "aligner.", "image_"))):
            continue
        out[name] = t
    return out


def load_into(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy the converted checkpoint into the model's parameters, strictly: every parameter loaded once,
    every tensor used, same shape; dtype changes only where the reference upcasts bf16 to fp32."""
    params = dict(model.named_parameters())  # tied mtp.*.embed / mtp.*.head appear once, as embed / head
    missing = sorted(set(params) - set(state))
    unexpected = sorted(set(state) - set(params))
    if missing or unexpected:
        raise ValueError(f"checkpoint/model mismatch: missing {missing[:8]} ({len(missing)}), "
                         f"unexpected {unexpected[:8]} ({len(unexpected)})")
    with torch.no_grad():
        for name, p in params.items():
            src = state[name]
            if tuple(src.shape) != tuple(p.shape):
                raise ValueError(f"{name}: checkpoint shape {tuple(src.shape)}, model {tuple(p.shape)}")
            if p.dtype == torch.float4_e2m1fn_x2:
                if src.dtype != p.dtype:
                    raise ValueError(f"{name}: checkpoint {src.dtype}, model {p.dtype}")
                p.data.view(torch.uint8).copy_(src.view(torch.uint8))
            elif src.dtype == p.dtype:
                p.data.copy_(src)
            elif src.dtype == torch.bfloat16 and p.dtype == torch.float32:
                p.data.copy_(src.float())  # exact: head, ratio-2 compressor, confidence head
            else:
                raise ValueError(f"{name}: checkpoint {src.dtype} cannot load into {p.dtype}")


class TokenizerShim:
    """What engram.build_compressed_token_map needs of a HF tokenizer: `backend_tokenizer` (a
    tokenizers.Tokenizer) and len() = vocabulary size with the added tokens."""

    def __init__(self, tokenizer_json: str | Path):
        from tokenizers import Tokenizer

        self.backend_tokenizer = Tokenizer.from_file(str(tokenizer_json))

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def added_token_ids(self) -> set[int]:
        return set(self.backend_tokenizer.get_added_tokens_decoder().keys())


@contextmanager
def stale_index_key_fix(mod):
    """Reference mode "fixed": every index-key owner publishes its own key cache on every forward.

    The official Indexer publishes `shared_attn.index_k` only when its compressor returned a latent. A
    ratio-2 source in a one-token decode step at an even position completes no group, so its indexer
    (and every layer reusing its top-k) scores against whatever keys were published last -- in decode,
    the ratio-1 source's per-token keys from the previous forward, cut at end_pos // 2 entries. The spec
    (§5.3.3, §5.3.5) describes the intended semantics: each index source scores its own source's keys.
    This wrapper restores that; it changes nothing when a group completes, nor in prefill."""
    orig = mod.Indexer.forward

    def forward(self, x, qr, latent, start_pos, offset):
        if self.owns_k:
            mod.shared_attn.index_k = self.k_cache
        return orig(self, x, qr, latent, start_pos, offset)

    mod.Indexer.forward = forward
    try:
        yield
    finally:
        mod.Indexer.forward = orig


@contextmanager
def reference_mode(mod, mode: str):
    """"official": the reference as it is; "fixed": with stale_index_key_fix."""
    if mode == "official":
        yield
    elif mode == "fixed":
        with stale_index_key_fix(mod):
            yield
    else:
        raise ValueError(f"unknown reference mode {mode!r}")


MODES = ("official", "fixed")


@dataclass
class StepOutput:
    token: int  # argmax of logits (temperature 0)
    logits: torch.Tensor  # fp32 [vocab]
    main_hidden: torch.Tensor | None  # [1, S, targets * dim]: every row, as the reference returns it
    output_ids: torch.Tensor


class Reference:
    """The reference Transformer on one checkpoint. `fresh()` builds a new model (the reference keeps its
    caches in module buffers and module globals, so every run starts from a fresh one)."""

    def __init__(self, ref_dir: str | Path, ckpt: str | Path, max_seq_len: int):
        self.mod = import_reference(ref_dir)
        self.ckpt = Path(ckpt)
        self.config = json.loads((self.ckpt / "config.json").read_text())
        self.args = model_args_from_config(self.mod, self.config, max_seq_len)
        self.tokenizer = TokenizerShim(self.ckpt / "tokenizer.json")
        if len(self.tokenizer) != self.args.vocab_size:
            raise ValueError(f"tokenizer has {len(self.tokenizer)} ids, config vocab_size {self.args.vocab_size}")
        self.state = convert_checkpoint(read_checkpoint(self.ckpt))
        self.model = None

    def fresh(self):
        self.model = None
        with self.mod.set_dtype(torch.bfloat16):
            model = self.mod.Transformer(self.args, self.tokenizer)
        load_into(model, self.state)
        self.model = model.eval()
        return self.model

    def forward(self, ids: list[int], start_pos: int) -> StepOutput:
        with self.mod.set_dtype(torch.bfloat16):
            output_ids, logits, main_hidden = self.model(torch.tensor([ids], dtype=torch.long), start_pos)
        return StepOutput(int(output_ids[0]), logits[0].float().clone(), main_hidden, output_ids)

    def forward_spec(self, output_ids: torch.Tensor, main_hidden: torch.Tensor, start_pos: int):
        with self.mod.set_dtype(torch.bfloat16):
            return self.model.forward_spec(output_ids, main_hidden, start_pos)

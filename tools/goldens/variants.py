"""Equivalent computations of the reference in another summation order, for its noise floor.

Each variant is a context manager over the imported reference module (model.py's namespace) that swaps in
our own formulation of the same mathematics (spec §4.3 GEMMs, §5.3.6 sparse attention, §5.4 MoE) with
another order of the floating-point sums. A C++ engine legitimately differs from the reference in exactly
these ways, so the spread between the variants and the baseline is what the comparison thresholds must
allow. All deterministic variants run with torch threads 1, so the goldens that record them regenerate
bit for bit.

  reverse    F.linear sums its input dimension in reverse (router gate, LM head, hc mixes, compressor,
             indexer wk / weights_proj, Markov and confidence heads); sparse_attn visits its index list in
             reverse (other online-softmax block order and bf16 probability rounding points); the MoE adds
             the shared expert first, then the routed experts from the last to the first.
  rotate     the same with the input dimension and the index list rotated by half instead of reversed,
             and the MoE adding the routed experts first-to-last after the shared expert.
  linear     only the F.linear part of `reverse`.
  attention  only the sparse_attn part of `reverse`.
  threads4   torch.set_num_threads(4) (torch's own GEMM blocking); not used for the goldens because
             multi-threaded reductions are not guaranteed to be reproducible across machines.

The fp8 / fp4 block GEMMs are not varied: their 32-element block sums of e4m3 x e4m3 (or e2m1 x e4m3)
products are exact in fp32 for these shapes, so a reordered version returns the same bits (measured:
identical logits on every case).
"""

from __future__ import annotations

import sys
from contextlib import ExitStack, contextmanager


def _reorder(kind: str, n: int):
    import torch

    if kind == "reverse":
        return torch.arange(n - 1, -1, -1)
    if kind == "rotate":
        return torch.roll(torch.arange(n), n // 2)
    raise ValueError(kind)


@contextmanager
def _linear(mod, kind: str):
    import torch.nn.functional as F

    saved = mod.F

    class FunctionalProxy:
        def __getattr__(self, name):
            return getattr(F, name)

        @staticmethod
        def linear(x, w, bias=None):
            perm = _reorder(kind, x.size(-1))
            return F.linear(x[..., perm], w[..., perm], bias)

    mod.F = FunctionalProxy()
    try:
        yield
    finally:
        mod.F = saved


@contextmanager
def _attention(mod, kind: str):
    saved = mod.sparse_attn

    def sparse_attn(q, kv, attn_sink, topk_idxs, softmax_scale):
        perm = _reorder(kind, topk_idxs.size(-1))
        return saved(q, kv, attn_sink, topk_idxs[..., perm].contiguous(), softmax_scale)

    mod.sparse_attn = sparse_attn
    try:
        yield
    finally:
        mod.sparse_attn = saved


@contextmanager
def _moe(mod, kind: str):
    import torch

    saved = mod.MoE.forward

    def forward(self, x, image_mask=None):
        shape = x.size()
        flat = x.view(-1, self.dim)
        weights, indices = self.gate(flat, None if image_mask is None else image_mask.flatten())
        out = self.shared_experts(flat).float()
        order = range(self.n_routed_experts - 1, -1, -1) if kind == "reverse" else range(self.n_routed_experts)
        for e in order:
            rows, slot = torch.where(indices == e)
            if rows.numel():
                out[rows] += self.experts[e](flat[rows], weights[rows, slot, None])
        return out.type_as(flat).view(shape)

    mod.MoE.forward = forward
    try:
        yield
    finally:
        mod.MoE.forward = saved


@contextmanager
def _threads(n: int):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def variant(mod, name: str):
    """Run the reference module `mod` as variant `name` inside the block."""
    with ExitStack() as stack:
        if name in ("reverse", "rotate"):
            stack.enter_context(_linear(mod, name))
            stack.enter_context(_attention(mod, name))
            stack.enter_context(_moe(mod, name))
        elif name == "linear":
            stack.enter_context(_linear(mod, "reverse"))
        elif name == "attention":
            stack.enter_context(_attention(mod, "reverse"))
        elif name == "threads4":
            stack.enter_context(_threads(4))
        else:
            raise ValueError(f"unknown variant {name}")
        yield


DETERMINISTIC = ("reverse", "rotate", "linear", "attention")
ALL = DETERMINISTIC + ("threads4",)

if __name__ == "__main__":
    print(__doc__)
    sys.exit(0)

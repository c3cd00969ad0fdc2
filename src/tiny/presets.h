// Tiny-checkpoint presets: small configs that keep every block type of spec §2.5 so tests exercise the
// whole model at small cost. vocab_size, the special ids and engram_compressed_vocab_size are filled in
// from the tokenizer by the generator.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace deepinfer::tiny {

// "default": 8 backbone layers (window-only; Engram; ratio-2 kv+index source with Engram; ratio-2
//            consumer; ratio-1 kv + index + candidate source; ratio-1 consumer; candidate-consuming index
//            source; consumer) + 3 DSpark blocks; dim 256, window 16, short candidate blocks.
// "wide":    other dims, expert counts and layer lists (dim 384, 6 heads, 16 experts top-4, two ratio-2
//            sources, Engram with 3 heads).
// "long":    long-context setting (window 128, index_topk 64, candidate blocks 8 x 16) for prompts of
//            thousands of tokens.
// "release": the released dimensions (spec §2.2) with 2 backbone layers (ratio 0 + Engram, ratio-2
//            source) and the DSpark blocks, 16 experts per layer; for kernel / decode-step benchmarks.
Expected<model::ModelConfig> tiny_preset(const std::string& name);
std::vector<std::string> tiny_preset_names();

}  // namespace deepinfer::tiny

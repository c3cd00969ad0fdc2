// A V4.1-style tokenizer.json made from the V3-family file (spec §8.2): same model, merges, normalizer,
// pre-tokenizer, post-processor and decoder; added tokens = V3's plus the V4.1 ones, 129,280 ids in all.
// Which contents are known and which are placeholders is documented in docs/tokenizer.md.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer::tokenizer {

// `v3_json`: text of a V3-family tokenizer.json (BPE with 128,000 base entries; added ids in {0, 1, 2} and
// 128000..129279). Ids 128000..129279 become, in order of precedence: the V4.1 protocol tokens of
// protocol_tokens.h; the multimodal placeholders S13 reports at 129265..129270 and 129279; the V3 entry at
// that id (except 128799, which V4.1 turns into <｜System｜>); else "<｜place▁holder▁no▁N｜>" (N = id - 128000,
// special, not normalized), the V3 naming of unused ids.
Expected<std::string> make_v41_tokenizer_json(std::string_view v3_json);

// tokenizer_config.json of the V4.1 release as spec §8.2 describes it (add_bos_token false, pad = eos).
std::string make_v41_tokenizer_config_json();

}  // namespace deepinfer::tokenizer

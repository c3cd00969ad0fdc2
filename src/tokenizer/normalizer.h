// HF tokenizers normalizers (tokenizer.json "normalizer"), the subset this engine needs: the identity
// (null or an empty Sequence) used by DeepSeek's tokenizers, and the steps of the Engram token map (spec
// §5.5.1): NFC/NFD/NFKC/NFKD, StripAccents, Lowercase, Strip, Replace, Prepend, Sequence. ICU does the
// Unicode work; where HF's Rust semantics differ from ICU's defaults the code follows HF (see normalizer.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace deepinfer::tokenizer {

class Normalizer {
   public:
    // Parses a tokenizer.json "normalizer" value (null allowed). Unknown types give kUnsupported naming them.
    static Expected<Normalizer> from_json(const nlohmann::json& spec);

    // True when normalize() never changes its input (null, or a Sequence of nothing).
    bool is_identity() const { return steps_.empty(); }

    // Normalizes valid UTF-8 `text` in place. Fails only when a Replace regex fails (see Regex::find_all).
    Status normalize(std::string& text) const;

    struct Step;

   private:
    std::vector<std::shared_ptr<const Step>> steps_;
};

}  // namespace deepinfer::tokenizer

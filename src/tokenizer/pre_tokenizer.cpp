// Split and ByteLevel pre-tokenizers (see pre_tokenizer.h). Split semantics follow tokenizers'
// NormalizedString::split: regex matches and the gaps between them cover the piece, then the behavior decides
// which pieces are kept or merged, and empty pieces are dropped (PreTokenizedString::split).
#include "tokenizer/pre_tokenizer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace deepinfer::tokenizer {
namespace {

// openai/gpt-2 encoder.py pattern, as HF's ByteLevel pre-tokenizer compiles it when use_regex is true.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Expected<SplitBehavior> parse_behavior(const nlohmann::json& v, const std::string& where) {
    if (!v.is_string()) return corrupt("{}: \"behavior\" must be a string", where);
    const std::string b = v.get<std::string>();
    if (b == "Removed") return SplitBehavior::kRemoved;
    if (b == "Isolated") return SplitBehavior::kIsolated;
    if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
    if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
    if (b == "Contiguous") return SplitBehavior::kContiguous;
    return corrupt("{}: unknown split behavior \"{}\"", where, b);
}

void flatten(const nlohmann::json& spec, std::vector<const nlohmann::json*>& out) {
    if (spec.is_object() && spec.value("type", "") == "Sequence" && spec.contains("pretokenizers") &&
        spec["pretokenizers"].is_array()) {
        for (const auto& child : spec["pretokenizers"]) flatten(child, out);
    } else {
        out.push_back(&spec);
    }
}

}  // namespace

Expected<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& spec) {
    if (spec.is_null()) return corrupt("pre_tokenizer is null; byte-level BPE needs a ByteLevel pre-tokenizer");
    std::vector<const nlohmann::json*> steps;
    flatten(spec, steps);
    PreTokenizer p;
    for (size_t k = 0; k < steps.size(); ++k) {
        const nlohmann::json& step = *steps[k];
        const std::string where = fmt::format("pre_tokenizer step {}", k);
        if (!step.is_object() || !step.contains("type") || !step["type"].is_string()) {
            return corrupt("{}: expected an object with a string \"type\"", where);
        }
        const std::string type = step["type"].get<std::string>();
        if (type == "Split") {
            auto pattern = step.find("pattern");
            if (pattern == step.end() || !pattern->is_object()) return corrupt("{} (Split): \"pattern\" must be an object", where);
            Expected<Regex> regex = corrupt("{} (Split): \"pattern\" needs a \"Regex\" or \"String\" string", where);
            if (pattern->contains("Regex") && (*pattern)["Regex"].is_string()) {
                regex = Regex::compile((*pattern)["Regex"].get<std::string>());
            } else if (pattern->contains("String") && (*pattern)["String"].is_string()) {
                regex = Regex::compile_literal((*pattern)["String"].get<std::string>());
            }
            if (!regex) return regex.status().with_context(where + " (Split)");
            DI_ASSIGN_OR_RETURN(SplitBehavior behavior, parse_behavior(step.value("behavior", nlohmann::json()), where));
            auto invert = step.find("invert");
            if (invert != step.end() && !invert->is_boolean()) return corrupt("{} (Split): \"invert\" must be a boolean", where);
            p.splits_.push_back({std::move(regex).value(), behavior, invert != step.end() && invert->get<bool>()});
        } else if (type == "ByteLevel") {
            if (k + 1 != steps.size()) {
                return error(StatusCode::kUnsupported, "{}: ByteLevel must be the last pre-tokenizer step", where);
            }
            p.add_prefix_space_ = step.value("add_prefix_space", true);
            if (step.value("use_regex", true)) {
                DI_ASSIGN_OR_RETURN(Regex gpt2, Regex::compile(kGpt2Pattern));
                p.byte_level_regex_.push_back(std::move(gpt2));
            }
        } else {
            return error(StatusCode::kUnsupported,
                         "{}: pre-tokenizer type \"{}\" is not supported (supported: Sequence, Split, ByteLevel)", where, type);
        }
    }
    if (steps.empty() || steps.back()->value("type", "") != "ByteLevel") {
        return error(StatusCode::kUnsupported,
                     "pre_tokenizer does not end with ByteLevel; only byte-level BPE tokenizers are supported");
    }
    return p;
}

namespace {

// One Split step over one piece: the matches and the gaps between them, flagged, then behavior applied.
Status split_piece(std::string_view piece, const Regex& regex, SplitBehavior behavior, bool invert,
                   PreTokenizerScratch& s, std::vector<std::string_view>& out) {
    s.matches.clear();
    DI_RETURN_IF_ERROR(regex.find_all(piece, s.matches));
    auto& marked = s.marked;
    marked.clear();
    uint32_t prev = 0;
    for (const MatchSpan& m : s.matches) {
        if (prev != m.start) marked.push_back({{prev, m.start}, invert});
        marked.push_back({m, !invert});
        prev = m.end;
    }
    if (prev != piece.size()) marked.push_back({{prev, static_cast<uint32_t>(piece.size())}, invert});

    auto emit = [&](MatchSpan span) {
        if (span.end > span.start) out.push_back(piece.substr(span.start, span.end - span.start));
    };
    switch (behavior) {
        case SplitBehavior::kIsolated:
            for (const auto& [span, is_match] : marked) emit(span);
            break;
        case SplitBehavior::kRemoved:
            for (const auto& [span, is_match] : marked) {
                if (!is_match) emit(span);
            }
            break;
        case SplitBehavior::kContiguous:
        case SplitBehavior::kMergedWithPrevious: {
            // Contiguous: runs of equally flagged pieces join. MergedWithPrevious: a match joins the piece
            // before it unless that piece is itself a match.
            std::vector<MatchSpan> acc;
            bool previous_match = false;
            for (const auto& [span, is_match] : marked) {
                const bool join = behavior == SplitBehavior::kContiguous ? is_match == previous_match
                                                                         : is_match && !previous_match;
                if (join && !acc.empty()) {
                    acc.back().end = span.end;
                } else {
                    acc.push_back(span);
                }
                previous_match = is_match;
            }
            for (const MatchSpan& span : acc) emit(span);
            break;
        }
        case SplitBehavior::kMergedWithNext: {
            // Mirror image of MergedWithPrevious: a match joins the piece after it.
            std::vector<MatchSpan> acc;
            bool previous_match = false;
            for (auto it = marked.rbegin(); it != marked.rend(); ++it) {
                const auto& [span, is_match] = *it;
                if (is_match && !previous_match && !acc.empty()) {
                    acc.back().start = span.start;
                } else {
                    acc.push_back(span);
                }
                previous_match = is_match;
            }
            for (auto it = acc.rbegin(); it != acc.rend(); ++it) emit(*it);
            break;
        }
    }
    return Status::ok();
}

}  // namespace

Status PreTokenizer::split(std::string_view text, PreTokenizerScratch& s, std::vector<std::string_view>& out) const {
    s.owned.clear();
    s.current.clear();
    if (text.empty()) return Status::ok();
    s.current.push_back(text);
    for (const SplitStep& step : splits_) {
        s.next.clear();
        for (std::string_view piece : s.current) {
            DI_RETURN_IF_ERROR(split_piece(piece, step.regex, step.behavior, step.invert, s, s.next));
        }
        s.current.swap(s.next);
    }
    // ByteLevel: optional leading space per piece, then the optional GPT-2 split (Isolated).
    for (std::string_view piece : s.current) {
        if (add_prefix_space_ && piece.front() != ' ') {
            std::string& prefixed = s.owned.emplace_back();
            prefixed.reserve(piece.size() + 1);
            prefixed.push_back(' ');
            prefixed.append(piece);
            piece = prefixed;
        }
        if (byte_level_regex_.empty()) {
            out.push_back(piece);
        } else {
            DI_RETURN_IF_ERROR(split_piece(piece, byte_level_regex_.front(), SplitBehavior::kIsolated, false, s, out));
        }
    }
    return Status::ok();
}

}  // namespace deepinfer::tokenizer

// DeepSeek-V4.1 protocol tokens (spec §8.2, §8.3): contents, release ids, and the added-token flags our
// generated tokenizers give them. Known from the spec: contents and ids. Flags: <｜System｜> (not special,
// normalized) and <｜deepseek_image｜> (neither) are stated by source S13; User/Assistant keep the V3 file's
// flags; for the other protocol tokens the released flags are not known and we use the V3 convention for
// protocol tokens (not special, normalized) — an assumption, marked [I] in docs/tokenizer.md.
#pragma once

#include <cstdint>
#include <string_view>

namespace deepinfer::tokenizer {

inline constexpr std::string_view kBosToken = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEosToken = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kPadToken = "<｜▁pad▁｜>";
inline constexpr std::string_view kSystemToken = "<｜System｜>";
inline constexpr std::string_view kUserToken = "<｜User｜>";
inline constexpr std::string_view kAssistantToken = "<｜Assistant｜>";
inline constexpr std::string_view kThinkStartToken = "<think>";
inline constexpr std::string_view kThinkEndToken = "</think>";
inline constexpr std::string_view kDsmlToken = "｜DSML｜";
inline constexpr std::string_view kLatestReminderToken = "<｜latest_reminder｜>";
inline constexpr std::string_view kImageToken = "<｜deepseek_image｜>";
inline constexpr std::string_view kEotToken = "<|EOT|>";

struct ProtocolToken {
    std::string_view content;
    int32_t v41_id;  // id in the released V4.1 tokenizer
    bool special;
    bool normalized;
};

// The V4.1 tokens above the V3 set that the renderer and the engine use, in id order.
inline constexpr ProtocolToken kV41ProtocolTokens[] = {
    {kSystemToken, 128799, false, true},
    {kUserToken, 128803, false, true},
    {kAssistantToken, 128804, false, true},
    {kEotToken, 128805, true, true},
    {kThinkStartToken, 128821, false, true},
    {kThinkEndToken, 128822, false, true},
    {kDsmlToken, 128825, false, true},
    {kLatestReminderToken, 128828, false, true},
    {"<｜action｜>", 128829, false, true},
    {"<｜query｜>", 128830, false, true},
    {"<｜authority｜>", 128831, false, true},
    {"<｜domain｜>", 128832, false, true},
    {"<｜title｜>", 128836, false, true},
    {"<｜read_url｜>", 128845, false, true},
    {kImageToken, 129264, false, false},
};

inline constexpr int32_t kV41VocabSize = 129280;

}  // namespace deepinfer::tokenizer

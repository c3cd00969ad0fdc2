// Engram compressed token map (see engram_token_map.h). The normalizer is built from the same HF normalizer
// description engram.py builds, so its semantics are those of normalizer.cpp (Rust lowercase, not Python's).
#include "tokenizer/engram_token_map.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <nlohmann/json.hpp>
#include <unordered_map>

#include "tokenizer/normalizer.h"

namespace deepinfer::tokenizer {
namespace {

constexpr const char* kEngramNormalizer = R"({"type": "Sequence", "normalizers": [
  {"type": "NFKC"}, {"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"},
  {"type": "Replace", "pattern": {"Regex": "[ \t\r\n]+"}, "content": " "},
  {"type": "Replace", "pattern": {"Regex": "^ $"}, "content": "\ue000"},
  {"type": "Strip", "strip_left": true, "strip_right": true},
  {"type": "Replace", "pattern": {"String": "\ue000"}, "content": " "}]})";

constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

}  // namespace

Expected<std::vector<int32_t>> build_engram_token_map(const Tokenizer& tokenizer, int32_t vocab_size, int32_t* n_classes) {
    if (vocab_size <= 0) return invalid_argument("engram token map: vocab_size must be positive, got {}", vocab_size);
    DI_ASSIGN_OR_RETURN(Normalizer normalizer, Normalizer::from_json(nlohmann::json::parse(kEngramNormalizer)));
    std::unordered_map<std::string, int32_t> classes;
    classes.reserve(static_cast<size_t>(vocab_size));
    std::vector<int32_t> table(static_cast<size_t>(vocab_size));
    std::string key;
    for (int32_t id = 0; id < vocab_size; ++id) {
        std::string text;
        if (tokenizer.has_id(id)) {
            DI_ASSIGN_OR_RETURN(text, tokenizer.decode(std::span<const int32_t>(&id, 1), /*skip_special=*/false));
        }
        if (text.find(kReplacementUtf8) != std::string::npos) {
            key = std::string(*tokenizer.id_to_token(id));
        } else {
            key = text;
            DI_RETURN_IF_ERROR(normalizer.normalize(key));
            if (key.empty()) key = text;
        }
        auto [it, inserted] = classes.emplace(key, static_cast<int32_t>(classes.size()));
        table[id] = it->second;
    }
    if (n_classes) *n_classes = static_cast<int32_t>(classes.size());
    return table;
}

std::string token_map_sha256(const std::vector<int32_t>& table) {
    std::vector<unsigned char> bytes(table.size() * 4);
    for (size_t i = 0; i < table.size(); ++i) {
        const auto v = static_cast<uint32_t>(table[i]);
        for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<unsigned char>(v >> (8 * b));
    }
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
    std::string hex;
    for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
    return hex;
}

}  // namespace deepinfer::tokenizer

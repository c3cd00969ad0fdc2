// Typed reading of request fields with OpenAI / pydantic semantics: an absent or null field keeps the
// default; a present one of the wrong type is an error. Every error is kInvalidArgument and its message starts
// with the field's full name ("stream_options.include_usage must be a boolean, got string \"yes\"") so that
// from_status can name the parameter.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer::server {

using Json = nlohmann::ordered_json;

// Request bodies may nest arrays / objects this deep at most: a parsed document is copied and walked
// recursively (nlohmann::json's copy constructor, our readers), so a body of 100000 '[' would overflow a
// connection thread's stack and take the server down. OpenAI bodies nest ~6 levels (tool schemas a few more).
constexpr int kMaxJsonDepth = 128;
// The deepest nesting of arrays and objects in a JSON text (brackets inside strings not counted), scanning
// stopped once it passes `limit` (then limit + 1 is returned). Malformed text is the parser's to refuse.
int json_nesting_depth(std::string_view text, int limit);

// "string \"abc\"", "number 1.5", "boolean true", "null", "array", "object" (long strings shortened).
std::string describe_json(const Json& value);

// True when obj has `key` with a non-null value.
bool has_field(const Json& obj, std::string_view key);

// `prefix` is prepended to the key in messages ("stream_options.").
Status read_bool(const Json& obj, std::string_view key, bool* out, std::string_view prefix = "");
// Integers; a float with an integral value is accepted (pydantic's lax mode), 1.5 is not. Range inclusive.
Status read_int(const Json& obj, std::string_view key, int64_t min, int64_t max, int64_t* out,
                std::string_view prefix = "");
Status read_int(const Json& obj, std::string_view key, int* out, std::string_view prefix = "");
// Any 64-bit integer, negative values kept as their two's-complement bits (seed).
Status read_seed(const Json& obj, std::string_view key, uint64_t* out);
Status read_float(const Json& obj, std::string_view key, float* out, std::string_view prefix = "");
Status read_string(const Json& obj, std::string_view key, std::string* out, std::string_view prefix = "");
// A string or a list of strings (OpenAI "stop").
Status read_string_or_list(const Json& obj, std::string_view key, std::vector<std::string>* out);
// A list of integers in [0, 2^31).
Status read_token_ids(const Json& obj, std::string_view key, std::vector<int32_t>* out);

}  // namespace deepinfer::server

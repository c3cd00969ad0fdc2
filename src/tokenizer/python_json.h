// Python's json.dumps(value, ensure_ascii=False) for a JSON value: the V4.1 prompt embeds tool schemas and
// tool-call argument values in exactly that form (", " and ": " separators, keys in their original order,
// Python float repr, only control characters, '"' and '\' escaped).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace deepinfer::tokenizer {

std::string python_json_dumps(const nlohmann::ordered_json& value);

}  // namespace deepinfer::tokenizer

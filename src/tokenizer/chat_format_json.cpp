// OpenAI-style chat messages (JSON) -> ChatMessage (see chat_format.h), following the message normalization
// of vLLM's V4.1 adapter (S12: deepseek_v41.py _normalize_messages).
#include <fmt/format.h>

#include "tokenizer/chat_format.h"
#include "tokenizer/protocol_tokens.h"

namespace deepinfer::tokenizer {
namespace {

using Json = nlohmann::ordered_json;

Expected<std::string> content_text(const Json& content, std::vector<size_t>* image_parts) {
    if (content.is_null()) return std::string();
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) return invalid_argument("content must be a string, null or a list of parts");
    std::string text;
    for (size_t k = 0; k < content.size(); ++k) {
        const Json& part = content[k];
        const std::string type = part.is_object() && part.contains("type") && part["type"].is_string() ? part["type"].get<std::string>() : "";
        if (k) text += "\n\n";
        if (type == "text" || type == "input_text" || type == "output_text") {
            if (part.contains("text") && part["text"].is_string()) text += part["text"].get<std::string>();
        } else if (type == "image_url" || type == "input_image" || type == "image_pil") {
            text += kImageToken;
            image_parts->push_back(k);
        } else {
            return invalid_argument("content part {} has type \"{}\"; V4.1 takes text and image parts only", k, type);
        }
    }
    return text;
}

std::string string_field(const Json& object, const char* key) {
    auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Expected<ChatMessage> message_from_json(const Json& m) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) return invalid_argument("expected an object with a string \"role\"");
    ChatMessage message;
    DI_ASSIGN_OR_RETURN(message.role, parse_chat_role(m["role"].get<std::string>()));
    DI_ASSIGN_OR_RETURN(message.content, content_text(m.value("content", Json()), &message.image_parts));
    for (const char* key : {"reasoning_content", "reasoning"}) {
        if (m.contains(key) && m[key].is_string()) message.reasoning_content = m[key].get<std::string>();
    }
    if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
        for (size_t k = 0; k < m["tool_calls"].size(); ++k) {
            const Json& call = m["tool_calls"][k];
            if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
                return invalid_argument("tool_calls[{}]: expected {{\"function\": {{...}}}}", k);
            }
            const Json& function = call["function"];
            ToolCall tc;
            tc.id = string_field(call, "id");
            tc.name = string_field(function, "name");
            tc.name_space = string_field(call, "namespace");
            if (tc.name_space.empty()) tc.name_space = string_field(function, "namespace");
            const Json arguments = function.value("arguments", Json());
            tc.arguments = arguments.is_string() ? arguments.get<std::string>() : arguments.dump();
            message.tool_calls.push_back(std::move(tc));
        }
    }
    message.tool_call_id = string_field(m, "tool_call_id");
    if (m.contains("response_format") && !m["response_format"].is_null()) message.response_format_json = m["response_format"].dump();
    message.task = string_field(m, "task");
    message.without_eos = m.value("wo_eos", false);
    return message;
}

}  // namespace

Expected<std::vector<ChatMessage>> chat_messages_from_json(const nlohmann::ordered_json& messages) {
    if (!messages.is_array()) return invalid_argument("messages: expected an array");
    std::vector<ChatMessage> out;
    for (size_t k = 0; k < messages.size(); ++k) {
        try {
            Expected<ChatMessage> m = message_from_json(messages[k]);
            if (!m) return m.status().with_context(fmt::format("messages[{}]", k));
            out.push_back(std::move(m).value());
        } catch (const nlohmann::json::exception& e) {
            return invalid_argument("messages[{}]: {}", k, e.what());
        }
    }
    return out;
}

}  // namespace deepinfer::tokenizer

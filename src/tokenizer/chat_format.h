// The DeepSeek-V4.1 prompt renderer (spec §8.3): the official encoding/encoding.py `encode_messages`, as read
// through vLLM's adaptation (source S12), re-implemented: chat and thinking modes, reasoning effort, system
// messages (first and mid-conversation), tools in DSML syntax, response formats, past assistant turns with
// or without their reasoning (drop_thinking), tool results merged into user turns as <tool_result> blocks,
// latest-reminder messages and task tokens. Plus the ids that split generated text into reasoning and content.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {

enum class ChatRole { kSystem, kUser, kAssistant, kTool, kLatestReminder };

// "system" / "developer" (rendered as system, like vLLM's V4.1 adapter) / "user" / "assistant" / "tool" /
// "latest_reminder".
Expected<ChatRole> parse_chat_role(std::string_view role);

struct ToolCall {
    std::string id;          // OpenAI tool_call id; orders the tool results that answer this call
    std::string name;        // function name, possibly "namespace::name"
    std::string name_space;  // explicit namespace (OpenAI extension), empty when none
    std::string arguments;   // the arguments as JSON text (an object; a string holding one is accepted too)
};

struct ChatMessage {
    ChatRole role = ChatRole::kUser;
    std::string content;                           // text; image parts are "<｜deepseek_image｜>"
    std::optional<std::string> reasoning_content;  // assistant: the reasoning before the answer
    std::vector<ToolCall> tool_calls;              // assistant
    std::string tool_call_id;                      // tool: the call this result answers
    std::string response_format_json;              // system: a JSON schema the reply must follow, empty = none
    std::string task;                              // internal task token: action, query, authority, domain, title, read_url
    bool without_eos = false;                      // assistant: leave the turn open (continue a partial answer)
    std::vector<size_t> image_parts;               // indices in the JSON content list of the image parts
};

enum class ThinkingMode { kChat, kThinking };

struct ChatRenderOptions {
    ThinkingMode thinking_mode = ThinkingMode::kThinking;  // vLLM's V4.1 default
    int reasoning_effort = 75;                             // 1..100; see parse_reasoning_effort
    bool drop_thinking = true;  // drop the reasoning of assistant turns before the last user turn
    bool add_bos = true;
    // OpenAI "tools" array as JSON text, empty = none. Attached to the first system message (one with empty
    // content is inserted at the front when there is none), as vLLM's V4.1 adapter does. Tools disable
    // drop_thinking.
    std::string tools_json;
};

// Messages from an OpenAI chat "messages" array, normalized as vLLM's V4.1 adapter does: "developer" is a
// system message; content may be a string, null, or a list of parts whose texts are joined with "\n\n" and
// whose images become <｜deepseek_image｜>; "reasoning" is accepted for "reasoning_content"; tool-call
// arguments may be JSON text or an object. Extension keys: "task", "wo_eos", and "response_format" on system
// messages. Errors name the message index and field.
Expected<std::vector<ChatMessage>> chat_messages_from_json(const nlohmann::ordered_json& messages);

// Reasoning effort from an API value: "low" = 50, "high" = 75 (the default), "max" = 100, or "1".."100".
// ("none" is not an effort: callers map it to chat mode, as vLLM does.)
Expected<int> parse_reasoning_effort(std::string_view value);

// The prompt text. Errors (kInvalidArgument) for an effort outside 1..100, an unknown task, malformed tools
// JSON, or conflicting tool namespaces; each names the message index.
Expected<std::string> render_chat(std::span<const ChatMessage> messages, const ChatRenderOptions& options);

// Ids of <think> and </think>: generated text is reasoning until </think>, content after it.
struct ReasoningTokenIds {
    int32_t think_start = -1;
    int32_t think_end = -1;
};
Expected<ReasoningTokenIds> reasoning_token_ids(const Tokenizer& tokenizer);

// True when the prompt leaves a <think> open, so the model's output starts with reasoning (thinking mode);
// false when the last think token is </think> (chat mode) or there is none.
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace deepinfer::tokenizer

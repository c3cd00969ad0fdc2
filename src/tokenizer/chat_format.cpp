// V4.1 prompt rendering (see chat_format.h). The steps follow encode_messages of the official encoder as
// vLLM adapts it (S12: deepseek_v41_encoding.py): merge tool messages into user turns, order tool results by
// the preceding assistant's calls, drop old reasoning, then render message by message. The literal texts
// below (tool instructions, response-format preamble, DSML tags) are protocol strings the model was trained
// on and must match byte for byte.
#include "tokenizer/chat_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "tokenizer/protocol_tokens.h"
#include "tokenizer/python_json.h"

namespace deepinfer::tokenizer {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kToolsPreamble =
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools by "
    "writing a \"<｜DSML｜ calls>\" block like the following:\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke "
    "name=\"$TOOL_NAME\">\n<｜DSML｜ parameter name=\"$PARAMETER_NAME\" "
    "string=\"true|false\">$PARAMETER_VALUE</｜DSML｜ parameter>\n...\n</｜DSML｜ invoke>\n<｜DSML｜ invoke "
    "name=\"$TOOL_NAME2\">\n...\n</｜DSML｜ invoke>\n</｜DSML｜ calls>\n\nString parameters should be specified "
    "as is and set `string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass the value "
    "in JSON format and set `string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by <think>), you MUST "
    "output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n### Available Tool "
    "Schemas\n\n";
constexpr std::string_view kToolsPostamble =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";
constexpr std::string_view kResponseFormatPreamble =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

const std::map<std::string, std::string, std::less<>>& task_tokens() {
    static const std::map<std::string, std::string, std::less<>> kTasks = {
        {"action", "<｜action｜>"}, {"query", "<｜query｜>"},   {"authority", "<｜authority｜>"},
        {"domain", "<｜domain｜>"}, {"title", "<｜title｜>"}, {"read_url", "<｜read_url｜>"},
    };
    return kTasks;
}

struct Block {
    bool tool_result = false;
    std::string text;         // text, or the tool result content
    std::string tool_use_id;  // tool results only
};

// A message after tool results are merged: user turns carry blocks.
struct Turn {
    ChatRole role;
    const ChatMessage* source = nullptr;  // null for a user turn made from tool results
    std::vector<Block> blocks;            // user turns
    bool has_tools = false;               // the system message that carries options.tools_json
    std::string task() const { return source ? source->task : std::string(); }
};

// Splits "ns::name" and checks it against an explicit namespace (_split_tool_name of the encoder).
Expected<std::pair<std::string, std::string>> split_tool_name(std::string name, std::string name_space) {
    if (size_t sep = name.find("::"); sep != std::string::npos) {
        const std::string prefix = name.substr(0, sep);
        if (!name_space.empty() && name_space != prefix) {
            return invalid_argument("conflicting tool namespaces: \"{}\" != \"{}\"", name_space, prefix);
        }
        name_space = prefix;
        name = name.substr(sep + 2);
    }
    if (name.find("::") != std::string::npos) return invalid_argument("tool name must not contain '::': \"{}\"", name);
    if (name_space.find("::") != std::string::npos) {
        return invalid_argument("tool namespace must not contain '::': \"{}\"", name_space);
    }
    return std::pair{std::move(name_space), std::move(name)};
}

Expected<std::string> encoded_tool_name(const std::string& name, const std::string& name_space) {
    DI_ASSIGN_OR_RETURN(auto split, split_tool_name(name, name_space));
    return split.first.empty() ? split.second : fmt::format("{}::{}", split.first, split.second);
}

// The "## Tools" section: each OpenAI tool's function object, namespace folded into its name (and its
// description, when the namespace is an object with one), as Python's json.dumps, one per line.
Expected<std::string> render_tools(const std::string& tools_json) {
    Json tools = Json::parse(tools_json, nullptr, false);
    if (!tools.is_array()) return invalid_argument("tools: expected a JSON array of tools");
    std::vector<std::string> schemas;
    for (size_t k = 0; k < tools.size(); ++k) {
        const Json& tool = tools[k];
        if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
            !tool["function"].contains("name") || !tool["function"]["name"].is_string()) {
            return invalid_argument("tools[{}]: expected {{\"function\": {{\"name\": ...}}}}", k);
        }
        Json function = tool["function"];
        if (tool.contains("namespace") && !tool["namespace"].is_null()) function["namespace"] = tool["namespace"];
        Json name_space = function.contains("namespace") ? function["namespace"] : Json();
        std::string ns_name;
        if (name_space.is_object() && name_space.contains("name") && name_space["name"].is_string()) {
            ns_name = name_space["name"].get<std::string>();
        } else if (name_space.is_string()) {
            ns_name = name_space.get<std::string>();
        }
        Expected<std::string> name = encoded_tool_name(function["name"].get<std::string>(), ns_name);
        if (!name) return name.status().with_context(fmt::format("tools[{}]", k));
        function["name"] = *name;
        function.erase("namespace");
        if (name_space.is_object() && name_space.contains("description") && name_space["description"].is_string() &&
            !name_space["description"].get<std::string>().empty()) {
            std::string description = function.contains("description") && function["description"].is_string()
                                          ? function["description"].get<std::string>()
                                          : std::string();
            std::string joined = name_space["description"].get<std::string>();
            joined += "\n";
            joined += description;
            function["description"] = joined;
        }
        schemas.push_back(python_json_dumps(function));
    }
    return fmt::format("{}{}{}", kToolsPreamble, fmt::join(schemas, "\n"), kToolsPostamble);
}

// Tool-call arguments as DSML parameters: a JSON object (possibly double-encoded); anything else is passed as
// one string parameter named "arguments".
std::string render_arguments(const std::string& arguments) {
    Json parsed = arguments;
    for (int k = 0; k < 2 && parsed.is_string(); ++k) {
        Json next = Json::parse(parsed.get<std::string>(), nullptr, false);
        if (next.is_discarded()) break;
        parsed = std::move(next);
    }
    if (!parsed.is_object()) parsed = Json{{"arguments", arguments}};
    std::vector<std::string> params;
    for (const auto& [key, value] : parsed.items()) {
        const bool is_string = value.is_string();
        params.push_back(fmt::format("<{} parameter name=\"{}\" string=\"{}\">{}</{} parameter>", kDsmlToken, key,
                                     is_string ? "true" : "false",
                                     is_string ? value.get<std::string>() : python_json_dumps(value), kDsmlToken));
    }
    return fmt::format("{}", fmt::join(params, "\n"));
}

Expected<std::string> render_tool_calls(const std::vector<ToolCall>& calls) {
    std::vector<std::string> invokes;
    for (const ToolCall& call : calls) {
        DI_ASSIGN_OR_RETURN(std::string name, encoded_tool_name(call.name, call.name_space));
        invokes.push_back(fmt::format("<{} invoke name=\"{}\">\n{}\n</{} invoke>", kDsmlToken, name,
                                      render_arguments(call.arguments), kDsmlToken));
    }
    return fmt::format("\n\n<{} calls>\n{}\n</{} calls>", kDsmlToken, fmt::join(invokes, "\n"), kDsmlToken);
}

// merge_tool_messages: tool results become tool_result blocks of a user turn; consecutive user-side
// messages (tool results and user messages) share one turn unless the open turn carries a task.
std::vector<Turn> merge_turns(std::span<const ChatMessage> messages) {
    std::vector<Turn> turns;
    for (const ChatMessage& m : messages) {
        const bool open_user = !turns.empty() && turns.back().role == ChatRole::kUser;
        if (m.role == ChatRole::kTool) {
            Block block{true, m.content, m.tool_call_id};
            if (open_user) {
                turns.back().blocks.push_back(std::move(block));
            } else {
                turns.push_back(Turn{ChatRole::kUser, nullptr, {std::move(block)}});
            }
        } else if (m.role == ChatRole::kUser) {
            if (open_user && turns.back().task().empty()) {
                turns.back().blocks.push_back(Block{false, m.content, {}});
            } else {
                turns.push_back(Turn{ChatRole::kUser, &m, {Block{false, m.content, {}}}});
            }
        } else {
            turns.push_back(Turn{m.role, &m, {}});
        }
    }
    return turns;
}

// sort_tool_results_by_call_order: tool results follow the order of the last assistant's tool calls (a
// stable sort; unknown ids sort as position 0).
void order_tool_results(std::vector<Turn>& turns) {
    std::map<std::string, size_t> order;
    for (Turn& t : turns) {
        if (t.role == ChatRole::kAssistant && t.source && !t.source->tool_calls.empty()) {
            order.clear();
            for (size_t k = 0; k < t.source->tool_calls.size(); ++k) {
                if (!t.source->tool_calls[k].id.empty()) order[t.source->tool_calls[k].id] = k;
            }
        } else if (t.role == ChatRole::kUser && !order.empty()) {
            std::vector<Block> results;
            for (const Block& b : t.blocks) {
                if (b.tool_result) results.push_back(b);
            }
            if (results.size() < 2) continue;
            std::stable_sort(results.begin(), results.end(), [&](const Block& a, const Block& b) {
                auto rank = [&](const Block& x) { auto it = order.find(x.tool_use_id); return it == order.end() ? 0 : it->second; };
                return rank(a) < rank(b);
            });
            size_t next = 0;
            for (Block& b : t.blocks) {
                if (b.tool_result) b = results[next++];
            }
        }
    }
}

// The last user turn; a system message after the first counts as one (find_last_user_index).
int last_user_index(const std::vector<Turn>& turns) {
    for (int i = static_cast<int>(turns.size()) - 1; i >= 0; --i) {
        if (turns[i].role == ChatRole::kUser || (turns[i].role == ChatRole::kSystem && i > 0)) return i;
    }
    return -1;
}

Expected<std::string> render_turn(const std::vector<Turn>& turns, int index, const ChatRenderOptions& options,
                                  bool drop_thinking, const std::string& tools_json) {
    const Turn& turn = turns[index];
    const bool thinking = options.thinking_mode == ThinkingMode::kThinking;
    const int last_user = last_user_index(turns);
    const std::string content = turn.source ? turn.source->content : std::string();
    std::string prompt;
    const bool effort_prefix = index == 0 && thinking;
    if (index == 0 && (effort_prefix || turn.role == ChatRole::kSystem)) prompt += kSystemToken;
    if (effort_prefix) {
        prompt += fmt::format(
            "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough the reasoning)\n\n",
            options.reasoning_effort);
    }
    switch (turn.role) {
        case ChatRole::kSystem: {
            if (index > 0) prompt += kSystemToken;
            prompt += content;
            if (turn.has_tools) {
                DI_ASSIGN_OR_RETURN(std::string tools, render_tools(tools_json));
                prompt += "\n\n";
                prompt += tools;
            }
            if (!turn.source->response_format_json.empty()) {
                Json schema = Json::parse(turn.source->response_format_json, nullptr, false);
                if (schema.is_discarded()) return invalid_argument("response_format is not valid JSON");
                prompt += "\n\n";
                prompt += kResponseFormatPreamble;
                prompt += python_json_dumps(schema);
            }
            break;
        }
        case ChatRole::kUser: {
            prompt += kUserToken;
            for (size_t k = 0; k < turn.blocks.size(); ++k) {
                if (k) prompt += "\n\n";
                const Block& b = turn.blocks[k];
                if (b.tool_result) prompt += "<tool_result>";
                prompt += b.text;
                if (b.tool_result) prompt += "</tool_result>";
            }
            break;
        }
        case ChatRole::kLatestReminder:
            prompt += kLatestReminderToken;
            prompt += content;
            break;
        case ChatRole::kTool:
            return Status(StatusCode::kInternal, "tool messages are merged into user turns before rendering");
        case ChatRole::kAssistant: {
            const ChatMessage& m = *turn.source;
            std::string calls;
            if (!m.tool_calls.empty()) {
                DI_ASSIGN_OR_RETURN(calls, render_tool_calls(m.tool_calls));
            }
            const bool previous_has_task = index > 0 && !turns[index - 1].task().empty();
            std::string reasoning;
            if (thinking && !previous_has_task && (!drop_thinking || index > last_user)) {
                // Reasoning of turns before the last user turn is never rendered when drop_thinking holds
                // (_drop_thinking_messages removes it and this condition skips it).
                reasoning = m.reasoning_content.value_or("") + std::string(kThinkEndToken);
            }
            prompt += reasoning + m.content + calls;
            if (!m.without_eos) prompt += kEosToken;
            break;
        }
    }

    // What follows the turn: nothing when a non-assistant turn comes next; otherwise a task token, or the
    // assistant header with the thinking token that opens the reply.
    if (index + 1 < static_cast<int>(turns.size()) && turns[index + 1].role != ChatRole::kAssistant &&
        turns[index + 1].role != ChatRole::kLatestReminder) {
        return prompt;
    }
    if (const std::string task = turn.task(); !task.empty()) {
        auto it = task_tokens().find(task);
        if (it == task_tokens().end()) {
            return invalid_argument("message {}: unknown task \"{}\" (valid: action, query, authority, domain, title, "
                                    "read_url)", index, task);
        }
        if (task != "action") {
            prompt += it->second;
        } else {
            prompt += kAssistantToken;
            prompt += thinking ? kThinkStartToken : kThinkEndToken;
            prompt += it->second;
        }
    } else if (turn.role == ChatRole::kUser || (turn.role == ChatRole::kSystem && index > 0)) {
        prompt += kAssistantToken;
        const bool open = thinking && (!drop_thinking || index >= last_user);
        prompt += open ? kThinkStartToken : kThinkEndToken;
    }
    return prompt;
}

}  // namespace

Expected<ChatRole> parse_chat_role(std::string_view role) {
    if (role == "system" || role == "developer") return ChatRole::kSystem;
    if (role == "user") return ChatRole::kUser;
    if (role == "assistant") return ChatRole::kAssistant;
    if (role == "tool") return ChatRole::kTool;
    if (role == "latest_reminder") return ChatRole::kLatestReminder;
    return invalid_argument("unknown chat role \"{}\"", role);
}

Expected<int> parse_reasoning_effort(std::string_view value) {
    if (value == "low") return 50;
    if (value == "high") return 75;
    if (value == "max") return 100;
    int effort = 0;
    bool digits = !value.empty() && value.size() <= 3 && std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) effort = std::stoi(std::string(value));
    if (!digits || effort < 1 || effort > 100) {
        return invalid_argument("reasoning effort \"{}\": expected low, high, max or an integer in 1..100", value);
    }
    return effort;
}

Expected<std::string> render_chat(std::span<const ChatMessage> messages, const ChatRenderOptions& options) {
    if (options.reasoning_effort < 1 || options.reasoning_effort > 100) {
        return invalid_argument("reasoning effort {} is outside 1..100", options.reasoning_effort);
    }
    std::vector<ChatMessage> with_system;  // only used when tools need a system message to live in
    bool has_tools = false;
    if (!options.tools_json.empty()) {
        Json tools = Json::parse(options.tools_json, nullptr, false);
        if (!tools.is_array()) return invalid_argument("tools: expected a JSON array of tools");
        has_tools = !tools.empty();  // an empty list means no tools, as in Python's truth test
    }
    if (has_tools && std::none_of(messages.begin(), messages.end(), [](const ChatMessage& m) { return m.role == ChatRole::kSystem; })) {
        ChatMessage system;
        system.role = ChatRole::kSystem;
        with_system.push_back(std::move(system));
        with_system.insert(with_system.end(), messages.begin(), messages.end());
        messages = with_system;
    }
    std::vector<Turn> turns = merge_turns(messages);
    order_tool_results(turns);
    if (has_tools) {
        for (Turn& t : turns) {
            if (t.role == ChatRole::kSystem) {
                t.has_tools = true;
                break;
            }
        }
    }
    const bool drop_thinking = options.drop_thinking && !has_tools;  // tools keep all reasoning
    std::string prompt = options.add_bos ? std::string(kBosToken) : std::string();
    for (int i = 0; i < static_cast<int>(turns.size()); ++i) {
        Expected<std::string> part = render_turn(turns, i, options, drop_thinking, options.tools_json);
        if (!part) return part.status().with_context(fmt::format("message {}", i));
        prompt += *part;
    }
    return prompt;
}

Expected<ReasoningTokenIds> reasoning_token_ids(const Tokenizer& tokenizer) {
    auto start = tokenizer.token_id(kThinkStartToken);
    auto end = tokenizer.token_id(kThinkEndToken);
    if (!start || !end) return Status(StatusCode::kNotFound, "tokenizer has no <think> / </think> tokens");
    return ReasoningTokenIds{*start, *end};
}

bool prompt_opens_reasoning(std::string_view prompt) {
    const size_t open = prompt.rfind(kThinkStartToken);
    const size_t close = prompt.rfind(kThinkEndToken);
    return open != std::string_view::npos && (close == std::string_view::npos || close < open);
}

}  // namespace deepinfer::tokenizer

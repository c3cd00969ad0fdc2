// `deepinfer render-prompt`: the V4.1 prompt (spec §8.3) of an OpenAI-style chat request in a JSON file, and
// with a tokenizer also its ids. Input: {"messages": [...], "tools": [...], "thinking": true,
// "reasoning_effort": "high" | 1..100 | "none", "drop_thinking": true, "add_bos": true}.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/chat_format.h"
#include "tools/commands.h"
#include "tools/tokenizer_source.h"

namespace deepinfer::cli {
namespace {

struct RenderArgs {
    TokenizerSource source;
    std::string request;
};

Expected<tokenizer::ChatRenderOptions> options_from_json(const nlohmann::ordered_json& r) {
    tokenizer::ChatRenderOptions o;
    bool thinking = r.value("thinking", true);
    const auto& effort = r.value("reasoning_effort", nlohmann::ordered_json());
    if (effort.is_string() && effort.get<std::string>() == "none") {
        thinking = false;
    } else if (effort.is_string()) {
        DI_ASSIGN_OR_RETURN(o.reasoning_effort, tokenizer::parse_reasoning_effort(effort.get<std::string>()));
    } else if (effort.is_number_integer()) {
        DI_ASSIGN_OR_RETURN(o.reasoning_effort, tokenizer::parse_reasoning_effort(std::to_string(effort.get<int64_t>())));
    }
    o.thinking_mode = thinking ? tokenizer::ThinkingMode::kThinking : tokenizer::ThinkingMode::kChat;
    o.drop_thinking = r.value("drop_thinking", true);
    o.add_bos = r.value("add_bos", true);
    if (r.contains("tools") && !r["tools"].is_null()) o.tools_json = r["tools"].dump();
    return o;
}

Status run(const RenderArgs& args) {
    std::ifstream in(args.request, std::ios::binary);
    if (!in) return Status(StatusCode::kNotFound, fmt::format("{}: cannot open", args.request));
    std::ostringstream buffer;
    buffer << in.rdbuf();
    auto request = nlohmann::ordered_json::parse(buffer.str(), nullptr, false);
    if (!request.is_object()) return invalid_argument("{}: expected a JSON object", args.request);
    DI_ASSIGN_OR_RETURN(auto messages, tokenizer::chat_messages_from_json(request.value("messages", nlohmann::ordered_json())));
    DI_ASSIGN_OR_RETURN(auto options, options_from_json(request));
    DI_ASSIGN_OR_RETURN(std::string prompt, tokenizer::render_chat(messages, options));
    if (args.source.model_dir.empty() && args.source.tokenizer_file.empty()) {
        std::fwrite(prompt.data(), 1, prompt.size(), stdout);
        return Status::ok();
    }
    DI_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, load_tokenizer(args.source));
    DI_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode(prompt));
    nlohmann::json out = {{"prompt", prompt}, {"ids", ids}, {"starts_in_reasoning", tokenizer::prompt_opens_reasoning(prompt)}};
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return Status::ok();
}

}  // namespace

Command make_render_prompt_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto args = std::make_shared<RenderArgs>();
        auto* sub = app.add_subcommand("render-prompt", "Render the V4.1 prompt of a chat request (JSON file)");
        sub->add_option("--request", args->request, "JSON file: {\"messages\": [...], \"tools\": [...], ...}")->required();
        add_tokenizer_options(sub, args->source);
        sub->callback([args, exit_code] {
            Status s = run(*args);
            if (!s.is_ok()) fmt::print(stderr, "error: {}\n", s.message());
            *exit_code = s.is_ok() ? 0 : 1;
        });
    }};
}

}  // namespace deepinfer::cli

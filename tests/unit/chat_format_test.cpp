// V4.1 prompt renderer (spec §8.3). Expected strings are the spec's examples and hand-derived renderings of
// the official encoder's rules (vLLM adaptation, source S12); during development the renderer was also
// compared with a transcription of that encoder on 1,800 random conversations (tools, namespaces, tasks,
// efforts, drop_thinking), with no difference.
#include <gtest/gtest.h>

#include "tokenizer/chat_format.h"
#include "tokenizer/python_json.h"
#include "unit/tokenizer_test_util.h"

namespace deepinfer::tokenizer {
namespace {

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kEffort75 =
    "<｜System｜>Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n\n";

ChatMessage msg(ChatRole role, std::string content) {
    ChatMessage m;
    m.role = role;
    m.content = std::move(content);
    return m;
}

ChatMessage assistant(std::string content, std::optional<std::string> reasoning = std::nullopt) {
    ChatMessage m = msg(ChatRole::kAssistant, std::move(content));
    m.reasoning_content = std::move(reasoning);
    return m;
}

std::string render(const std::vector<ChatMessage>& messages, ChatRenderOptions options = {}) {
    auto prompt = render_chat(messages, options);
    EXPECT_TRUE(prompt.has_value()) << prompt.status().to_string();
    return prompt ? *prompt : std::string();
}

ChatRenderOptions chat_mode() {
    ChatRenderOptions o;
    o.thinking_mode = ThinkingMode::kChat;
    return o;
}

TEST(ChatFormat, SpecExamples) {
    EXPECT_EQ(render({msg(ChatRole::kUser, "Hello")}, chat_mode()), kBos + "<｜User｜>Hello<｜Assistant｜></think>");
    EXPECT_EQ(render({msg(ChatRole::kUser, "question")}), kBos + kEffort75 + "<｜User｜>question<｜Assistant｜><think>");
}

TEST(ChatFormat, ReasoningEffortNamesAndNumbers) {
    EXPECT_EQ(*parse_reasoning_effort("low"), 50);
    EXPECT_EQ(*parse_reasoning_effort("high"), 75);
    EXPECT_EQ(*parse_reasoning_effort("max"), 100);
    EXPECT_EQ(*parse_reasoning_effort("1"), 1);
    EXPECT_EQ(*parse_reasoning_effort("100"), 100);
    for (const char* bad : {"0", "101", "medium", "", "-5", "7.5", "none"}) EXPECT_FALSE(parse_reasoning_effort(bad).has_value()) << bad;
    ChatRenderOptions o;
    o.reasoning_effort = 100;
    EXPECT_EQ(render({msg(ChatRole::kUser, "q")}, o),
              kBos + "<｜System｜>Reasoning Effort: 100 (range 1-100, the higher the value, the more thorough the "
                     "reasoning)\n\n<｜User｜>q<｜Assistant｜><think>");
    o.reasoning_effort = 0;
    EXPECT_FALSE(render_chat(std::vector<ChatMessage>{msg(ChatRole::kUser, "q")}, o).has_value());
}

TEST(ChatFormat, SystemMessages) {
    // First-position system: one <｜System｜> carries the effort line and the system text.
    EXPECT_EQ(render({msg(ChatRole::kSystem, "Be brief."), msg(ChatRole::kUser, "Hi")}),
              kBos + kEffort75 + "Be brief.<｜User｜>Hi<｜Assistant｜><think>");
    EXPECT_EQ(render({msg(ChatRole::kSystem, "Be brief."), msg(ChatRole::kUser, "Hi")}, chat_mode()),
              kBos + "<｜System｜>Be brief.<｜User｜>Hi<｜Assistant｜></think>");
    // A later system message counts as a user turn: it gets the assistant header.
    EXPECT_EQ(render({msg(ChatRole::kUser, "Hi"), assistant("Hello."), msg(ChatRole::kSystem, "Now speak French.")}, chat_mode()),
              kBos + "<｜User｜>Hi<｜Assistant｜></think>Hello.<｜end▁of▁sentence｜><｜System｜>Now speak French."
                     "<｜Assistant｜></think>");
}

TEST(ChatFormat, PastAssistantTurnsDropOrKeepReasoning) {
    const std::vector<ChatMessage> conv = {msg(ChatRole::kUser, "2+2?"), assistant("4", "add"), msg(ChatRole::kUser, "3+3?")};
    // drop_thinking (default): the old turn shows neither reasoning nor </think>; the old user turn closes
    // thinking with </think>.
    EXPECT_EQ(render(conv), kBos + kEffort75 +
                                "<｜User｜>2+2?<｜Assistant｜></think>4<｜end▁of▁sentence｜><｜User｜>3+3?<｜Assistant｜><think>");
    ChatRenderOptions keep;
    keep.drop_thinking = false;
    EXPECT_EQ(render(conv, keep), kBos + kEffort75 +
                                      "<｜User｜>2+2?<｜Assistant｜><think>add</think>4<｜end▁of▁sentence｜><｜User｜>3+3?"
                                      "<｜Assistant｜><think>");
    // Chat mode never renders reasoning.
    EXPECT_EQ(render(conv, chat_mode()),
              kBos + "<｜User｜>2+2?<｜Assistant｜></think>4<｜end▁of▁sentence｜><｜User｜>3+3?<｜Assistant｜></think>");
    // The turn after the last user message keeps its reasoning; without_eos leaves it open.
    std::vector<ChatMessage> partial = {msg(ChatRole::kUser, "2+2?"), assistant("The answer", "add")};
    partial.back().without_eos = true;
    EXPECT_EQ(render(partial), kBos + kEffort75 + "<｜User｜>2+2?<｜Assistant｜><think>add</think>The answer");
}

TEST(ChatFormat, ToolCallsAndResults) {
    ChatMessage call = assistant("", "need weather");
    call.tool_calls = {{"c1", "get_weather", "", R"({"city": "Paris", "days": 2})"}, {"c2", "get_time", "", "{}"}};
    ChatMessage r2 = msg(ChatRole::kTool, "12:00");
    r2.tool_call_id = "c2";
    ChatMessage r1 = msg(ChatRole::kTool, "sunny");
    r1.tool_call_id = "c1";
    ChatRenderOptions o;
    o.tools_json = R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])";
    const std::string prompt = render({msg(ChatRole::kUser, "Weather?"), call, r2, r1}, o);
    // Tools: an empty system message is inserted to hold them; tools turn drop_thinking off.
    EXPECT_EQ(prompt.find(kBos + kEffort75 + "\n\n## Tools\n\n"), 0u) << prompt;
    EXPECT_NE(prompt.find("### Available Tool Schemas\n\n{\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\"}}\n\n"
                          "You MUST strictly follow"),
              std::string::npos)
        << prompt;
    const std::string tail =
        "<｜User｜>Weather?<｜Assistant｜><think>need weather</think>\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n"
        "<｜DSML｜ parameter name=\"city\" string=\"true\">Paris</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"days\" "
        "string=\"false\">2</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n<｜DSML｜ invoke name=\"get_time\">\n\n</｜DSML｜ invoke>\n"
        "</｜DSML｜ calls><｜end▁of▁sentence｜><｜User｜><tool_result>sunny</tool_result>\n\n<tool_result>12:00</tool_result>"
        "<｜Assistant｜><think>";
    ASSERT_GE(prompt.size(), tail.size());
    EXPECT_EQ(prompt.substr(prompt.size() - tail.size()), tail);
}

TEST(ChatFormat, ToolResultsMergeWithFollowingUserText) {
    ChatMessage result = msg(ChatRole::kTool, "42");
    const std::string prompt = render({msg(ChatRole::kUser, "a"), assistant("b"), result, msg(ChatRole::kUser, "thanks")}, chat_mode());
    EXPECT_EQ(prompt, kBos + "<｜User｜>a<｜Assistant｜></think>b<｜end▁of▁sentence｜><｜User｜><tool_result>42</tool_result>\n\n"
                             "thanks<｜Assistant｜></think>");
}

TEST(ChatFormat, LatestReminderAndTasks) {
    EXPECT_EQ(render({msg(ChatRole::kUser, "q"), msg(ChatRole::kLatestReminder, "today is Monday")}, chat_mode()),
              kBos + "<｜User｜>q<｜Assistant｜></think><｜latest_reminder｜>today is Monday");
    ChatMessage query = msg(ChatRole::kUser, "find flights");
    query.task = "query";
    EXPECT_EQ(render({query}, chat_mode()), kBos + "<｜User｜>find flights<｜query｜>");
    query.task = "action";
    EXPECT_EQ(render({query}), kBos + kEffort75 + "<｜User｜>find flights<｜Assistant｜><think><｜action｜>");
    query.task = "dance";
    auto bad = render_chat(std::vector<ChatMessage>{query}, chat_mode());
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.status().message().find("dance"), std::string::npos);
}

TEST(ChatFormat, ToolNamespaces) {
    ChatMessage call = assistant("");
    call.tool_calls = {{"c", "web::fetch", "", R"("{\"url\": \"x\"}")"}};  // double-encoded arguments
    EXPECT_NE(render({msg(ChatRole::kUser, "u"), call}, chat_mode()).find("<｜DSML｜ invoke name=\"web::fetch\">\n<｜DSML｜ parameter "
                                                                           "name=\"url\" string=\"true\">x</｜DSML｜ parameter>"),
              std::string::npos);
    call.tool_calls[0].name_space = "db";  // conflicts with the "web::" prefix
    EXPECT_FALSE(render_chat(std::vector<ChatMessage>{msg(ChatRole::kUser, "u"), call}, chat_mode()).has_value());
    ChatRenderOptions o = chat_mode();
    o.tools_json = R"([{"type": "function", "namespace": {"name": "web", "description": "Web tools"},
                        "function": {"name": "fetch", "description": "Get a page"}}])";
    EXPECT_NE(render({msg(ChatRole::kUser, "u")}, o).find(R"({"name": "web::fetch", "description": "Web tools\nGet a page"})"),
              std::string::npos);
    o.tools_json = "{not json";
    EXPECT_FALSE(render_chat(std::vector<ChatMessage>{msg(ChatRole::kUser, "u")}, o).has_value());
}

TEST(ChatFormat, MessagesFromOpenAiJson) {
    auto messages = chat_messages_from_json(nlohmann::ordered_json::parse(R"([
        {"role": "developer", "content": "rules"},
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "u"}}]},
        {"role": "assistant", "content": null, "reasoning": "hmm",
         "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
        {"role": "tool", "tool_call_id": "c", "content": "done"}])"));
    ASSERT_TRUE(messages.has_value()) << messages.status().to_string();
    ASSERT_EQ(messages->size(), 4u);
    EXPECT_EQ((*messages)[0].role, ChatRole::kSystem);
    EXPECT_EQ((*messages)[1].content, "look\n\n<｜deepseek_image｜>");
    EXPECT_EQ((*messages)[1].image_parts, std::vector<size_t>{1});  // where it was (the server refuses images)
    EXPECT_TRUE((*messages)[0].image_parts.empty());
    EXPECT_EQ((*messages)[2].reasoning_content, "hmm");
    EXPECT_EQ((*messages)[2].tool_calls[0].arguments, R"({"a":1})");
    EXPECT_EQ((*messages)[3].tool_call_id, "c");
    auto bad = chat_messages_from_json(nlohmann::ordered_json::parse(R"([{"role": "user"}, {"role": "robot"}])"));
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.status().message().find("messages[1]"), std::string::npos) << bad.status().message();
}

TEST(ChatFormat, ReasoningSplitIds) {
    auto ids = reasoning_token_ids(testing::v41_tokenizer());
    ASSERT_TRUE(ids.has_value());
    EXPECT_EQ(ids->think_start, 128821);
    EXPECT_EQ(ids->think_end, 128822);
    EXPECT_FALSE(reasoning_token_ids(testing::v3_tokenizer()).has_value());
    EXPECT_TRUE(prompt_opens_reasoning(render({msg(ChatRole::kUser, "q")})));
    EXPECT_FALSE(prompt_opens_reasoning(render({msg(ChatRole::kUser, "q")}, chat_mode())));
    EXPECT_FALSE(prompt_opens_reasoning("<think>a</think>b"));
}

TEST(PythonJson, MatchesJsonDumps) {
    auto j = nlohmann::ordered_json::parse(
        R"({"z": 1, "a": [1.5, 1e16, 1e15, 0.0001, 1e-05, -0.0, 2.0, 123456789012345678.0, 3.14159], "s": "é\"\\\n\u0001\u007f",
            "n": null, "t": true, "e": {}, "l": []})");
    EXPECT_EQ(python_json_dumps(j),
              "{\"z\": 1, \"a\": [1.5, 1e+16, 1000000000000000.0, 0.0001, 1e-05, -0.0, 2.0, 1.2345678901234568e+17, 3.14159], "
              "\"s\": \"é\\\"\\\\\\n\\u0001\x7f\", \"n\": null, \"t\": true, \"e\": {}, \"l\": []}");
}

}  // namespace
}  // namespace deepinfer::tokenizer

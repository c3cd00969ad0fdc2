// Engine requests that cannot be admitted (a duplicate id) end with one final "abort" event per choice, so
// a caller waiting for all n choices (the HTTP server does) is never left waiting; the first request with that
// id is unaffected. Runs the built-in tiny checkpoint.
#include <gtest/gtest.h>

#include <set>

#include "deepinfer/engine.h"

namespace deepinfer {
namespace {

TEST(EngineRefuse, DuplicateIdEndsEveryChoice) {
    EngineConfig config;
    config.threads = 2;
    auto engine = Engine::create(config);
    ASSERT_TRUE(engine.has_value()) << engine.status().message();
    Engine& e = **engine;

    GenerationRequest first;
    first.id = "dup";
    first.prompt = {5, 6, 7};
    first.params.max_tokens = 3;
    first.params.temperature = 0.0f;
    first.params.ignore_eos = true;
    GenerationRequest second = first;
    second.params.n = 3;

    std::vector<GenerationOutput> first_events, second_events;
    ASSERT_TRUE(e.submit(first, [&](const GenerationOutput& ev) { first_events.push_back(ev); }).is_ok());
    ASSERT_TRUE(e.submit(second, [&](const GenerationOutput& ev) { second_events.push_back(ev); }).is_ok());
    while (e.step()) {
    }

    ASSERT_EQ(second_events.size(), 3u);
    std::set<int> indices;
    for (const auto& ev : second_events) {
        EXPECT_TRUE(ev.finished);
        EXPECT_EQ(ev.finish_reason, "abort");
        EXPECT_EQ(ev.prompt_tokens, 3);
        indices.insert(ev.index);
    }
    EXPECT_EQ(indices, (std::set<int>{0, 1, 2}));

    int64_t tokens = 0;
    for (const auto& ev : first_events) tokens += static_cast<int64_t>(ev.token_ids.size());
    EXPECT_EQ(tokens, 3);
    ASSERT_FALSE(first_events.empty());
    EXPECT_EQ(first_events.back().finish_reason, "length");
}

}  // namespace
}  // namespace deepinfer

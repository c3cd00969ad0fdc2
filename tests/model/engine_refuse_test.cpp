// Engine requests that cannot be admitted: a duplicate id ends with one final "abort" event per choice, so
// a caller waiting for all n choices (the HTTP server does) is never left waiting, and the first request with
// that id is unaffected; a full queue refuses new requests. Runs the built-in tiny checkpoint.
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

// The queue limit counts every request that is not running yet: those still in the engine's inbox and
// those a scheduler holds in its waiting queue (max_num_seqs 1 keeps all but one waiting).
TEST(EngineRefuse, QueueLimitCountsTheSchedulersWaitingRequests) {
    EngineConfig config;
    config.threads = 2;
    config.max_num_seqs = 1;
    config.max_waiting = 2;
    auto engine = Engine::create(config);
    ASSERT_TRUE(engine.has_value()) << engine.status().message();
    Engine& e = **engine;
    auto request = [](const std::string& id) {
        GenerationRequest r;
        r.id = id;
        r.prompt = {5, 6, 7};
        r.params.max_tokens = 4;
        r.params.temperature = 0.0f;
        r.params.ignore_eos = true;
        return r;
    };
    auto ignore = [](const GenerationOutput&) {};
    ASSERT_TRUE(e.submit(request("a"), ignore).is_ok());
    ASSERT_TRUE(e.submit(request("b"), ignore).is_ok());
    ASSERT_TRUE(e.step());  // a runs, b waits in the scheduler
    EXPECT_EQ(e.metrics().running, 1);
    EXPECT_EQ(e.metrics().waiting, 1);
    ASSERT_TRUE(e.submit(request("c"), ignore).is_ok());  // 1 waiting + 1 queued = the limit
    const Status refused = e.submit(request("d"), ignore);
    EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.to_string();
    EXPECT_NE(refused.message().find("queue is full"), std::string::npos);
    while (e.step()) {
    }
    EXPECT_TRUE(e.submit(request("e"), ignore).is_ok());  // drained: room again
}

}  // namespace
}  // namespace deepinfer

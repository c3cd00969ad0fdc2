// validate_sampling_params: every out-of-range value is rejected with a message that names the parameter
// and its range; in-range edge values are accepted.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "sample/validate.h"

namespace deepinfer::sample {
namespace {

constexpr int32_t kVocab = 1000;
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

Status check(const std::function<void(SamplingParams&)>& edit, int32_t max_logprobs = 20) {
    SamplingParams p;
    edit(p);
    return validate_sampling_params(p, kVocab, max_logprobs);
}

// The message must start with the parameter's name and mention the range text.
void expect_rejected(const std::function<void(SamplingParams&)>& edit, const std::string& name,
                     const std::string& range) {
    const Status s = check(edit);
    ASSERT_FALSE(s.is_ok()) << "accepted a bad " << name;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind(name, 0), 0u) << s.message();
    EXPECT_NE(s.message().find(range), std::string::npos) << s.message();
}

TEST(SamplerValidate, DefaultsAreValid) { EXPECT_TRUE(check([](SamplingParams&) {}).is_ok()); }

TEST(SamplerValidate, AcceptsEdgeValues) {
    EXPECT_TRUE(check([](SamplingParams& p) {
                    p.n = kMaxN;
                    p.temperature = 0.0f;
                    p.top_p = 1.0f;
                    p.top_k = -1;
                    p.min_p = 1.0f;
                    p.presence_penalty = -2.0f;
                    p.frequency_penalty = 2.0f;
                    p.repetition_penalty = 1e-3f;
                    p.max_tokens = 1;
                    p.min_tokens = 1;
                    p.stop_token_ids = {0, kVocab - 1};
                    p.logprobs = 20;
                    p.stop.assign(kMaxStopStrings, "x");
                }).is_ok());
    EXPECT_TRUE(check([](SamplingParams& p) {
                    p.temperature = 50.0f;  // no upper limit, like vLLM
                    p.top_p = 1e-6f;
                    p.top_k = kVocab * 10;  // larger than the vocabulary = keep all
                    p.logprobs = 0;
                }).is_ok());
}

TEST(SamplerValidate, RejectsEachOutOfRangeParameter) {
    expect_rejected([](SamplingParams& p) { p.n = 0; }, "n ", "[1, 16]");
    expect_rejected([](SamplingParams& p) { p.n = kMaxN + 1; }, "n ", "[1, 16]");
    expect_rejected([](SamplingParams& p) { p.temperature = -0.5f; }, "temperature", ">= 0");
    expect_rejected([](SamplingParams& p) { p.temperature = kNaN; }, "temperature", ">= 0");
    expect_rejected([](SamplingParams& p) { p.temperature = kInf; }, "temperature", "finite");
    expect_rejected([](SamplingParams& p) { p.top_p = 0.0f; }, "top_p", "(0, 1]");
    expect_rejected([](SamplingParams& p) { p.top_p = 1.01f; }, "top_p", "(0, 1]");
    expect_rejected([](SamplingParams& p) { p.top_p = kNaN; }, "top_p", "(0, 1]");
    expect_rejected([](SamplingParams& p) { p.top_k = -2; }, "top_k", ">= 1");
    expect_rejected([](SamplingParams& p) { p.min_p = -0.1f; }, "min_p", "[0, 1]");
    expect_rejected([](SamplingParams& p) { p.min_p = 1.5f; }, "min_p", "[0, 1]");
    expect_rejected([](SamplingParams& p) { p.min_p = kNaN; }, "min_p", "[0, 1]");
    expect_rejected([](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty", "> 0");
    expect_rejected([](SamplingParams& p) { p.repetition_penalty = kNaN; }, "repetition_penalty", "> 0");
    expect_rejected([](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty", "[-2, 2]");
    expect_rejected([](SamplingParams& p) { p.presence_penalty = kNaN; }, "presence_penalty", "[-2, 2]");
    expect_rejected([](SamplingParams& p) { p.frequency_penalty = -2.01f; }, "frequency_penalty", "[-2, 2]");
    expect_rejected([](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens", ">= 1");
    expect_rejected([](SamplingParams& p) { p.min_tokens = -1; }, "min_tokens", "[0, max_tokens = 16]");
    expect_rejected([](SamplingParams& p) { p.min_tokens = 17; }, "min_tokens", "[0, max_tokens = 16]");
    expect_rejected([](SamplingParams& p) { p.stop_token_ids = {5, kVocab}; }, "stop_token_ids[1]",
                    "[0, 1000)");
    expect_rejected([](SamplingParams& p) { p.stop_token_ids = {-1}; }, "stop_token_ids[0]", "[0, 1000)");
    expect_rejected([](SamplingParams& p) { p.logprobs = -2; }, "logprobs", "[0, 20]");
    expect_rejected([](SamplingParams& p) { p.logprobs = 21; }, "logprobs", "[0, 20]");
    expect_rejected([](SamplingParams& p) { p.stop = {"a", ""}; }, "stop[1]", "empty");
    expect_rejected([](SamplingParams& p) { p.stop.assign(kMaxStopStrings + 1, "x"); }, "stop ", "at most 16");
}

TEST(SamplerValidate, LogprobsLimitIsTheServers) {
    EXPECT_TRUE(check([](SamplingParams& p) { p.logprobs = 5; }, 5).is_ok());
    const Status s = check([](SamplingParams& p) { p.logprobs = 6; }, 5);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("[0, 5]"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace deepinfer::sample

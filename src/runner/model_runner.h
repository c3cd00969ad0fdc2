// SchedulerOutput -> ForwardBatch -> Model::forward: gathers each chunk's tokens and the Engram history
// before it, asks for the logits of the last row of every chunk that samples, and returns them per chunk.
#pragma once

#include <functional>
#include <vector>

#include "model/model.h"
#include "runner/step_plan.h"
#include "sched/scheduler.h"

namespace deepinfer::runner {

struct RunnerOutput {
    std::vector<float> logits;       // [n_logit_rows, vocab]
    std::vector<int32_t> logit_of;   // per chunk of the SchedulerOutput: its first row in logits, or -1
    std::vector<int32_t> logit_count;  // per chunk: rows in logits (1, or verify_rows + 1 for a verify chunk)
    std::vector<bf16> main_hidden;   // [n_logit_rows, targets * hidden] when requested (DSpark)
};

class ModelRunner {
   public:
    // With a broadcaster (rank 0 of a multi-rank replica), every model call is sent to the other ranks first.
    ModelRunner(model::Model& model, kv::KvPools& pools, PlanBroadcaster* broadcaster = nullptr)
        : model_(model), pools_(pools), broadcaster_(broadcaster) {}

    Status run(const sched::SchedulerOutput& out, const std::function<sched::Sequence*(int64_t)>& lookup,
               bool dspark, RunnerOutput* result);
    // A DSpark pass from row `main_hidden_row` of the last run's main_hidden.
    Status draft(const model::DraftRequest& request, int32_t main_hidden_row, model::DraftOutput* out);
    void release(int64_t seq_id) {
        if (broadcaster_) broadcaster_->release(seq_id);
    }

   private:
    model::Model& model_;
    kv::KvPools& pools_;
    PlanBroadcaster* broadcaster_;
};

}  // namespace deepinfer::runner

// Batch assembly for one engine step.
#include "runner/model_runner.h"

#include <algorithm>

namespace deepinfer::runner {

Status ModelRunner::run(const sched::SchedulerOutput& out, const std::function<sched::Sequence*(int64_t)>& lookup,
                        bool dspark, RunnerOutput* result) {
    const int history = std::max(0, model_.config().engram_max_ngram_size - 1);
    model::ForwardBatch batch;
    result->logit_of.assign(out.chunks.size(), -1);
    result->logit_count.assign(out.chunks.size(), 0);
    int32_t row = 0, n_logits = 0;
    for (size_t i = 0; i < out.chunks.size(); ++i) {
        const sched::ScheduledChunk& c = out.chunks[i];
        sched::Sequence* seq = lookup(c.seq_id);
        model::SeqChunk chunk;
        chunk.seq_id = c.seq_id;
        chunk.cache = &seq->cache;
        chunk.start_pos = c.start_pos;
        chunk.row_begin = row;
        chunk.n_rows = c.n_tokens;
        const int64_t h0 = std::max<int64_t>(0, c.start_pos - history);
        chunk.history.assign(seq->tokens.begin() + h0, seq->tokens.begin() + c.start_pos);
        batch.tokens.insert(batch.tokens.end(), seq->tokens.begin() + c.start_pos,
                            seq->tokens.begin() + c.start_pos + c.n_tokens);
        batch.seqs.push_back(std::move(chunk));
        if (c.sample) {
            // A verify chunk needs every draft row's logits (and the row before the drafts).
            const int32_t count = std::min<int32_t>(c.n_tokens, seq->verify_rows + 1);
            result->logit_of[i] = n_logits;
            result->logit_count[i] = count;
            for (int32_t r = c.n_tokens - count; r < c.n_tokens; ++r) batch.logit_rows.push_back(row + r);
            n_logits += count;
        }
        row += c.n_tokens;
    }
    batch.dspark_rings = dspark;
    batch.want_main_hidden = dspark;
    model::ForwardOutput fo;
    DI_RETURN_IF_ERROR(broadcaster_ ? broadcaster_->forward(batch, &fo) : model_.forward(pools_, batch, &fo));
    result->logits = std::move(fo.logits);
    result->main_hidden = std::move(fo.main_hidden);
    return Status::ok();
}

Status ModelRunner::draft(const model::DraftRequest& request, int32_t main_hidden_row, model::DraftOutput* out) {
    return broadcaster_ ? broadcaster_->draft(request, main_hidden_row, out) : model_.draft(pools_, request, out);
}

}  // namespace deepinfer::runner

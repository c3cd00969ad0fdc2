// Continuous batching with chunked prefill, FCFS admission, preemption by recompute and prefix caching.
#include "sched/scheduler.h"

#include <algorithm>

#include "core/check.h"

namespace deepinfer::sched {

Scheduler::Scheduler(const SchedulerConfig& config, kv::KvPools& pools)
    : config_(config), pools_(pools), prefix_(pools) {}

Scheduler::~Scheduler() {
    for (auto& [id, seq] : seqs_) seq->cache.release_all(pools_);
    prefix_.clear();
}

bool Scheduler::add(std::unique_ptr<Sequence> seq) {
    const int64_t T = pools_.layout.block_tokens;
    const int64_t blocks = (static_cast<int64_t>(seq->tokens.size()) + 1 + T - 1) / T;
    if (!pools_.layout.sources.empty() && blocks > pools_.compressed.capacity()) return false;
    const int64_t window_blocks = (pools_.layout.window + config_.max_num_batched_tokens + T - 1) / T + 1;
    if (std::min(blocks, window_blocks) > pools_.window.capacity()) return false;
    seq->arrival = next_arrival_++;
    seq->state = SeqState::kWaiting;
    waiting_.push_back(seq->id);
    seqs_[seq->id] = std::move(seq);
    return true;
}

Sequence* Scheduler::get(int64_t seq_id) {
    auto it = seqs_.find(seq_id);
    return it == seqs_.end() ? nullptr : it->second.get();
}

bool Scheduler::allocate(Sequence& seq, int64_t end) {
    // Window blocks no position >= computed reads are dropped first (the prefix cache may still hold them).
    seq.cache.release_old_window_blocks(pools_, seq.computed());
    const int64_t T = pools_.layout.block_tokens;
    const int64_t need = (end + T - 1) / T;
    const int32_t need_window = static_cast<int32_t>(std::max<int64_t>(0, need - static_cast<int64_t>(seq.cache.window_blocks().size())));
    const int32_t need_compressed = pools_.layout.sources.empty() ? 0
        : static_cast<int32_t>(std::max<int64_t>(0, need - static_cast<int64_t>(seq.cache.compressed_blocks().size())));
    if (pools_.window.free_count() < need_window || pools_.compressed.free_count() < need_compressed)
        prefix_.evict_for(need_window, need_compressed);
    return seq.cache.ensure_blocks(pools_, end);
}

void Scheduler::preempt(Sequence& seq) {
    seq.cache.release_all(pools_);
    if (seq.verify_rows > 0) {  // unverified drafts are not part of the sequence
        seq.tokens.resize(seq.tokens.size() - seq.verify_rows);
        seq.verify_rows = 0;
    }
    seq.registered_blocks = 0;
    seq.state = SeqState::kWaiting;
    ++seq.n_preemptions;
    ++preemptions_;
    running_.erase(std::find(running_.begin(), running_.end(), seq.id));
    // Back into the queue at its arrival position (preempted sequences go before later arrivals).
    auto it = std::find_if(waiting_.begin(), waiting_.end(),
                           [&](int64_t id) { return seqs_.at(id)->arrival > seq.arrival; });
    waiting_.insert(it, seq.id);
}

SchedulerOutput Scheduler::schedule() {
    SchedulerOutput out;
    int64_t budget = config_.max_num_batched_tokens;
    for (size_t idx = 0; idx < running_.size() && budget > 0;) {
        Sequence& seq = *seqs_.at(running_[idx]);
        const int64_t n = std::min(seq.pending(), budget);
        if (n <= 0 || (seq.verify_rows > 0 && n < seq.pending())) {
            ++idx;  // nothing to do, or a verify chunk that does not fit whole this step
            continue;
        }
        bool self_preempted = false;
        while (!allocate(seq, seq.computed() + n)) {
            Sequence& victim = *seqs_.at(running_.back());
            out.preempted.push_back(victim.id);
            preempt(victim);
            if (&victim == &seq) {
                self_preempted = true;
                break;
            }
        }
        if (self_preempted) break;  // every later sequence was preempted before it
        out.chunks.push_back({seq.id, seq.computed(), static_cast<int32_t>(n),
                              seq.computed() + n == static_cast<int64_t>(seq.tokens.size())});
        budget -= n;
        ++idx;
    }
    // Admit waiting sequences only when nothing had to be preempted in this step.
    while (out.preempted.empty() && !waiting_.empty() && budget > 0 &&
           static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
        Sequence& seq = *seqs_.at(waiting_.front());
        const int64_t T = pools_.layout.block_tokens;
        if (seq.computed() == 0 && config_.enable_prefix_caching) {
            auto& hashes = hashes_[seq.id];
            kv::extend_block_hashes(seq.tokens.data(), static_cast<int64_t>(seq.tokens.size()), static_cast<int>(T),
                                    config_.prefix_salt, &hashes);
            // At least the last token is recomputed: its logits are needed.
            const int64_t max_blocks = (static_cast<int64_t>(seq.tokens.size()) - 1) / T;
            int64_t hit = prefix_.attach(hashes, max_blocks, &seq.cache);
            seq.registered_blocks = hit;
            seq.prefix_hit_tokens = hit * T;
        }
        const int64_t n = std::min(seq.pending(), budget);
        if (!allocate(seq, seq.computed() + n)) break;
        waiting_.pop_front();
        seq.state = SeqState::kRunning;
        auto pos = std::find_if(running_.begin(), running_.end(),
                                [&](int64_t id) { return seqs_.at(id)->arrival > seq.arrival; });
        running_.insert(pos, seq.id);
        out.chunks.push_back({seq.id, seq.computed(), static_cast<int32_t>(n),
                              seq.computed() + n == static_cast<int64_t>(seq.tokens.size())});
        budget -= n;
    }
    for (const auto& c : out.chunks) out.n_tokens += c.n_tokens;
    return out;
}

void Scheduler::on_chunks_done(const SchedulerOutput& out) {
    if (!config_.enable_prefix_caching) return;
    const int64_t T = pools_.layout.block_tokens;
    for (const auto& chunk : out.chunks) {
        Sequence* seq = get(chunk.seq_id);
        if (!seq) continue;
        const int64_t full = seq->computed() / T;
        if (full <= seq->registered_blocks) continue;
        auto& hashes = hashes_[seq->id];
        kv::extend_block_hashes(seq->tokens.data(), full * T, static_cast<int>(T), config_.prefix_salt, &hashes);
        prefix_.insert(hashes, full, seq->cache);
        seq->registered_blocks = full;
    }
}

void Scheduler::append_token(int64_t seq_id, int32_t token) { seqs_.at(seq_id)->tokens.push_back(token); }

void Scheduler::truncate(int64_t seq_id, int64_t length) {
    Sequence& seq = *seqs_.at(seq_id);
    if (length < static_cast<int64_t>(seq.tokens.size())) seq.tokens.resize(length);
    if (length < seq.computed()) seq.cache.truncate(length);
    auto& hashes = hashes_[seq_id];
    const int64_t T = pools_.layout.block_tokens;
    if (static_cast<int64_t>(hashes.size()) * T > length) hashes.resize(length / T);
}

void Scheduler::finish(int64_t seq_id) {
    auto it = seqs_.find(seq_id);
    if (it == seqs_.end()) return;
    Sequence& seq = *it->second;
    seq.cache.release_all(pools_);
    if (auto r = std::find(running_.begin(), running_.end(), seq_id); r != running_.end()) running_.erase(r);
    if (auto w = std::find(waiting_.begin(), waiting_.end(), seq_id); w != waiting_.end()) waiting_.erase(w);
    hashes_.erase(seq_id);
    seqs_.erase(it);
}

SchedulerStats Scheduler::stats() const {
    SchedulerStats s;
    s.waiting = static_cast<int64_t>(waiting_.size());
    s.running = static_cast<int64_t>(running_.size());
    s.preemptions = preemptions_;
    s.window_blocks_used = pools_.window.used_count();
    s.window_blocks_total = pools_.window.capacity();
    s.compressed_blocks_used = pools_.compressed.used_count();
    s.compressed_blocks_total = pools_.compressed.capacity();
    s.prefix_queries = prefix_.queries();
    s.prefix_hits = prefix_.hits();
    s.prefix_query_tokens = prefix_.query_tokens();
    s.prefix_hit_tokens = prefix_.hit_tokens();
    return s;
}

}  // namespace deepinfer::sched

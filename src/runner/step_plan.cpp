// Plan messages: a byte stream of tagged records, broadcast from rank 0 (size first, then payload).
#include "runner/step_plan.h"

#include <cstring>
#include <string>

#include "core/check.h"
#include "core/log.h"

namespace deepinfer::runner {
namespace {

enum class PlanKind : uint8_t { kGeometry = 1, kForward = 2, kDraft = 3, kShutdown = 4, kForwardDp = 5 };

class Writer {
   public:
    template <typename T>
    void put(const T& v) {
        append(&v, sizeof(T));
    }
    template <typename T>
    void put_vector(const std::vector<T>& v) {
        put<uint64_t>(v.size());
        append(v.data(), v.size() * sizeof(T));
    }
    void append(const void* data, size_t n) {
        const size_t at = bytes.size();
        bytes.resize(at + n);
        if (n) std::memcpy(bytes.data() + at, data, n);
    }
    std::vector<uint8_t> bytes;
};

class Reader {
   public:
    explicit Reader(const std::vector<uint8_t>& b) : bytes_(b) {}
    template <typename T>
    T get() {
        T v;
        take(&v, sizeof(T));
        return v;
    }
    template <typename T>
    std::vector<T> get_vector() {
        const auto n = get<uint64_t>();
        DI_CHECK_MSG(n <= (bytes_.size() - pos_) / sizeof(T), "step plan: a vector of {} runs past the message", n);
        std::vector<T> v(n);
        take(v.data(), n * sizeof(T));
        return v;
    }

   private:
    // Rank 0 wrote the message with Writer; a short one means the ranks run different builds.
    void take(void* out, size_t n) {
        DI_CHECK_MSG(n <= bytes_.size() - pos_, "step plan: message of {} bytes read past its end", bytes_.size());
        if (n) std::memcpy(out, bytes_.data() + pos_, n);
        pos_ += n;
    }
    const std::vector<uint8_t>& bytes_;
    size_t pos_ = 0;
};

Status broadcast_message(dist::Comm& world, std::vector<uint8_t>& message) {
    uint64_t size = message.size();
    DI_RETURN_IF_ERROR(world.broadcast(&size, sizeof(size), 0));
    message.resize(size);
    return world.broadcast(message.data(), size, 0);
}


void write_batch(Writer& w, const model::ForwardBatch& batch) {
    w.put_vector(batch.tokens);
    w.put_vector(batch.logit_rows);
    w.put<uint8_t>(batch.want_main_hidden);
    w.put<uint8_t>(batch.dspark_rings);
    w.put<uint64_t>(batch.seqs.size());
    for (const auto& s : batch.seqs) {
        w.put(s.seq_id);
        w.put(s.start_pos);
        w.put(s.row_begin);
        w.put(s.n_rows);
        w.put_vector(s.history);
        w.put_vector(s.cache->window_blocks());
        w.put_vector(s.cache->compressed_blocks());
    }
}

// Logits of every DP rank's rows, concatenated in rank order on every rank.  out fp32 [sum rows, vocab]
Status gather_logits(dist::Comm& world, const model::ForwardOutput& mine, int32_t vocab, std::vector<float>* all) {
    uint64_t count = mine.logits.size();
    std::vector<uint64_t> counts(world.size());
    DI_RETURN_IF_ERROR(world.all_gather(&count, sizeof(count), counts.data()));
    std::vector<size_t> bytes(world.size());
    size_t total = 0;
    for (int r = 0; r < world.size(); ++r) {
        bytes[r] = counts[r] * sizeof(float);
        total += counts[r];
    }
    all->resize(total);
    (void)vocab;
    return world.all_gather_v(mine.logits.data(), bytes, all->data());
}

}  // namespace

Status PlanBroadcaster::broadcast(std::vector<uint8_t>& message) { return broadcast_message(world_, message); }

Status PlanBroadcaster::send_geometry(const PoolGeometry& g) {
    Writer w;
    w.put(PlanKind::kGeometry);
    w.put(g);
    return broadcast(w.bytes);
}


Status PlanBroadcaster::forward(const model::ForwardBatch& batch, model::ForwardOutput* out) {
    Writer w;
    w.put(PlanKind::kForward);
    w.put_vector(released_);
    released_.clear();
    write_batch(w, batch);
    DI_RETURN_IF_ERROR(broadcast(w.bytes));
    return model_.forward(pools_, batch, out);
}

Status PlanBroadcaster::forward_dp(const std::vector<model::ForwardBatch>& batches, std::vector<float>* logits) {
    Writer w;
    w.put(PlanKind::kForwardDp);
    w.put_vector(released_);
    released_.clear();
    w.put<uint64_t>(batches.size());
    for (const auto& b : batches) write_batch(w, b);
    DI_RETURN_IF_ERROR(broadcast(w.bytes));
    model::ForwardOutput mine;
    DI_RETURN_IF_ERROR(model_.forward(pools_, batches[0], &mine));
    return gather_logits(world_, mine, model_.config().vocab_size, logits);
}

Status PlanBroadcaster::draft(const model::DraftRequest& r, int32_t main_hidden_row, model::DraftOutput* out) {
    Writer w;
    w.put(PlanKind::kDraft);
    w.put(r.seq_id);
    w.put(r.pos);
    w.put(r.sampled_token);
    w.put(main_hidden_row);
    w.put(r.temperature);
    w.put(r.seed);
    DI_RETURN_IF_ERROR(broadcast(w.bytes));
    return model_.draft(pools_, r, out);
}

Status PlanBroadcaster::shutdown() {
    Writer w;
    w.put(PlanKind::kShutdown);
    return broadcast(w.bytes);
}

Status follow_plans(dist::Comm& world, model::Model& model) {
    std::unique_ptr<kv::KvPools> pools;
    std::map<int64_t, std::unique_ptr<kv::SequenceCache>> caches;
    model::ForwardOutput last;  // main_hidden rows for draft requests
    std::vector<uint8_t> message;
    while (true) {
        DI_RETURN_IF_ERROR(broadcast_message(world, message));
        Reader r(message);
        const auto kind = r.get<PlanKind>();
        switch (kind) {
            case PlanKind::kGeometry: {
                auto g = r.get<PoolGeometry>();
                pools = std::make_unique<kv::KvPools>(model::make_cache_layout(model.config(), g.block_tokens),
                                                      g.window_blocks, g.compressed_blocks);
                break;
            }
            case PlanKind::kForward:
            case PlanKind::kForwardDp: {
                if (!pools) return error(StatusCode::kInternal, "step plan: a forward before the pool geometry");
                for (int64_t id : r.get_vector<int64_t>()) caches.erase(id);
                // DP attention: every rank's batch is in the plan; run this rank's one.
                const uint64_t n_batches = kind == PlanKind::kForwardDp ? r.get<uint64_t>() : 1;
                const uint64_t mine = kind == PlanKind::kForwardDp ? static_cast<uint64_t>(world.rank()) : 0;
                model::ForwardBatch batch;
                for (uint64_t b = 0; b < n_batches; ++b) {
                model::ForwardBatch parsed;
                model::ForwardBatch& into = b == mine ? batch : parsed;
                into.tokens = r.get_vector<int32_t>();
                into.logit_rows = r.get_vector<int32_t>();
                into.want_main_hidden = r.get<uint8_t>();
                into.dspark_rings = r.get<uint8_t>();
                const auto n = r.get<uint64_t>();
                for (uint64_t i = 0; i < n; ++i) {
                    model::SeqChunk chunk;
                    chunk.seq_id = r.get<int64_t>();
                    chunk.start_pos = r.get<int64_t>();
                    chunk.row_begin = r.get<int32_t>();
                    chunk.n_rows = r.get<int32_t>();
                    chunk.history = r.get_vector<int32_t>();
                    auto windows = r.get_vector<int32_t>();
                    auto compressed = r.get_vector<int32_t>();
                    if (b != mine) continue;
                    auto& cache = caches[chunk.seq_id];
                    if (!cache) cache = std::make_unique<kv::SequenceCache>(pools->layout);
                    cache->mutable_window_blocks() = std::move(windows);
                    cache->mutable_compressed_blocks() = std::move(compressed);
                    cache->set_length(chunk.start_pos);  // rank 0 decides (rollbacks, preemption, prefix hits)
                    chunk.cache = cache.get();
                    into.seqs.push_back(std::move(chunk));
                }
                }
                DI_RETURN_IF_ERROR(model.forward(*pools, batch, &last));
                if (kind == PlanKind::kForwardDp) {
                    std::vector<float> all;
                    DI_RETURN_IF_ERROR(gather_logits(world, last, model.config().vocab_size, &all));
                }
                break;
            }
            case PlanKind::kDraft: {
                model::DraftRequest req;
                req.seq_id = r.get<int64_t>();
                req.pos = r.get<int64_t>();
                req.sampled_token = r.get<int32_t>();
                const auto row = r.get<int32_t>();
                req.temperature = r.get<float>();
                req.seed = r.get<uint64_t>();
                auto it = caches.find(req.seq_id);
                if (it == caches.end()) return error(StatusCode::kInternal, "step plan: draft for unknown sequence {}", req.seq_id);
                req.cache = it->second.get();
                const model::ModelConfig& c = model.config();
                req.main_hidden = last.main_hidden.data() +
                                  static_cast<size_t>(row) * c.dspark_target_layer_ids.size() * c.hidden_size;
                model::DraftOutput ignored;
                DI_RETURN_IF_ERROR(model.draft(*pools, req, &ignored));
                break;
            }
            case PlanKind::kShutdown:
                return Status::ok();
        }
    }
}

}  // namespace deepinfer::runner

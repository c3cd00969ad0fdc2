// Plan messages: a byte stream of tagged records, broadcast from rank 0 (size first, then payload).
#include "runner/step_plan.h"

#include <cstring>
#include <string>

#include "core/log.h"

namespace deepinfer::runner {
namespace {

enum class PlanKind : uint8_t { kGeometry = 1, kForward = 2, kDraft = 3, kShutdown = 4 };

class Writer {
   public:
    template <typename T>
    void put(const T& v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        bytes.insert(bytes.end(), p, p + sizeof(T));
    }
    template <typename T>
    void put_vector(const std::vector<T>& v) {
        put<uint64_t>(v.size());
        const auto* p = reinterpret_cast<const uint8_t*>(v.data());
        bytes.insert(bytes.end(), p, p + v.size() * sizeof(T));
    }
    std::vector<uint8_t> bytes;
};

class Reader {
   public:
    explicit Reader(const std::vector<uint8_t>& b) : bytes_(b) {}
    template <typename T>
    T get() {
        T v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    template <typename T>
    std::vector<T> get_vector() {
        auto n = get<uint64_t>();
        std::vector<T> v(n);
        std::memcpy(v.data(), bytes_.data() + pos_, n * sizeof(T));
        pos_ += n * sizeof(T);
        return v;
    }

   private:
    const std::vector<uint8_t>& bytes_;
    size_t pos_ = 0;
};

Status broadcast_message(dist::Comm& world, std::vector<uint8_t>& message) {
    uint64_t size = message.size();
    DI_RETURN_IF_ERROR(world.broadcast(&size, sizeof(size), 0));
    message.resize(size);
    return world.broadcast(message.data(), size, 0);
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
    DI_RETURN_IF_ERROR(broadcast(w.bytes));
    return model_.forward(pools_, batch, out);
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
            case PlanKind::kForward: {
                if (!pools) return error(StatusCode::kInternal, "step plan: a forward before the pool geometry");
                for (int64_t id : r.get_vector<int64_t>()) caches.erase(id);
                model::ForwardBatch batch;
                batch.tokens = r.get_vector<int32_t>();
                batch.logit_rows = r.get_vector<int32_t>();
                batch.want_main_hidden = r.get<uint8_t>();
                batch.dspark_rings = r.get<uint8_t>();
                const auto n = r.get<uint64_t>();
                for (uint64_t i = 0; i < n; ++i) {
                    model::SeqChunk chunk;
                    chunk.seq_id = r.get<int64_t>();
                    chunk.start_pos = r.get<int64_t>();
                    chunk.row_begin = r.get<int32_t>();
                    chunk.n_rows = r.get<int32_t>();
                    chunk.history = r.get_vector<int32_t>();
                    auto& cache = caches[chunk.seq_id];
                    if (!cache) cache = std::make_unique<kv::SequenceCache>(pools->layout);
                    cache->mutable_window_blocks() = r.get_vector<int32_t>();
                    cache->mutable_compressed_blocks() = r.get_vector<int32_t>();
                    cache->set_length(chunk.start_pos);  // rank 0 decides (rollbacks, preemption, prefix hits)
                    chunk.cache = cache.get();
                    batch.seqs.push_back(std::move(chunk));
                }
                DI_RETURN_IF_ERROR(model.forward(*pools, batch, &last));
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

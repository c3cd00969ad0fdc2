// The engine loop: inbox of submitted / aborted requests -> scheduler -> model runner -> sampling ->
// incremental outputs. One loop thread owns every piece of state below except the inbox.
#include "deepinfer/engine.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/choice_state.h"
#include "model/model.h"
#include "runner/model_runner.h"
#include "sched/scheduler.h"
#include "tiny/default_model.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {

using engine::ChoiceState;
using engine::RequestState;

struct Engine::Impl {
    EngineConfig config;
    std::string model_dir, model_name;
    std::unique_ptr<model::Model> model;
    std::optional<tokenizer::Tokenizer> tok;
    std::unique_ptr<kv::KvPools> pools;
    std::unique_ptr<sched::Scheduler> scheduler;
    std::unique_ptr<runner::ModelRunner> runner;
    int64_t max_model_len = 0;
    sample::Scratch scratch;

    // Loop-thread state.
    std::map<std::string, std::unique_ptr<RequestState>> requests;
    std::map<int64_t, ChoiceState*> choice_of_seq;
    int64_t next_seq_id = 1;

    // Inbox, shared with submitting threads.
    std::mutex inbox_mutex;
    std::condition_variable inbox_cv;
    std::vector<std::unique_ptr<RequestState>> inbox;
    std::vector<std::string> abort_inbox;
    std::atomic<int64_t> queued{0};

    // Background loop.
    std::thread loop;
    std::atomic<bool> stopping{false};
    bool drain_on_stop = true;

    mutable std::mutex metrics_mutex;
    EngineMetrics metrics;

    void drain_inbox();
    void admit(std::unique_ptr<RequestState> state);
    void abort_request(const std::string& id);
    void finish_choice(ChoiceState& choice);
    bool step();
    void record_metrics();
};

Engine::Engine() : impl_(std::make_unique<Impl>()) {}

Engine::~Engine() { stop(false); }

Expected<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config) {
    std::unique_ptr<Engine> e(new Engine());
    Impl& m = *e->impl_;
    m.config = config;
    ThreadPool::set_global_threads(config.threads);
    DI_ASSIGN_OR_RETURN(m.model_dir, tiny::resolve_model_dir(config.model_dir));
    DI_ASSIGN_OR_RETURN(m.model, model::Model::load(m.model_dir));
    DI_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::load_file(m.model_dir + "/tokenizer.json"));
    m.tok.emplace(std::move(tok));
    m.model_name = config.model_dir.empty() ? "deepinfer-tiny" : m.model_dir;
    const model::ModelConfig& c = m.model->config();
    if (config.block_tokens <= 0 || config.block_tokens % 2 != 0)
        return invalid_argument("--block-tokens must be a positive even number, got {}", config.block_tokens);
    kv::CacheLayout layout = model::make_cache_layout(c, config.block_tokens);
    // Window pool: every running sequence holds the blocks its window and one prefill chunk span.
    const int64_t T = config.block_tokens;
    const int64_t per_seq = (c.sliding_window + T - 1) / T + 2;
    const int64_t window_blocks = config.max_num_seqs * per_seq + (config.max_num_batched_tokens + T - 1) / T + 4;
    int64_t compressed_blocks = config.num_kv_blocks;
    if (compressed_blocks <= 0) {
        int64_t memory = config.kv_cache_memory > 0 ? config.kv_cache_memory : (int64_t{1} << 30);
        int64_t left = memory - window_blocks * static_cast<int64_t>(layout.window_block_bytes);
        if (left <= 0)
            return invalid_argument("--kv-cache-memory {} bytes cannot hold the window rings of {} sequences ({} bytes)",
                                    memory, config.max_num_seqs, window_blocks * layout.window_block_bytes);
        compressed_blocks = layout.compressed_block_bytes > 0
                                ? std::max<int64_t>(1, left / static_cast<int64_t>(layout.compressed_block_bytes))
                                : int64_t{1} << 20;
        compressed_blocks = std::min<int64_t>(compressed_blocks, int64_t{1} << 22);
    }
    m.pools = std::make_unique<kv::KvPools>(layout, static_cast<int32_t>(window_blocks),
                                            layout.sources.empty() ? 1 : static_cast<int32_t>(compressed_blocks));
    const int64_t pool_tokens = layout.sources.empty() ? c.max_position_embeddings : compressed_blocks * T - 1;
    m.max_model_len = std::min<int64_t>(c.max_position_embeddings, pool_tokens);
    if (config.max_model_len > 0) {
        if (config.max_model_len > m.max_model_len)
            return invalid_argument("--max-model-len {} exceeds what the model and KV pool allow ({})",
                                    config.max_model_len, m.max_model_len);
        m.max_model_len = config.max_model_len;
    }
    sched::SchedulerConfig sc;
    sc.max_num_seqs = config.max_num_seqs;
    sc.max_num_batched_tokens = config.max_num_batched_tokens;
    sc.enable_prefix_caching = config.enable_prefix_caching;
    m.scheduler = std::make_unique<sched::Scheduler>(sc, *m.pools);
    m.runner = std::make_unique<runner::ModelRunner>(*m.model, *m.pools);
    log::info("engine: {} ({} layers), KV pools: {} window blocks x {:.1f} KB, {} compressed blocks x {:.1f} KB, "
              "max model len {}, {} threads", m.model_dir, c.num_hidden_layers, window_blocks,
              layout.window_block_bytes / 1e3, m.pools->compressed.capacity(), layout.compressed_block_bytes / 1e3,
              m.max_model_len, ThreadPool::global().size());
    return e;
}

Status Engine::submit(GenerationRequest request, Callback callback) {
    Impl& m = *impl_;
    const model::ModelConfig& c = m.model->config();
    if (request.prompt.empty()) return invalid_argument("prompt: must contain at least one token");
    for (int32_t t : request.prompt)
        if (t < 0 || t >= c.vocab_size) return invalid_argument("prompt: token id {} is outside the vocabulary [0, {})", t, c.vocab_size);
    for (int32_t t : request.forced_output)
        if (t < 0 || t >= c.vocab_size) return invalid_argument("forced output: token id {} is outside the vocabulary", t);
    DI_RETURN_IF_ERROR(sample::validate_sampling_params(request.params, c.vocab_size));
    const int64_t prompt_len = static_cast<int64_t>(request.prompt.size());
    if (prompt_len >= m.max_model_len)
        return invalid_argument("prompt: {} tokens, but the maximum context length is {} (prompt plus at least one "
                                "generated token)", prompt_len, m.max_model_len);
    if (m.queued.load() >= m.config.max_waiting)
        return error(StatusCode::kResourceExhausted, "the request queue is full ({} waiting)", m.config.max_waiting);
    auto state = std::make_unique<RequestState>();
    state->request = std::move(request);
    state->callback = std::move(callback);
    state->arrival = std::chrono::steady_clock::now();
    {
        std::lock_guard<std::mutex> lock(m.inbox_mutex);
        m.inbox.push_back(std::move(state));
        ++m.queued;
    }
    m.inbox_cv.notify_one();
    return Status::ok();
}

void Engine::abort(const std::string& request_id) {
    Impl& m = *impl_;
    {
        std::lock_guard<std::mutex> lock(m.inbox_mutex);
        m.abort_inbox.push_back(request_id);
    }
    m.inbox_cv.notify_one();
}

void Engine::Impl::admit(std::unique_ptr<RequestState> state) {
    RequestState& r = *state;
    const int n = r.request.params.n;
    const uint64_t seed = sample::RequestRng::from_seed(r.request.params.seed).seed();
    r.choices.reserve(n);
    for (int i = 0; i < n; ++i) {
        r.choices.emplace_back(seed, i);
        ChoiceState& ch = r.choices.back();
        ch.request = &r;
        ch.detok.emplace(*tok, r.request.params.skip_special_tokens);
        ch.seq_id = next_seq_id++;
        auto seq = std::make_unique<sched::Sequence>(ch.seq_id, r.request.prompt, pools->layout);
        if (!scheduler->add(std::move(seq))) {
            // Too long for the KV pool: refuse this request without touching others.
            for (auto& done : r.choices) {
                if (&done != &ch) scheduler->finish(done.seq_id);
                choice_of_seq.erase(done.seq_id);
            }
            GenerationOutput ev;
            ev.request_id = r.request.id;
            ev.finished = true;
            ev.finish_reason = "abort";
            r.callback(ev);
            return;
        }
        choice_of_seq[ch.seq_id] = &ch;
    }
    std::string id = r.request.id;
    requests[id] = std::move(state);
}

void Engine::Impl::finish_choice(ChoiceState& choice) {
    scheduler->finish(choice.seq_id);
    choice_of_seq.erase(choice.seq_id);
    RequestState& r = *choice.request;
    if (++r.n_finished == static_cast<int>(r.choices.size())) {
        std::lock_guard<std::mutex> lock(metrics_mutex);
        ++metrics.requests_finished;
        requests.erase(r.request.id);  // destroys r and its choices
    }
}

void Engine::Impl::abort_request(const std::string& id) {
    auto it = requests.find(id);
    if (it == requests.end()) return;
    RequestState& r = *it->second;
    for (auto& ch : r.choices) {
        if (ch.finished) continue;
        ch.finished = true;
        scheduler->finish(ch.seq_id);
        choice_of_seq.erase(ch.seq_id);
        GenerationOutput ev;
        ev.request_id = id;
        ev.index = ch.index;
        ev.finished = true;
        ev.finish_reason = "abort";
        ev.prompt_tokens = static_cast<int64_t>(r.request.prompt.size());
        ev.completion_tokens = static_cast<int64_t>(ch.output.size());
        r.callback(ev);
    }
    {
        std::lock_guard<std::mutex> lock(metrics_mutex);
        ++metrics.requests_aborted;
    }
    requests.erase(it);
}

void Engine::Impl::drain_inbox() {
    std::vector<std::unique_ptr<RequestState>> incoming;
    std::vector<std::string> aborts;
    {
        std::lock_guard<std::mutex> lock(inbox_mutex);
        incoming.swap(inbox);
        aborts.swap(abort_inbox);
    }
    for (auto& r : incoming) {
        --queued;
        if (requests.count(r->request.id)) {
            GenerationOutput ev;
            ev.request_id = r->request.id;
            ev.finished = true;
            ev.finish_reason = "abort";
            r->callback(ev);
            continue;
        }
        admit(std::move(r));
    }
    for (const auto& id : aborts) abort_request(id);
}

bool Engine::Impl::step() {
    drain_inbox();
    sched::SchedulerOutput out = scheduler->schedule();
    if (out.empty()) {
        std::lock_guard<std::mutex> lock(metrics_mutex);
        record_metrics();
        return false;
    }
    runner::RunnerOutput ro;
    Status s = runner->run(out, [&](int64_t id) { return scheduler->get(id); }, false, &ro);
    if (!s.is_ok()) {
        // A failed forward is an internal error: fail the affected requests, keep serving.
        log::error("engine: forward failed: {}", s.to_string());
        std::vector<std::string> ids;
        for (const auto& c : out.chunks)
            if (auto it = choice_of_seq.find(c.seq_id); it != choice_of_seq.end()) ids.push_back(it->second->request->request.id);
        for (const auto& id : ids) abort_request(id);
        return true;
    }
    scheduler->on_chunks_done(out);
    const model::ModelConfig& c = model->config();
    const auto now = std::chrono::steady_clock::now();
    int64_t new_prompt_tokens = 0, new_gen = 0;
    for (size_t i = 0; i < out.chunks.size(); ++i) {
        const auto& chunk = out.chunks[i];
        auto it = choice_of_seq.find(chunk.seq_id);
        if (it == choice_of_seq.end()) continue;
        ChoiceState& ch = *it->second;
        sched::Sequence* seq = scheduler->get(chunk.seq_id);
        new_prompt_tokens += std::max<int64_t>(0, std::min<int64_t>(seq->n_prompt, chunk.start_pos + chunk.n_tokens) - chunk.start_pos);
        if (ro.logit_of[i] < 0) continue;
        const float* logits = ro.logits.data() + static_cast<size_t>(ro.logit_of[i]) * c.vocab_size;
        sample::SampledToken tok = engine::choose_token(ch, logits, c.vocab_size, c.eos_token_id, scratch);
        scheduler->append_token(ch.seq_id, tok.token);
        const int64_t seq_len = static_cast<int64_t>(seq->tokens.size());
        GenerationOutput ev = engine::advance(ch, tok, c.eos_token_id, seq_len, max_model_len, logits, c.vocab_size);
        ++new_gen;
        RequestState& r = *ch.request;
        {
            std::lock_guard<std::mutex> lock(metrics_mutex);
            if (!ch.first_token_sent) {
                double ttft = std::chrono::duration<double>(now - r.arrival).count();
                metrics.ttft_seconds.push_back(ttft);
                ev.time_to_first_token = ttft;
            } else {
                metrics.tpot_seconds.push_back(std::chrono::duration<double>(now - ch.last_token_time).count());
            }
            if (metrics.ttft_seconds.size() > 4096) metrics.ttft_seconds.erase(metrics.ttft_seconds.begin(), metrics.ttft_seconds.begin() + 2048);
            if (metrics.tpot_seconds.size() > 4096) metrics.tpot_seconds.erase(metrics.tpot_seconds.begin(), metrics.tpot_seconds.begin() + 2048);
        }
        ch.first_token_sent = true;
        ch.last_token_time = now;
        if (ch.output.size() == 1 && ch.index == 0) r.cached_prompt_tokens = seq->prefix_hit_tokens;
        r.callback(ev);
        if (ch.finished) finish_choice(ch);
    }
    std::lock_guard<std::mutex> lock(metrics_mutex);
    metrics.prompt_tokens += new_prompt_tokens;
    metrics.generation_tokens += new_gen;
    record_metrics();
    return true;
}

// Scheduler state copied for readers on other threads (caller holds metrics_mutex).
void Engine::Impl::record_metrics() {
    sched::SchedulerStats s = scheduler->stats();
    metrics.waiting = s.waiting;
    metrics.running = s.running;
    metrics.kv_blocks_used = s.compressed_blocks_used;
    metrics.kv_blocks_total = s.compressed_blocks_total;
    metrics.window_blocks_used = s.window_blocks_used;
    metrics.window_blocks_total = s.window_blocks_total;
    metrics.preemptions = s.preemptions;
    metrics.prefix_query_tokens = s.prefix_query_tokens;
    metrics.prefix_hit_tokens = s.prefix_hit_tokens;
}

bool Engine::step() { return impl_->step(); }

void Engine::start() {
    Impl& m = *impl_;
    if (m.loop.joinable()) return;
    m.stopping = false;
    m.loop = std::thread([&m] {
        while (true) {
            bool worked = m.step();
            if (m.stopping) {
                bool idle = !m.scheduler->has_work() && m.queued.load() == 0;
                if (!m.drain_on_stop || idle) break;
                continue;
            }
            if (!worked) {
                std::unique_lock<std::mutex> lock(m.inbox_mutex);
                m.inbox_cv.wait_for(lock, std::chrono::milliseconds(50),
                                    [&] { return !m.inbox.empty() || !m.abort_inbox.empty() || m.stopping.load(); });
            }
        }
    });
}

void Engine::stop(bool drain) {
    Impl& m = *impl_;
    if (!m.loop.joinable()) return;
    m.drain_on_stop = drain;
    m.stopping = true;
    m.inbox_cv.notify_all();
    m.loop.join();
    if (!drain) {
        std::vector<std::string> ids;
        for (auto& [id, r] : m.requests) ids.push_back(id);
        for (auto& id : ids) m.abort_request(id);
    }
}

Expected<std::vector<GenerationOutput>> Engine::generate(std::vector<GenerationRequest> requests) {
    std::map<std::pair<std::string, int>, GenerationOutput> merged;
    std::vector<std::pair<std::string, int>> order;
    for (size_t i = 0; i < requests.size(); ++i) {
        if (requests[i].id.empty()) requests[i].id = "offline-" + std::to_string(i);
        for (int k = 0; k < requests[i].params.n; ++k) order.emplace_back(requests[i].id, k);
    }
    for (auto& r : requests) {
        DI_RETURN_IF_ERROR(submit(std::move(r), [&merged](const GenerationOutput& ev) {
            GenerationOutput& acc = merged[{ev.request_id, ev.index}];
            acc.request_id = ev.request_id;
            acc.index = ev.index;
            acc.token_ids.insert(acc.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
            acc.text += ev.text;
            acc.logprobs.insert(acc.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
            for (const auto& l : ev.logits) acc.logits.push_back(l);
            acc.finished = ev.finished;
            acc.finish_reason = ev.finish_reason;
            acc.prompt_tokens = ev.prompt_tokens;
            acc.completion_tokens = ev.completion_tokens;
            acc.cached_prompt_tokens = ev.cached_prompt_tokens;
            if (ev.time_to_first_token > 0) acc.time_to_first_token = ev.time_to_first_token;
        }));
    }
    while (impl_->step() || impl_->scheduler->has_work() || impl_->queued.load() > 0) {
    }
    std::vector<GenerationOutput> outs;
    for (const auto& key : order) outs.push_back(std::move(merged[key]));
    return outs;
}

EngineMetrics Engine::metrics() const {
    const Impl& m = *impl_;
    EngineMetrics out;
    {
        std::lock_guard<std::mutex> lock(m.metrics_mutex);
        out = m.metrics;
    }
    out.waiting += m.queued.load();
    return out;
}

const tokenizer::Tokenizer& Engine::tokenizer() const { return *impl_->tok; }
const model::ModelConfig& Engine::model_config() const { return impl_->model->config(); }
const std::string& Engine::model_name() const { return impl_->model_name; }
int64_t Engine::max_model_len() const { return impl_->max_model_len; }

}  // namespace deepinfer

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
#include "engine/parallel_setup.h"
#include "engine/speculative.h"
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
    std::unique_ptr<kv::KvPools> pools;  // this rank's KV
    // One scheduler per DP rank (one without DP attention); DP ranks > 0 are accounted in shadow pools here
    // (same geometry, never touched: their records live on their rank).
    std::vector<std::unique_ptr<sched::Scheduler>> schedulers;
    std::vector<std::unique_ptr<kv::KvPools>> shadow_pools;
    std::map<int64_t, int> dp_of_seq;
    std::unique_ptr<runner::ModelRunner> runner;
    engine::ParallelSetup parallel;
    std::unique_ptr<runner::PlanBroadcaster> broadcaster;  // rank 0 of a multi-rank replica
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
    std::atomic<int64_t> queued{0};            // in the inbox, not yet given to a scheduler
    std::atomic<int64_t> sched_waiting{0};     // admitted, waiting in a scheduler (as of the last step)

    // Background loop.
    std::thread loop;
    std::atomic<bool> stopping{false};
    bool drain_on_stop = true;

    mutable std::mutex metrics_mutex;
    EngineMetrics metrics;

    sched::Scheduler& sched_of(int64_t seq_id) { return *schedulers[dp_of_seq.at(seq_id)]; }
    bool has_work() const {
        for (const auto& sc : schedulers)
            if (sc->has_work()) return true;
        return false;
    }
    void process_output(int dp, const sched::SchedulerOutput& out, runner::RunnerOutput& ro, int64_t* new_prompt_tokens,
                        int64_t* new_gen, int64_t* drafted, int64_t* accepted_total);
    void drain_inbox();
    void admit(std::unique_ptr<RequestState> state);
    void refuse(RequestState& r);
    void abort_request(const std::string& id);
    void finish_choice(ChoiceState& choice);
    bool step();
    void record_metrics();
    int64_t main_hidden_width() const;
    void propose_drafts(ChoiceState& choice, sched::Sequence& seq, int64_t pos, int32_t main_hidden_row,
                        const bf16* main_hidden);
    static void merge_event(GenerationOutput& into, const GenerationOutput& ev);
};

int64_t Engine::Impl::main_hidden_width() const {
    const model::ModelConfig& c = model->config();
    return static_cast<int64_t>(c.dspark_target_layer_ids.size()) * c.hidden_size;
}

void Engine::Impl::merge_event(GenerationOutput& into, const GenerationOutput& ev) {
    into.request_id = ev.request_id;
    into.index = ev.index;
    into.token_ids.insert(into.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
    into.text += ev.text;
    into.logprobs.insert(into.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
    for (const auto& l : ev.logits) into.logits.push_back(l);
    into.finished = ev.finished;
    into.finish_reason = ev.finish_reason;
    into.prompt_tokens = ev.prompt_tokens;
    into.completion_tokens = ev.completion_tokens;
}

void Engine::Impl::propose_drafts(ChoiceState& ch, sched::Sequence& seq, int64_t pos, int32_t main_hidden_row,
                                  const bf16* main_hidden) {
    const model::ModelConfig& c = model->config();
    const SamplingParams& p = ch.request->request.params;
    // No more drafts than the remaining budget of tokens and context can use.
    int k = std::min(config.speculative_tokens, c.dspark_block_size);
    k = static_cast<int>(std::min<int64_t>(k, p.max_tokens - static_cast<int64_t>(ch.output.size()) - 1));
    k = static_cast<int>(std::min<int64_t>(k, max_model_len - static_cast<int64_t>(seq.tokens.size()) - 1));
    if (k <= 0) return;
    model::DraftRequest req;
    req.seq_id = seq.id;
    req.cache = &seq.cache;
    req.pos = pos;
    req.sampled_token = ch.output.back();
    req.main_hidden = main_hidden;
    req.temperature = p.temperature;
    req.seed = ch.rng.seed() ^ (static_cast<uint64_t>(ch.output.size()) * 0x9e3779b97f4a7c15ull) ^ ch.index;
    model::DraftOutput d;
    Status s = runner->draft(req, main_hidden_row, &d);
    if (!s.is_ok()) {
        log::warn("engine: draft failed for {}: {}", ch.request->request.id, s.to_string());
        return;
    }
    ch.drafts.assign(d.tokens.begin() + 1, d.tokens.begin() + 1 + k);
    if (p.temperature > 0.0f) ch.draft_logits.assign(d.logits.begin(), d.logits.begin() + static_cast<size_t>(k) * c.vocab_size);
}

Engine::Engine() : impl_(std::make_unique<Impl>()) {}

Engine::~Engine() {
    stop(false);
    if (impl_->broadcaster) {
        Status s = impl_->broadcaster->shutdown();
        if (!s.is_ok()) log::error("engine: could not stop the other ranks: {}", s.to_string());
    }
}

namespace {

// KV pool sizes from the config: the window pool holds every running sequence's window plus one prefill
// chunk; the compressed pool takes the rest of the memory (or num_kv_blocks).
Expected<runner::PoolGeometry> pool_geometry(const EngineConfig& config, const model::ModelConfig& c,
                                             const kv::CacheLayout& layout) {
    runner::PoolGeometry g;
    g.block_tokens = config.block_tokens;
    const int64_t T = config.block_tokens;
    const int64_t per_seq = (c.sliding_window + T - 1) / T + 2;
    g.window_blocks = static_cast<int32_t>(config.max_num_seqs * per_seq + (config.max_num_batched_tokens + T - 1) / T + 4);
    int64_t compressed_blocks = config.num_kv_blocks;
    if (compressed_blocks <= 0) {
        int64_t memory = config.kv_cache_memory > 0 ? config.kv_cache_memory : (int64_t{1} << 30);
        int64_t left = memory - int64_t{g.window_blocks} * static_cast<int64_t>(layout.window_block_bytes);
        if (left <= 0)
            return invalid_argument("--kv-cache-memory {} bytes cannot hold the window rings of {} sequences ({} bytes)",
                                    memory, config.max_num_seqs, int64_t{g.window_blocks} * layout.window_block_bytes);
        compressed_blocks = layout.compressed_block_bytes > 0
                                ? std::max<int64_t>(1, left / static_cast<int64_t>(layout.compressed_block_bytes))
                                : int64_t{1} << 20;
        compressed_blocks = std::min<int64_t>(compressed_blocks, int64_t{1} << 22);
    }
    g.compressed_blocks = layout.sources.empty() ? 1 : static_cast<int32_t>(compressed_blocks);
    return g;
}

}  // namespace

Status run_engine_follower(const EngineConfig& config, dist::Comm& world) {
    ThreadPool::set_global_threads(config.threads);
    DI_ASSIGN_OR_RETURN(std::string dir, tiny::resolve_model_dir(config.model_dir));
    DI_ASSIGN_OR_RETURN(engine::ParallelSetup setup, engine::make_parallel_setup(config, &world));
    DI_ASSIGN_OR_RETURN(auto model, model::Model::load(dir, false, setup.plan));
    return runner::follow_plans(world, *model);
}

Expected<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config, dist::Comm* world) {
    std::unique_ptr<Engine> e(new Engine());
    Impl& m = *e->impl_;
    m.config = config;
    ThreadPool::set_global_threads(config.threads);
    DI_ASSIGN_OR_RETURN(m.model_dir, tiny::resolve_model_dir(config.model_dir));
    DI_ASSIGN_OR_RETURN(m.parallel, engine::make_parallel_setup(config, world));
    DI_ASSIGN_OR_RETURN(m.model, model::Model::load(m.model_dir, true, m.parallel.plan));
    DI_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::load_file(m.model_dir + "/tokenizer.json"));
    m.tok.emplace(std::move(tok));
    m.model_name = config.model_dir.empty() ? "deepinfer-tiny" : m.model_dir;
    const model::ModelConfig& c = m.model->config();
    if (config.block_tokens <= 0 || config.block_tokens % 2 != 0)
        return invalid_argument("--block-tokens must be a positive even number, got {}", config.block_tokens);
    kv::CacheLayout layout = model::make_cache_layout(c, config.block_tokens);
    DI_ASSIGN_OR_RETURN(runner::PoolGeometry geometry, pool_geometry(config, c, layout));
    const int64_t T = config.block_tokens;
    const int64_t window_blocks = geometry.window_blocks, compressed_blocks = geometry.compressed_blocks;
    m.pools = std::make_unique<kv::KvPools>(layout, geometry.window_blocks, geometry.compressed_blocks);
    if (world && world->size() > 1) {
        m.broadcaster = std::make_unique<runner::PlanBroadcaster>(*world, *m.model, *m.pools);
        DI_RETURN_IF_ERROR(m.broadcaster->send_geometry(geometry));
    }
    const int64_t pool_tokens = layout.sources.empty() ? c.max_position_embeddings : compressed_blocks * T - 1;
    m.max_model_len = std::min<int64_t>(c.max_position_embeddings, pool_tokens);
    if (config.max_model_len > 0) {
        if (config.max_model_len > m.max_model_len)
            return invalid_argument("--max-model-len {} exceeds what the model and KV pool allow ({})",
                                    config.max_model_len, m.max_model_len);
        m.max_model_len = config.max_model_len;
    }
    if (config.speculative_tokens < 0 || (config.speculative_tokens > 0 && !c.has_dspark()) ||
        config.speculative_tokens > std::max(0, c.dspark_block_size))
        return invalid_argument("--speculative-tokens {}: the checkpoint drafts at most {} tokens{}", config.speculative_tokens,
                                c.has_dspark() ? c.dspark_block_size : 0, c.has_dspark() ? "" : " (no DSpark blocks)");
    if (config.dp > 1 && config.speculative_tokens > 0)
        return invalid_argument("--speculative-tokens with --dp {}: drafting under DP attention is not supported; "
                                "use --tp/--ep or one rank", config.dp);
    if (config.speculative_tokens > 0 && config.max_num_batched_tokens < int64_t{config.max_num_seqs} * (config.speculative_tokens + 1))
        log::warn("engine: --max-num-batched-tokens {} is below max-num-seqs x (speculative tokens + 1); verify chunks "
                  "that do not fit wait a step", config.max_num_batched_tokens);
    sched::SchedulerConfig sc;
    sc.max_num_seqs = config.max_num_seqs;
    sc.max_num_batched_tokens = config.max_num_batched_tokens;
    sc.enable_prefix_caching = config.enable_prefix_caching;
    m.schedulers.push_back(std::make_unique<sched::Scheduler>(sc, *m.pools));
    for (int d = 1; d < config.dp; ++d) {
        m.shadow_pools.push_back(std::make_unique<kv::KvPools>(layout, geometry.window_blocks, geometry.compressed_blocks));
        m.schedulers.push_back(std::make_unique<sched::Scheduler>(sc, *m.shadow_pools.back()));
    }
    m.runner = std::make_unique<runner::ModelRunner>(*m.model, *m.pools, m.broadcaster.get());
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
    // Waiting = not yet running anywhere: the inbox plus the schedulers' waiting queues.
    if (m.queued.load() + m.sched_waiting.load() >= m.config.max_waiting)
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
    // DP attention: the least loaded rank takes every choice of the request.
    int dp = 0;
    int64_t least = INT64_MAX;
    for (size_t d = 0; d < schedulers.size(); ++d) {
        sched::SchedulerStats st = schedulers[d]->stats();
        if (st.running + st.waiting < least) {
            least = st.running + st.waiting;
            dp = static_cast<int>(d);
        }
    }
    r.choices.reserve(n);
    for (int i = 0; i < n; ++i) {
        r.choices.emplace_back(seed, i);
        ChoiceState& ch = r.choices.back();
        ch.request = &r;
        ch.detok.emplace(*tok, r.request.params.skip_special_tokens);
        ch.seq_id = next_seq_id++;
        auto seq = std::make_unique<sched::Sequence>(ch.seq_id, r.request.prompt, pools->layout);
        dp_of_seq[ch.seq_id] = dp;
        if (!schedulers[dp]->add(std::move(seq))) {
            // Too long for the KV pool: refuse this request without touching others.
            for (auto& done : r.choices) {
                if (&done != &ch) schedulers[dp]->finish(done.seq_id);
                choice_of_seq.erase(done.seq_id);
                dp_of_seq.erase(done.seq_id);
            }
            refuse(r);
            return;
        }
        choice_of_seq[ch.seq_id] = &ch;
    }
    std::string id = r.request.id;
    requests[id] = std::move(state);
}

// A request that cannot be admitted ends at once: one final "abort" event per choice, so a caller waiting
// for all n choices is not left waiting.
void Engine::Impl::refuse(RequestState& r) {
    for (int i = 0; i < r.request.params.n; ++i) {
        GenerationOutput ev;
        ev.request_id = r.request.id;
        ev.index = i;
        ev.finished = true;
        ev.finish_reason = "abort";
        ev.prompt_tokens = static_cast<int64_t>(r.request.prompt.size());
        r.callback(ev);
    }
}

void Engine::Impl::finish_choice(ChoiceState& choice) {
    sched_of(choice.seq_id).finish(choice.seq_id);
    runner->release(choice.seq_id);
    choice_of_seq.erase(choice.seq_id);
    dp_of_seq.erase(choice.seq_id);
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
        sched_of(ch.seq_id).finish(ch.seq_id);
        runner->release(ch.seq_id);
        choice_of_seq.erase(ch.seq_id);
        dp_of_seq.erase(ch.seq_id);
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
            refuse(*r);
            continue;
        }
        admit(std::move(r));
    }
    for (const auto& id : aborts) abort_request(id);
}

bool Engine::Impl::step() {
    drain_inbox();
    // Drafts proposed last step join their sequences as unverified rows.
    for (auto& [seq_id, ch] : choice_of_seq) {
        if (ch->drafts.empty() || ch->drafts_appended) continue;
        sched::Scheduler& sc = sched_of(seq_id);
        sched::Sequence* seq = sc.get(seq_id);
        for (int32_t d : ch->drafts) sc.append_token(seq_id, d);
        seq->verify_rows = static_cast<int32_t>(ch->drafts.size());
        ch->drafts_appended = true;
    }
    const int D = static_cast<int>(schedulers.size());
    std::vector<sched::SchedulerOutput> outs(D);
    bool any = false;
    for (int d = 0; d < D; ++d) {
        outs[d] = schedulers[d]->schedule();
        any = any || !outs[d].empty();
        for (int64_t id : outs[d].preempted)  // the scheduler dropped their unverified rows
            if (auto it = choice_of_seq.find(id); it != choice_of_seq.end()) {
                it->second->drafts.clear();
                it->second->draft_logits.clear();
                it->second->drafts_appended = false;
            }
    }
    if (!any) {
        std::lock_guard<std::mutex> lock(metrics_mutex);
        record_metrics();
        return false;
    }
    std::vector<runner::RunnerOutput> ros(D);
    auto lookup = [&](int64_t id) { return sched_of(id).get(id); };
    Status s = D == 1 ? runner->run(outs[0], lookup, config.speculative_tokens > 0, &ros[0]) : runner->run_dp(outs, lookup, &ros);
    if (!s.is_ok()) {
        // A failed forward is an internal error: fail the affected requests, keep serving.
        log::error("engine: forward failed: {}", s.to_string());
        std::vector<std::string> ids;
        for (const auto& out : outs)
            for (const auto& c : out.chunks)
                if (auto it = choice_of_seq.find(c.seq_id); it != choice_of_seq.end()) ids.push_back(it->second->request->request.id);
        for (const auto& id : ids) abort_request(id);
        return true;
    }
    int64_t new_prompt_tokens = 0, new_gen = 0, drafted = 0, accepted_total = 0;
    for (int d = 0; d < D; ++d) {
        schedulers[d]->on_chunks_done(outs[d]);
        process_output(d, outs[d], ros[d], &new_prompt_tokens, &new_gen, &drafted, &accepted_total);
    }
    std::lock_guard<std::mutex> lock(metrics_mutex);
    metrics.prompt_tokens += new_prompt_tokens;
    metrics.generation_tokens += new_gen;
    metrics.spec_draft_tokens += drafted;
    metrics.spec_accepted_tokens += accepted_total;
    record_metrics();
    return true;
}

// Sampling and outputs of the chunks one scheduler ran.
void Engine::Impl::process_output(int dp, const sched::SchedulerOutput& out, runner::RunnerOutput& ro,
                                  int64_t* new_prompt_tokens, int64_t* new_gen, int64_t* drafted, int64_t* accepted_total) {
    sched::Scheduler& sc = *schedulers[dp];
    const model::ModelConfig& c = model->config();
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < out.chunks.size(); ++i) {
        const auto& chunk = out.chunks[i];
        auto it = choice_of_seq.find(chunk.seq_id);
        if (it == choice_of_seq.end()) continue;
        ChoiceState& ch = *it->second;
        sched::Sequence* seq = sc.get(chunk.seq_id);
        *new_prompt_tokens += std::max<int64_t>(0, std::min<int64_t>(seq->n_prompt, chunk.start_pos + chunk.n_tokens) - chunk.start_pos);
        if (ro.logit_of[i] < 0) continue;
        const int32_t rows = ro.logit_count[i];
        const int32_t k = rows - 1;  // drafts being verified (0 for a plain chunk)
        const int64_t base_len = static_cast<int64_t>(seq->tokens.size()) - k;  // committed tokens before drafts
        // Commit tokens row by row: accepted drafts, then the target's token at the first rejection (or after
        // the last draft). Stop conditions end the choice at any of them.
        GenerationOutput event;
        int32_t accepted = 0, last_row = 0;
        for (int32_t row = 0; row < rows && !ch.finished; ++row) {
            const float* logits = ro.logits.data() + static_cast<size_t>(ro.logit_of[i] + row) * c.vocab_size;
            bool accept = false;
            sample::SampledToken tok =
                row < k ? engine::verify_row(ch, logits, c.vocab_size, c.eos_token_id, ch.drafts[row],
                                             ch.draft_logits.empty() ? nullptr : ch.draft_logits.data() + static_cast<size_t>(row) * c.vocab_size,
                                             ch.request->request.params.temperature, scratch, &accept)
                        : engine::choose_token(ch, logits, c.vocab_size, c.eos_token_id, scratch);
            last_row = row;
            const int64_t seq_len = base_len + row + 1;
            GenerationOutput ev = engine::advance(ch, tok, c.eos_token_id, seq_len, max_model_len, logits, c.vocab_size);
            merge_event(event, ev);
            ++*new_gen;
            if (!accept) break;
            ++accepted;
        }
        if (k > 0) {
            // Keep the verified positions (the row before the drafts and the accepted drafts); drop the rest.
            sc.truncate(ch.seq_id, base_len + accepted);
            seq->verify_rows = 0;
            *drafted += k;
            *accepted_total += accepted;
        }
        ch.drafts.clear();
        ch.draft_logits.clear();
        ch.drafts_appended = false;
        if (!ch.finished) sc.append_token(ch.seq_id, ch.output.back());
        RequestState& r = *ch.request;
        {
            std::lock_guard<std::mutex> lock(metrics_mutex);
            if (!ch.first_token_sent) {
                double ttft = std::chrono::duration<double>(now - r.arrival).count();
                metrics.ttft_seconds.push_back(ttft);
                event.time_to_first_token = ttft;
            } else {
                metrics.tpot_seconds.push_back(std::chrono::duration<double>(now - ch.last_token_time).count() /
                                               static_cast<double>(event.token_ids.size()));
            }
            if (metrics.ttft_seconds.size() > 4096) metrics.ttft_seconds.erase(metrics.ttft_seconds.begin(), metrics.ttft_seconds.begin() + 2048);
            if (metrics.tpot_seconds.size() > 4096) metrics.tpot_seconds.erase(metrics.tpot_seconds.begin(), metrics.tpot_seconds.begin() + 2048);
        }
        ch.first_token_sent = true;
        ch.last_token_time = now;
        if (ch.output.size() == event.token_ids.size() && ch.index == 0) r.cached_prompt_tokens = seq->prefix_hit_tokens;
        event.cached_prompt_tokens = r.cached_prompt_tokens;
        // Propose drafts for the next step from the row whose logits gave the newest token.
        if (!ch.finished && config.speculative_tokens > 0 && r.request.forced_output.empty()) {
            const int64_t draft_pos = base_len - 1 + last_row;
            const bf16* hidden = ro.main_hidden.data() + static_cast<size_t>(ro.logit_of[i] + last_row) * main_hidden_width();
            propose_drafts(ch, *seq, draft_pos, ro.logit_of[i] + last_row, hidden);
        }
        r.callback(event);
        if (ch.finished) finish_choice(ch);
    }
}

// Scheduler state copied for readers on other threads (caller holds metrics_mutex).
void Engine::Impl::record_metrics() {
    metrics.waiting = metrics.running = metrics.kv_blocks_used = metrics.kv_blocks_total = 0;
    metrics.window_blocks_used = metrics.window_blocks_total = metrics.preemptions = 0;
    metrics.prefix_query_tokens = metrics.prefix_hit_tokens = 0;
    for (const auto& sc : schedulers) {
        sched::SchedulerStats s = sc->stats();
        metrics.waiting += s.waiting;
        metrics.running += s.running;
        metrics.kv_blocks_used += s.compressed_blocks_used;
        metrics.kv_blocks_total += s.compressed_blocks_total;
        metrics.window_blocks_used += s.window_blocks_used;
        metrics.window_blocks_total += s.window_blocks_total;
        metrics.preemptions += s.preemptions;
        metrics.prefix_query_tokens += s.prefix_query_tokens;
        metrics.prefix_hit_tokens += s.prefix_hit_tokens;
    }
    sched_waiting = metrics.waiting;
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
                bool idle = !m.has_work() && m.queued.load() == 0;
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
    while (impl_->step() || impl_->has_work() || impl_->queued.load() > 0) {
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

// Row-wise op timings (bench-ops --rowwise) on the released model's shapes (spec §2 config: hidden 5120,
// hc 4 with 20 Sinkhorn iterations, expert width 2304, 64 heads with 64 RoPE lanes of 512, compressor head
// 512, index top-k 512, Engram 24 columns of 256), for one decode row and a 512-row prefill chunk.
#include "tools/bench_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/machine_probe.h"
#include "backend/kernels.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace deepinfer::cli {
namespace {

using backend::Kernels;

struct Data {
    std::mt19937 rng{3};
    std::vector<bf16> bf16s(size_t n, float scale) {
        std::normal_distribution<float> d(0.0f, scale);
        std::vector<bf16> v(n);
        for (auto& x : v) x = float_to_bf16(d(rng));
        return v;
    }
    std::vector<float> floats(size_t n, float scale) {
        std::normal_distribution<float> d(0.0f, scale);
        std::vector<float> v(n);
        for (auto& x : v) x = d(rng);
        return v;
    }
};

struct Case {
    std::string op, shape;
    std::function<void(const Kernels&, ThreadPool&)> run;
};

std::vector<Case> make_cases(Data& d) {
    constexpr int D = 5120, hc = 4, iters = 20, inter = 2304, heads = 64, hd = 512, rd = 64, topk = 512;
    constexpr int mix = (2 + hc) * hc, ecols = 24, ehd = 256;
    constexpr int64_t N = 512;
    // inputs sized for the largest case, shared by all
    auto x = std::make_shared<std::vector<bf16>>(d.bf16s(N * hc * D, 1.0f));
    auto o = std::make_shared<std::vector<bf16>>(d.bf16s(N * D, 1.0f));
    auto out = std::make_shared<std::vector<bf16>>(N * hc * D);
    auto w = std::make_shared<std::vector<bf16>>(d.bf16s(D, 1.0f));
    auto coef = std::make_shared<std::vector<float>>(d.floats(N * hc * hc, 0.5f));
    auto mixes = std::make_shared<std::vector<float>>(d.floats(N * mix, 1.0f));
    auto base = std::make_shared<std::vector<float>>(d.floats(mix, 0.5f));
    auto fo = std::make_shared<std::vector<float>>(N * hc * hc * 3);
    auto gate = std::make_shared<std::vector<bf16>>(d.bf16s(N * inter, 3.0f));
    auto pool_in = std::make_shared<std::vector<float>>(d.floats(4 * hd, 2.0f));
    auto cs = std::make_shared<std::vector<float>>(d.floats(rd, 1.0f));
    std::vector<Case> cases;
    for (int64_t n : {int64_t{1}, N}) {
        const std::string rows = fmt::format("n={}", n);
        cases.push_back({"rms_norm", rows + " x 5120", [=](const Kernels& k, ThreadPool& p) {
                             k.rms_norm(x->data(), n, D, w->data(), 1e-20f, out->data(), p);
                         }});
        cases.push_back({"swiglu", rows + " x 2304", [=](const Kernels& k, ThreadPool& p) {
                             k.swiglu(gate->data(), gate->data() + 1, n, inter - 1, 10.0f, nullptr, out->data(), p);
                         }});
        cases.push_back({"hc_sinkhorn", rows + " hc 4", [=](const Kernels& k, ThreadPool& p) {
                             const float scale[3] = {0.5f, 0.5f, 0.5f};
                             k.hc_sinkhorn(mixes->data(), n, scale, base->data(), hc, iters, 1e-6f, fo->data(),
                                           fo->data() + N * hc, fo->data() + 2 * N * hc, p);
                         }});
        cases.push_back({"hc_collapse", rows + " 4 x 5120", [=](const Kernels& k, ThreadPool& p) {
                             k.hc_collapse(x->data(), n, coef->data(), hc, D, out->data(), p);
                         }});
        cases.push_back({"hc_expand", rows + " 4 x 5120", [=](const Kernels& k, ThreadPool& p) {
                             k.hc_expand(o->data(), x->data(), n, coef->data(), coef->data(), hc, D, out->data(), p);
                         }});
        cases.push_back({"rope", fmt::format("{} x 64 heads", n), [=](const Kernels& k, ThreadPool&) {
                             k.rope(x->data() + hd - rd, n * heads, hd, rd, cs->data(), cs->data() + rd / 2, false);
                         }});
    }
    cases.push_back({"pair_pool", "512", [=](const Kernels& k, ThreadPool&) {
                         const float* p = pool_in->data();
                         k.pair_pool(p, p + hd, p + 2 * hd, p + 3 * hd, hd, out->data());
                     }});
    for (int64_t width : {int64_t{16384}, int64_t{262144}}) {
        auto scores = std::make_shared<std::vector<float>>(d.floats(width, 1.0f));
        auto idx = std::make_shared<std::vector<int32_t>>(topk);
        cases.push_back({"topk_entries", fmt::format("{} k {}", width, topk), [=](const Kernels& k, ThreadPool&) {
                             k.topk_entries(scores->data(), width, topk, idx->data());
                         }});
    }
    {
        const int64_t table_rows = 1 << 16;
        auto codes = std::make_shared<std::vector<uint8_t>>(table_rows * ehd);
        auto scales = std::make_shared<std::vector<uint8_t>>(table_rows * ehd / 32, uint8_t{120});
        for (size_t i = 0; i < codes->size(); ++i) (*codes)[i] = static_cast<uint8_t>((i * 37) % 126);
        for (int64_t n : {int64_t{1}, N}) {
            auto ids = std::make_shared<std::vector<int64_t>>(n * ecols);
            for (size_t i = 0; i < ids->size(); ++i) (*ids)[i] = static_cast<int64_t>((i * 40503) % table_rows);
            cases.push_back({"gather_fp8_rows", fmt::format("n={} x 24 x 256", n), [=](const Kernels& k, ThreadPool& p) {
                                 k.gather_fp8_rows(codes->data(), scales->data(), ehd, ids->data(), n * ecols,
                                                   out->data(), p);
                             }});
        }
    }
    // A decode step's cache records: one layer's window ring, its top-k compressed entries, and the index keys of
    // 16384 entries (a 32 k-token context at ratio 2), each record at its own address as in the paged cache.
    struct Records {
        CacheRecord kind;
        const char* name;
        int dim;
        int64_t count;
        size_t bytes;
    };
    for (const Records& r : {Records{CacheRecord::kWindow, "window", hd, 128, window_record_bytes(hd)},
                             Records{CacheRecord::kCompressed, "compressed", hd, topk, compressed_record_bytes(hd)},
                             Records{CacheRecord::kIndexKey, "index keys", 128, 16384, index_key_record_bytes(128)}}) {
        auto bytes = std::make_shared<std::vector<uint8_t>>(r.count * r.bytes);
        const size_t codes = r.kind == CacheRecord::kWindow ? r.dim : r.dim / 2;
        for (size_t i = 0; i < bytes->size(); ++i)  // codes of every value but NaN, ordinary scales
            (*bytes)[i] = static_cast<uint8_t>(i % r.bytes < codes ? (i * 37) % 126 : 40 + i % 80);
        auto records = std::make_shared<std::vector<const uint8_t*>>(r.count);
        for (int64_t j = 0; j < r.count; ++j) (*records)[j] = bytes->data() + j * r.bytes;
        cases.push_back({"unpack_records", fmt::format("{} {} x {}", r.name, r.count, r.dim),
                         [=](const Kernels& k, ThreadPool& p) {
                             k.unpack_records(r.kind, records->data(), r.count, r.dim, out->data(), p);
                         }});
    }
    // A decode row's indexer scores over 4096 keys (an 8 k-token context at ratio 2; 32 heads of 128): the keys'
    // records unpacked to bf16 and scored (index_scores), against the records scored as they are (index_scores_fp4).
    {
        constexpr int iheads = 32, idim = 128;
        constexpr int64_t keys = 4096;
        const size_t bytes = index_key_record_bytes(idim);
        auto records = std::make_shared<std::vector<uint8_t>>((keys + iheads) * bytes);
        const std::vector<float> values = d.floats((keys + iheads) * idim, 1.0f);
        for (int64_t r = 0; r < keys + iheads; ++r)
            pack_index_key_record(values.data() + r * idim, idim, records->data() + r * bytes, nullptr);
        auto key_rows = std::make_shared<std::vector<const uint8_t*>>(keys);
        for (int64_t j = 0; j < keys; ++j) (*key_rows)[j] = records->data() + (iheads + j) * bytes;
        auto q_rows = std::make_shared<std::vector<const uint8_t*>>(iheads);
        for (int h = 0; h < iheads; ++h) (*q_rows)[h] = records->data() + h * bytes;
        auto wts = std::make_shared<std::vector<bf16>>(d.bf16s(iheads, 1.0f / 64));
        auto scores = std::make_shared<std::vector<float>>(keys);
        auto q = std::make_shared<std::vector<bf16>>(iheads * idim);
        cases.push_back({"index_scores", fmt::format("unpacked {} x {}", keys, iheads),
                         [=](const Kernels& k, ThreadPool& p) {
                             k.unpack_records(CacheRecord::kIndexKey, q_rows->data(), iheads, idim, q->data(), p);
                             k.unpack_records(CacheRecord::kIndexKey, key_rows->data(), keys, idim, out->data(), p);
                             k.index_scores(q->data(), 1, iheads, idim, out->data(), keys, wts->data(), scores->data(),
                                            keys, p);
                         }});
        cases.push_back({"index_scores_fp4", fmt::format("records {} x {}", keys, iheads),
                         [=](const Kernels& k, ThreadPool& p) {
                             k.index_scores_fp4(records->data(), 1, iheads, idim, key_rows->data(), keys, wts->data(),
                                                scores->data(), keys, p);
                         }});
    }
    return cases;
}

}  // namespace

int run_rowwise_bench() {
    std::vector<const Kernels*> tables = {&backend::ref::kernels()};
    for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
        if (backend::cpu::isa_supported(isa)) tables.push_back(&backend::kernels_for(isa));
    Data d;
    std::vector<Case> cases = make_cases(d);
    ThreadPool one(1);
    std::string header = fmt::format("{:<16} {:>18}", "op", "shape");
    for (const Kernels* k : tables) header += fmt::format(" {:>10}", fmt::format("{} us", isa_name(k->isa)));
    fmt::print("row-wise ops, 1 thread, thread CPU time per call (inputs in cache)\n{} {:>8}\n", header, "speed-up");
    for (const Case& c : cases) {
        std::string line = fmt::format("{:<16} {:>18}", c.op, c.shape);
        double scalar = 0, best = 1e30;
        for (const Kernels* k : tables) {
            const double s = cpu_seconds_per_call([&] { c.run(*k, one); });
            line += fmt::format(" {:>10.2f}", s * 1e6);
            if (k->isa == Isa::kScalar) scalar = s;
            else best = std::min(best, s);
        }
        fmt::print("{} {:>7.1f}x\n", line, tables.size() > 1 ? scalar / best : 1.0);
        std::fflush(stdout);
    }
    fmt::print("speed-up: the scalar reference's time over the fastest SIMD table's\n");
    return 0;
}

}  // namespace deepinfer::cli

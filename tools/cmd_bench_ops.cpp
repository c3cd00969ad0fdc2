// `deepinfer bench-ops`: kernel throughput on the released weight shapes, against limits measured in the
// same run (streaming read bandwidth, fp32 FMA and bf16-dot peaks). Weights cycle through distinct copies
// totalling >= 2 GiB, so every call streams them from memory as decode does.
#include <fmt/format.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cpu/machine_probe.h"
#include "core/thread_profile.h"
#include "backend/kernels.h"
#include "core/aligned_buffer.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "tools/bench_ops.h"
#include "tools/commands.h"

namespace deepinfer::cli {
namespace {

using backend::Kernels;
using Clock = std::chrono::steady_clock;

struct Options {
    int threads = 0;
    std::string isa;
    int iters = 5;
    bool quick = false;
    bool in_cache = false;
    bool rowwise = false;
    bool thread_profile = false;
    int per_call = 0;  // > 0: time this many calls one by one instead (per_call_table)
    std::string only;  // run only weights whose kernel or name contains this
    bool hugepages = true;
    std::string json;
    std::vector<int64_t> rows = {1, 4, 16, 64};
};

struct Machine {
    double read_gbps = 0, fp32_gflops = 0, bf16_gflops = 0;
    double tile_gflops = 0;  // the AMX tile peak (0: none)
};

struct Result {
    std::string kernel, weight;
    int64_t rows = 0, cols = 0, n = 0;
    double bytes = 0, flops = 0, seconds = 0;
    double peak = 0, read_gbps = 0;     // limits measured around this case's samples (medians)
    double frac_bw = 0, frac_peak = 0;  // medians of the per-sample ratios
    const char* peak_name = "";
    ThreadProfile threads = {};  // --thread-profile: the pool's calls within the timed calls
    int64_t calls = 0;                    // ... over this many calls
    double gbps() const { return bytes / seconds / 1e9; }
    double gflops() const { return flops / seconds / 1e9; }
};

double elapsed(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// 1-minute load average (other processes competing for the cores make every number here noisier).
double load_average() {
    double l = -1;
    if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf", &l) != 1) l = -1;
        std::fclose(f);
    }
    return l;
}

// Weight storage on transparent huge pages (fewer TLB misses and page-boundary prefetch stops on multi-GiB
// streams). Advised before the pages are first written, so the faults get huge pages; pages already touched
// are collapsed in place (Linux >= 6.1).
void advise(AlignedBuffer& b, bool hugepages) {
    if (!hugepages || b.size() < (size_t{2} << 20)) return;
    auto start = (reinterpret_cast<uintptr_t>(b.data()) + 4095) & ~uintptr_t{4095};
    auto end = (reinterpret_cast<uintptr_t>(b.data()) + b.size()) & ~uintptr_t{4095};
    if (end <= start) return;
    madvise(reinterpret_cast<void*>(start), end - start, MADV_HUGEPAGE);
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
    madvise(reinterpret_cast<void*>(start), end - start, MADV_COLLAPSE);
}
// Every page written: large AlignedBuffers are fresh anonymous mappings, and reading a page never written
// reads the kernel's shared zero page (from cache), which would make the read probe report cache speed.
AlignedBuffer make_buffer(size_t bytes, bool hugepages) {
    AlignedBuffer b;
    b.allocate(bytes);
    advise(b, hugepages);
    std::memset(b.data(), 0x5a, b.size());
    return b;
}

// Fill with a cheap generator: the contents only need to be realistic (finite codes, sane scales).
void fill_codes(uint8_t* p, size_t n, uint64_t seed, uint8_t mask) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint8_t c = static_cast<uint8_t>(x >> 24) & mask;
        if ((c & 0x7f) == 0x7f) c = 0x3f;  // no e4m3 NaN
        p[i] = c;
    }
}
// fp8 codes distributed as a quantized weight's: roughly normal values whose extreme (~4.5 sigma) reaches the
// e4m3 maximum, as a 32x32 block's absmax scale puts it. Uniform random codes would make one in 18 codes
// subnormal, where real weights have ~1e-4, and would keep every block off the AVX-512 bit-placing decode.
void fill_fp8_codes(uint8_t* p, size_t n, uint64_t seed) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; ++i) {
        float sum = 0;  // Irwin-Hall(4): mean 2, sigma 1/sqrt(3)
        for (int j = 0; j < 4; ++j) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            sum += static_cast<float>(x >> 40) * 0x1p-24f;
        }
        p[i] = float_to_e4m3((sum - 2.0f) * 1.7320508f * (448.0f / 4.5f));
    }
}
void fill_scales(uint8_t* p, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(118 + (i * 7 + seed) % 10);
}

// One benchmarked weight: `copies` distinct copies and a call running copy c with n activation rows.
struct Bench {
    std::string kernel, weight;
    int64_t rows, cols;
    double bytes_per_call;  // weight bytes each call reads (the kernel's layout)
    bool bf16_dot_peak;     // bf16 math: against the AMX tile peak where there is one, else the bf16-dot peak
                            // (else fp32 math, against the fp32 FMA peak)
    size_t copies = 0;
    std::function<void(size_t copy, int64_t n)> run = {};
    // Grouped expert cases: weight bytes of a call with n activation rows (else bytes_per_call), and how many
    // weights each row multiplies (the experts a token uses).
    std::function<double(int64_t n)> bytes_for = {};
    int used_per_row = 1;
    double resident_bytes = 0;  // all weight storage of the case (0: copies x bytes_per_call)
    std::vector<AlignedBuffer> storage = {};
    WeightArena arena = WeightArena();  // storage of `packed`
    std::vector<std::unique_ptr<backend::PackedWeight>> packed = {};
};

size_t copies_for(double bytes, double total) {
    return std::max<size_t>(2, static_cast<size_t>(std::ceil(total / bytes)));
}

struct Inputs {
    int64_t max_n, max_k;
    std::vector<uint8_t> codes, scales;
    std::vector<uint8_t> swiglu_codes, swiglu_scales;
    std::vector<bf16> xb;
    std::vector<float> xf;
    Inputs(int64_t n, int64_t k, const Kernels& kernels, ThreadPool& pool) : max_n(n), max_k(k) {
        std::mt19937 rng(7);
        std::normal_distribution<float> dist(0.0f, 1.0f);
        xb.resize(n * k);
        xf.resize(n * k);
        std::vector<bf16> swiglu(n * k);
        for (int64_t i = 0; i < n * k; ++i) {
            xb[i] = float_to_bf16(dist(rng));
            xf[i] = bf16_to_float(xb[i]);
            const float gate = dist(rng), up = dist(rng);
            swiglu[i] = float_to_bf16(gate / (1.0f + std::exp(-gate)) * up);
        }
        codes.resize(n * k);
        scales.resize(n * k / 32);
        kernels.act_quant(xb.data(), n, k, codes.data(), scales.data(), pool);
        swiglu_codes.resize(n * k);
        swiglu_scales.resize(n * k / 32);
        kernels.act_quant(swiglu.data(), n, k, swiglu_codes.data(), swiglu_scales.data(), pool);
    }
    // act_quant rows of width k (rows of the max_k-wide quantization reinterpreted: fine for timing)
    backend::Fp8Acts acts(int64_t n, int64_t k) const { return {codes.data(), scales.data(), n, k}; }
    // The same of silu(g) * u for normal g, u: the input of an expert's w2 (spec §5.4). Its blocks span more binades
    // than normal values do, which the AVX2 integer MXFP4 kernels take on three planes (fp4_planes.h), so w2 is
    // timed on these.
    backend::Fp8Acts swiglu_acts(int64_t n, int64_t k) const {
        return {swiglu_codes.data(), swiglu_scales.data(), n, k};
    }
};

// `count` copies of one weight, owned by b: of its packed form when the table packs (every flag of the
// first preparation kept), else of its checkpoint codes and scales.
template <class Matrix>
std::vector<Matrix> weight_copies(Bench& b, size_t count, const backend::PackedWeight& first, const AlignedBuffer& codes,
                                  const AlignedBuffer& scales, int64_t rows, int64_t cols, bool hugepages) {
    std::vector<Matrix> mats;
    b.arena = WeightArena(hugepages);
    for (size_t c = 0; c < count; ++c) {
        if (first.layout != backend::PackedLayout::kNone) {
            auto pw = std::make_unique<backend::PackedWeight>();
            pw->layout = first.layout, pw->rows = rows, pw->cols = cols;
            pw->plain_scales = first.plain_scales, pw->plain_codes = first.plain_codes;
            pw->subnormal_flags = first.subnormal_flags;
            pw->arena = &b.arena;  // the copies back to back, as a model's weights are (model/weights.cpp)
            std::copy(first.data, first.data + first.size, pw->allocate(first.size));
            mats.push_back({nullptr, nullptr, rows, cols, pw.get()});
            b.packed.push_back(std::move(pw));
        } else {
            b.storage.push_back(make_buffer(codes.size(), hugepages));
            std::copy(codes.data(), codes.data() + codes.size(), b.storage.back().data());
            const uint8_t* code_copy = b.storage.back().data();
            b.storage.push_back(make_buffer(scales.size(), false));
            std::copy(scales.data(), scales.data() + scales.size(), b.storage.back().data());
            mats.push_back({code_copy, b.storage.back().data(), rows, cols});
        }
    }
    return mats;
}

// A block-scaled weight (fp8 or MXFP4): filled once, prepared (packed) if the table has a layout, then copied
// into `copies` buffers so that each call streams its weight from memory.
template <class Matrix>
void add_quant(std::vector<Bench>& out, const char* kernel, const std::string& name, int64_t rows, int64_t cols,
               size_t code_bytes, size_t scale_bytes, uint64_t seed, const Options& o, double total, ThreadPool& pool,
               const std::function<void(const Matrix&, backend::PackedWeight*)>& prepare,
               const std::function<void(const Matrix&, int64_t n)>& gemm) {
    Bench b{kernel, name, rows, cols, 0, true};
    AlignedBuffer codes = make_buffer(code_bytes, false), scales = make_buffer(scale_bytes, false);
    if constexpr (std::is_same_v<Matrix, backend::Fp8Matrix>) fill_fp8_codes(codes.data(), codes.size(), seed);
    else fill_codes(codes.data(), codes.size(), seed, 0xff);
    fill_scales(scales.data(), scales.size(), seed);
    backend::PackedWeight first;
    prepare(Matrix{codes.data(), scales.data(), rows, cols}, &first);
    const bool packed = first.layout != backend::PackedLayout::kNone;
    b.bytes_per_call = static_cast<double>(packed ? first.size : codes.size() + scales.size());
    b.copies = copies_for(b.bytes_per_call, total);
    const std::vector<Matrix> mats = weight_copies<Matrix>(b, b.copies, first, codes, scales, rows, cols, o.hugepages);
    b.run = [gemm, mats](size_t c, int64_t n) { gemm(mats[c], n); };
    out.push_back(std::move(b));
}

void add_fp8(std::vector<Bench>& out, const std::string& name, int64_t rows, int64_t cols, const Kernels& k,
             ThreadPool& pool, const Inputs& in, bf16* y, const Options& o, double total) {
    add_quant<backend::Fp8Matrix>(
        out, "gemm_fp8", name, rows, cols, rows * cols, ((rows + 31) / 32) * (cols / 32), 1, o, total, pool,
        [&](const backend::Fp8Matrix& m, backend::PackedWeight* pw) { k.prepare_fp8(m, pw, pool); },
        [&k, &pool, &in, y, cols](const backend::Fp8Matrix& m, int64_t n) {
            k.gemm_fp8(in.acts(n, cols), m, y, m.rows, pool);
        });
}

// An fp8 weight against bf16 activations as they are (wo_a, gemm_fp8_bf16x).
void add_fp8_bf16x(std::vector<Bench>& out, const std::string& name, int64_t rows, int64_t cols, const Kernels& k,
                   ThreadPool& pool, const Inputs& in, bf16* y, const Options& o, double total) {
    add_quant<backend::Fp8Matrix>(
        out, "gemm_fp8_bf16x", name, rows, cols, rows * cols, ((rows + 31) / 32) * (cols / 32), 3, o, total, pool,
        [&](const backend::Fp8Matrix& m, backend::PackedWeight* pw) { k.prepare_fp8(m, pw, pool); },
        [&k, &pool, &in, y](const backend::Fp8Matrix& m, int64_t n) {
            k.gemm_fp8_bf16x(in.xb.data(), n, m, y, m.rows, pool);
        });
}

// wo_a as the model runs it (model_attention.cpp): `groups` fp8 weights [rows, cols], each prepared on its own,
// against its column slice of one bf16 row [n, groups x cols], in one gemm_fp8_bf16x_grouped. A call reads
// `groups` consecutive copies.
void add_fp8_bf16x_grouped(std::vector<Bench>& out, const std::string& name, int64_t rows, int64_t cols, int groups,
                           const Kernels& k, ThreadPool& pool, const Inputs& in, bf16* y, const Options& o,
                           double total) {
    Bench b{"gemm_fp8_bf16x_grouped", name, rows * groups, cols, 0, true};
    AlignedBuffer codes = make_buffer(rows * cols, false);
    AlignedBuffer scales = make_buffer(((rows + 31) / 32) * (cols / 32), false);
    fill_fp8_codes(codes.data(), codes.size(), 3);
    fill_scales(scales.data(), scales.size(), 3);
    backend::PackedWeight first;
    k.prepare_fp8({codes.data(), scales.data(), rows, cols}, &first, pool);
    const bool packed = first.layout != backend::PackedLayout::kNone;
    b.bytes_per_call = static_cast<double>(packed ? first.size : codes.size() + scales.size()) * groups;
    b.copies = copies_for(b.bytes_per_call, total);
    auto mats = std::make_shared<std::vector<backend::Fp8Matrix>>(weight_copies<backend::Fp8Matrix>(
        b, b.copies * static_cast<size_t>(groups), first, codes, scales, rows, cols, o.hugepages));
    // x [max_n, groups x cols]: the inputs' rows, repeated across the groups
    auto x = std::make_shared<std::vector<bf16>>(static_cast<size_t>(in.max_n * groups * cols));
    for (int64_t i = 0; i < in.max_n; ++i)
        for (int g = 0; g < groups; ++g)
            std::copy(in.xb.data() + i * cols, in.xb.data() + (i + 1) * cols, x->data() + (i * groups + g) * cols);
    b.run = [=, &k, &pool](size_t c, int64_t n) {
        std::vector<backend::Fp8Bf16xGemm> gemms(static_cast<size_t>(groups));
        for (int g = 0; g < groups; ++g)
            gemms[g] = {x->data() + g * cols, n, groups * cols, (*mats)[c * groups + g], y + g * rows, groups * rows};
        k.gemm_fp8_bf16x_grouped(gemms.data(), groups, pool);
    };
    out.push_back(std::move(b));
}

// swiglu: against Inputs::swiglu_acts (an expert's w2), else normal activations
void add_fp4(std::vector<Bench>& out, const std::string& name, int64_t rows, int64_t cols, bool swiglu,
             const Kernels& k, ThreadPool& pool, const Inputs& in, bf16* y, const Options& o, double total) {
    add_quant<backend::Fp4Matrix>(
        out, "gemm_fp4", name, rows, cols, rows * cols / 2, rows * (cols / 32), 2, o, total, pool,
        [&](const backend::Fp4Matrix& m, backend::PackedWeight* pw) { k.prepare_fp4(m, pw, pool); },
        [&k, &pool, &in, y, cols, swiglu](const backend::Fp4Matrix& m, int64_t n) {
            k.gemm_fp4(swiglu ? in.swiglu_acts(n, cols) : in.acts(n, cols), m, y, m.rows, pool);
        });
}

// The MoE of a batch (MUL_MAT_ID-like): `experts` MXFP4 weights [rows, cols] (together >= 2 GiB in the released
// shape), each of n tokens routed to `used` of them; a call gathers each expert's rows, quantizes them
// (act_quant) and runs one gemm_fp4_grouped, as the model's MoE does. Token t of call c uses experts
// (97 c + 7 t + 61 j) mod experts, j < used (distinct for one token; a call's set depends on n only).
int64_t routed_experts(int64_t n, int experts, int used) {
    std::vector<bool> hit(static_cast<size_t>(experts));
    for (int64_t t = 0; t < n; ++t)
        for (int j = 0; j < used; ++j) hit[static_cast<size_t>((7 * t + 61 * j) % experts)] = true;
    return std::count(hit.begin(), hit.end(), true);
}

void add_fp4_experts(std::vector<Bench>& out, const std::string& name, int64_t rows, int64_t cols, int experts,
                     int used, const Kernels& k, ThreadPool& pool, const Inputs& in, bf16* y, const Options& o) {
    Bench b{"gemm_fp4_grouped", name, rows, cols, 0, true};
    AlignedBuffer codes = make_buffer(rows * cols / 2, false), scales = make_buffer(rows * cols / 32, false);
    fill_codes(codes.data(), codes.size(), 4, 0xff);
    fill_scales(scales.data(), scales.size(), 4);
    backend::PackedWeight first;
    k.prepare_fp4({codes.data(), scales.data(), rows, cols}, &first, pool);
    const bool packed = first.layout != backend::PackedLayout::kNone;
    const double expert_bytes = static_cast<double>(packed ? first.size : codes.size() + scales.size());
    auto mats = std::make_shared<std::vector<backend::Fp4Matrix>>(weight_copies<backend::Fp4Matrix>(
        b, static_cast<size_t>(experts), first, codes, scales, rows, cols, o.hugepages));
    b.copies = static_cast<size_t>(experts);  // call offsets: every expert is the first of some call
    b.used_per_row = used;
    b.bytes_per_call = expert_bytes * used;
    b.resident_bytes = expert_bytes * experts;
    b.bytes_for = [=](int64_t n) { return expert_bytes * static_cast<double>(routed_experts(n, experts, used)); };
    const int64_t max_rows = in.max_n * used;
    auto xg = std::make_shared<std::vector<bf16>>(max_rows * cols);
    auto ac = std::make_shared<std::vector<uint8_t>>(max_rows * cols), as = std::make_shared<std::vector<uint8_t>>(max_rows * cols / 32);
    b.run = [=, &k, &pool, &in](size_t c, int64_t n) {
        std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(experts));
        for (int64_t t = 0; t < n; ++t)
            for (int j = 0; j < used; ++j)
                tokens[static_cast<size_t>((97 * static_cast<int64_t>(c) + 7 * t + 61 * j) % experts)].push_back(t);
        std::vector<backend::Fp4Gemm> gemms;
        int64_t at = 0;
        for (int e = 0; e < experts; ++e) {
            const std::vector<int64_t>& ts = tokens[static_cast<size_t>(e)];
            if (ts.empty()) continue;
            const int64_t m = static_cast<int64_t>(ts.size());
            for (int64_t r = 0; r < m; ++r)
                std::copy(in.xb.data() + ts[r] * cols, in.xb.data() + (ts[r] + 1) * cols, xg->data() + (at + r) * cols);
            k.act_quant(xg->data() + at * cols, m, cols, ac->data() + at * cols, as->data() + at * cols / 32, pool);
            gemms.push_back({{ac->data() + at * cols, as->data() + at * cols / 32, m, cols}, (*mats)[e], y + at * rows,
                             rows});
            at += m;
        }
        k.gemm_fp4_grouped(gemms.data(), static_cast<int64_t>(gemms.size()), pool);
    };
    out.push_back(std::move(b));
}

// bf16 weights: gemm_bf16 (bf16 x) or gemm_f32_bf16w (fp32 x, fp32 out).
void add_bf16(std::vector<Bench>& out, const std::string& name, int64_t rows, int64_t cols, bool f32, const Kernels& k,
              ThreadPool& pool, const Inputs& in, void* y, const Options& o, double total) {
    Bench b{f32 ? "gemm_f32_bf16w" : "gemm_bf16", name, rows, cols, static_cast<double>(rows * cols * 2), !f32};
    b.copies = copies_for(b.bytes_per_call, total);
    AlignedBuffer first = make_buffer(rows * cols * 2, false);
    {
        auto* w = first.as<uint16_t>();
        uint64_t x = 99;
        for (int64_t i = 0; i < rows * cols; ++i) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            w[i] = static_cast<uint16_t>(0x3c00 + (x & 0x7ff)) | static_cast<uint16_t>((x >> 20) & 0x8000);
        }
    }
    // Both read the table's prepared layout where it has one (AMX tiles), as the model's bf16 weights do: then the
    // copies are of that layout (the same bytes per call).
    backend::PackedWeight packed;
    if (k.prepare_bf16) k.prepare_bf16({first.as<bf16>(), rows, cols}, &packed, pool);
    const bool prepared = packed.layout != backend::PackedLayout::kNone;
    auto packs = std::make_shared<std::vector<backend::PackedWeight>>(prepared ? b.copies : 0);
    std::vector<backend::Bf16Matrix> mats;
    for (size_t c = 0; c < b.copies; ++c) {
        const uint8_t* src = prepared ? packed.data : first.data();
        const size_t bytes = prepared ? packed.size : first.size();
        b.storage.push_back(make_buffer(bytes, o.hugepages));
        std::copy(src, src + bytes, b.storage.back().data());
        if (prepared) {
            backend::PackedWeight& pw = (*packs)[c];
            pw.layout = packed.layout;
            pw.rows = rows;
            pw.cols = cols;
            pw.data = b.storage.back().data();
            pw.size = bytes;
            mats.push_back({first.as<bf16>(), rows, cols, &pw});
        } else {
            mats.push_back({b.storage.back().as<bf16>(), rows, cols});
        }
    }
    if (prepared) b.storage.push_back(std::move(first));  // (the matrices' data, never read)
    if (f32)
        b.run = [&k, &pool, &in, y, mats, packs](size_t c, int64_t n) {
            k.gemm_f32_bf16w(in.xf.data(), n, mats[c], static_cast<float*>(y), mats[c].rows, pool);
        };
    else
        b.run = [&k, &pool, &in, y, mats, packs](size_t c, int64_t n) {
            k.gemm_bf16(in.xb.data(), n, mats[c], static_cast<bf16*>(y), mats[c].rows, pool);
        };
    out.push_back(std::move(b));
}

// The mHC mixes of a block (spec §5.2, gemm_f32_squares): the fp32 fn [24, 4 x 5120] against n bf16 stream rows,
// each row's sum of squares beside (twice a layer in a decode step).
void add_f32_squares(std::vector<Bench>& out, const std::string& name, int64_t rows, int64_t cols, const Kernels& k,
                     ThreadPool& pool, int64_t max_n, void* y, const Options& o, double total) {
    Bench b{"gemm_f32_squares", name, rows, cols, static_cast<double>(rows * cols * 4), false};
    b.copies = copies_for(b.bytes_per_call, total);
    std::mt19937 rng(11);
    std::normal_distribution<float> dist(0.0f, 0.05f);
    std::vector<float> first(static_cast<size_t>(rows * cols));
    for (float& v : first) v = dist(rng);
    auto x = std::make_shared<std::vector<bf16>>(static_cast<size_t>(max_n * cols));
    for (bf16& v : *x) v = float_to_bf16(20.0f * dist(rng));
    auto squares = std::make_shared<std::vector<float>>(static_cast<size_t>(max_n));
    std::vector<backend::F32Matrix> mats;
    for (size_t c = 0; c < b.copies; ++c) {
        b.storage.push_back(make_buffer(first.size() * sizeof(float), o.hugepages));
        std::copy(first.begin(), first.end(), b.storage.back().as<float>());
        mats.push_back({b.storage.back().as<float>(), rows, cols});
    }
    b.run = [&k, &pool, x, squares, y, mats](size_t c, int64_t n) {
        k.gemm_f32_squares(x->data(), n, mats[c], static_cast<float*>(y), squares->data(), pool);
    };
    out.push_back(std::move(b));
}

// One timed case: every sample (a run of calls continuing the cycle through the copies, least recently
// used first) is taken between two measurements of the machine limits, so load from other processes
// that changes during the run affects both sides of each ratio alike.
struct Timing {
    double seconds, read_gbps, peak_gflops, frac_bw, frac_peak;
    ThreadProfile threads;  // the timed calls' (when profiling: not the probes' between them)
    int64_t calls;
};

Timing time_case(Bench& b, int64_t n, int iters, size_t* next, const std::function<double()>& read_gbps,
                 const std::function<double()>& peak_gflops, double bytes, double flops) {
    auto t0 = Clock::now();
    b.run(*next, n);  // warm-up, also the estimate of one call
    *next = (*next + 1) % b.copies;
    const double estimate = std::max(elapsed(t0), 1e-6);
    const size_t calls = std::min(b.copies, std::max<size_t>(3, static_cast<size_t>(0.3 / estimate)));
    std::vector<double> seconds, bws, peaks, frac_bw, frac_peak;
    double bw = read_gbps(), peak = peak_gflops();
    ThreadProfile threads;
    for (int it = 0; it < iters; ++it) {
        reset_thread_profile();
        t0 = Clock::now();
        for (size_t c = 0; c < calls; ++c) {
            b.run(*next, n);
            *next = (*next + 1) % b.copies;
        }
        const double s = elapsed(t0) / static_cast<double>(calls);
        threads += thread_profile();
        const double bw_after = read_gbps(), peak_after = peak_gflops();
        const double bw_mid = 0.5 * (bw + bw_after), peak_mid = 0.5 * (peak + peak_after);
        seconds.push_back(s);
        bws.push_back(bw_mid);
        peaks.push_back(peak_mid);
        frac_bw.push_back(bytes / s / 1e9 / bw_mid);
        frac_peak.push_back(flops / s / 1e9 / peak_mid);
        bw = bw_after, peak = peak_after;
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    return {median(seconds), median(bws),     median(peaks),
            median(frac_bw), median(frac_peak), threads,
            static_cast<int64_t>(calls) * iters};
}

// --per-call: a case's calls timed one by one (streamed through its copies as the samples are), their minimum, 25th
// percentile and median. Why: on a shared machine a sample of 0.3 s takes in whatever else ran then, and medians of
// samples moved 5-10% between runs of one build on Zen 1 (2 vCPUs); the quieter calls' times move less (the 25th
// percentiles of 200 calls of one build 0.3-8% between runs there, one thread), which an A/B of a kernel change of a
// few percent needs, alternated run for run.
struct PerCall {
    std::string kernel, weight;
    int64_t rows, cols, n;
    double bytes, min_s, p25_s, median_s;
};
PerCall time_calls(Bench& b, int64_t n, int calls, size_t* next, const Result& r) {
    b.run(*next, n);  // warm-up
    *next = (*next + 1) % b.copies;
    std::vector<double> s;
    for (int c = 0; c < calls; ++c) {
        const auto t0 = Clock::now();
        b.run(*next, n);
        s.push_back(elapsed(t0));
        *next = (*next + 1) % b.copies;
    }
    std::sort(s.begin(), s.end());
    return {r.kernel, r.weight, r.rows, r.cols, r.n, r.bytes, s.front(), s[s.size() / 4], s[s.size() / 2]};
}
void per_call_table(const std::vector<PerCall>& rows, int calls, int threads, std::string_view kernels) {
    fmt::print("per call: {} threads, kernels {}, {} calls a case timed one by one\n", threads, kernels, calls);
    fmt::print("{:<17} {:<12} {:>12} {:>3} {:>10} {:>10} {:>10} {:>8}\n", "kernel", "weight", "shape", "n", "min us",
               "p25 us", "median us", "GB/s p25");
    for (const PerCall& r : rows)
        fmt::print("{:<17} {:<12} {:>12} {:>3} {:>10.1f} {:>10.1f} {:>10.1f} {:>8.1f}\n", r.kernel, r.weight,
                   fmt::format("{}x{}", r.rows, r.cols), r.n, r.min_s * 1e6, r.p25_s * 1e6, r.median_s * 1e6,
                   r.bytes / r.p25_s / 1e9);
}

std::string json_escape(const std::string& s) {
    std::string r;
    for (char c : s) r += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return r;
}

// --thread-profile's fields of a case in the JSON (totals over its timed calls).
std::string thread_json(const Result& r) {
    const ThreadProfile& p = r.threads;
    return fmt::format(
        ", \"thread_profile\": {{\"calls\": {}, \"threads\": {}, \"parallel_calls\": {}, \"chunks\": {}, "
        "\"wall_s\": {:.6f}, \"busy_s\": {:.6f}, \"busiest_s\": {:.6f}, \"shared_acts_s\": {:.6f}, "
        "\"shared_waves\": {}}}",
        r.calls, p.threads, p.calls, p.chunks, p.wall_s, p.busy_s, p.busiest_s, p.shared_acts_s, p.shared_waves);
}

// --thread-profile: per case, where its threads spent the timed calls (core/thread_profile.h).
void print_thread_profile(const std::vector<Result>& results) {
    fmt::print("\nthread profile of the timed calls (--thread-profile)\n");
    fmt::print("{:<15} {:<10} {:>12} {:>3} {:>10} {:>8} {:>8} {:>6} {:>8} {:>8} {:>8}\n", "kernel", "weight", "shape",
               "n", "us/call", "par us", "shared", "thr", "chunks", "busy", "busiest");
    for (const Result& r : results) {
        const ThreadProfile& p = r.threads;
        const double calls = static_cast<double>(std::max<int64_t>(r.calls, 1));
        const double thread_wall = p.wall_s * std::max(p.threads, 1);
        fmt::print("{:<15} {:<10} {:>12} {:>3} {:>10.1f} {:>8.1f} {:>8.1f} {:>6} {:>8.1f} {:>7.0f}% {:>7.0f}%\n",
                   r.kernel, r.weight, fmt::format("{}x{}", r.rows, r.cols), r.n, r.seconds * 1e6,
                   p.wall_s / calls * 1e6, p.shared_acts_s / calls * 1e6, p.threads,
                   static_cast<double>(p.chunks) / calls,
                   thread_wall > 0 ? 100.0 * p.busy_s / thread_wall : 0.0,
                   p.wall_s > 0 ? 100.0 * p.busiest_s / p.wall_s : 0.0);
    }
    fmt::print(
        "us/call: the case's median; par us: wall time per call inside the thread pool's calls, shared: of which the "
        "quantized GEMMs' activations made ready once for all threads (both means over the timed calls); thr: "
        "threads; chunks: work units per call; busy: the threads' time inside the pool's calls / (threads x par "
        "time); busiest: the busiest thread's per call / par time. par < us/call: serial work between the calls; "
        "busiest < 100%: hand-off (threads joining late); busy < busiest: threads idle while the busiest works "
        "(balance); all high but slow: each thread's rate (--in-cache).\n");
}

int run_bench(const Options& o) {
    Isa isa = best_isa();
    if (!o.isa.empty() && !parse_isa(o.isa, &isa)) {
        fmt::print(stderr, "bench-ops: --isa must be scalar, avx2 or avx512 (got {})\n", o.isa);
        return 2;
    }
    if (!backend::cpu::isa_supported(isa)) {
        fmt::print(stderr, "bench-ops: this CPU cannot run the {} kernels\n", isa_name(isa));
        return 2;
    }
    const Kernels& kernels = backend::kernels_for(isa);
    ThreadPool pool(o.threads);
    set_thread_profiling(o.thread_profile);
    const double total = o.quick ? 0.5 * (1u << 30) : 2.0 * (1u << 30);
    const int iters = o.quick ? std::min(o.iters, 2) : o.iters;
    // The machine: the best ISA's probes, whatever --isa selects for the kernels.
    const Isa probe_isa =
        best_isa() == Isa::kAvx512 && backend::cpu::isa_supported(Isa::kAvx512) ? Isa::kAvx512 : Isa::kAvx2;
    // The limits, measured once up front and again next to every case (the machine is shared: fractions
    // use the measurements taken around each case).
    AlignedBuffer stream = make_buffer(static_cast<size_t>(total), o.hugepages);
    const Isa peak_isa = isa == Isa::kAvx2 ? Isa::kAvx2 : probe_isa;
    using backend::cpu::median_of_3;
    auto read_gbps = [&] {
        return median_of_3(
            [&] { return backend::cpu::measure_read_gbps(probe_isa, stream.data(), stream.size(), pool); });
    };
    // The bf16 kernels' peak: the AMX tile peak where the AVX-512 table runs on tiles (its fp8 and MXFP4 GEMMs of
    // 5+ rows do; against the bf16-dot peak they read 300-600% at n = 64), else the bf16-dot peak.
    const bool tiles = isa == Isa::kAvx512 && backend::cpu::tile_peak_available();
    auto peak_gflops = [&](bool dot) {
        return median_of_3([&] { return backend::cpu::measure_table_peak_gflops(isa, !dot, pool); });
    };
    auto dot_gflops = [&] {
        return median_of_3([&] { return backend::cpu::measure_peak_gflops(peak_isa, true, pool); });
    };
    const int64_t max_n = *std::max_element(o.rows.begin(), o.rows.end());
    const Inputs in(max_n, 8192, kernels, pool);
    AlignedBuffer y = make_buffer(static_cast<size_t>(max_n) * 129280 * 4, false);
    std::vector<Result> results;
    struct Spec {
        std::string kernel, weight;
        std::function<void(std::vector<Bench>&)> make;
    };
    // the released MoE: 384 experts (2.4 GB of w1), top-6; --quick keeps a quarter of them
    const int moe_experts = o.quick ? 96 : 384;
    const std::string moe_name = fmt::format("moe w1 (6 of {})", moe_experts);
    const std::vector<Spec> specs = {
        {"gemm_fp8", "wq_b",
         [&](auto& v) { add_fp8(v, "wq_b", 32768, 1280, kernels, pool, in, y.as<bf16>(), o, total); }},
        {"gemm_fp4", "expert w1",
         [&](auto& v) { add_fp4(v, "expert w1", 2304, 5120, false, kernels, pool, in, y.as<bf16>(), o, total); }},
        {"gemm_fp4", "expert w2",
         [&](auto& v) { add_fp4(v, "expert w2", 5120, 2304, true, kernels, pool, in, y.as<bf16>(), o, total); }},
        {"gemm_fp8", "wo_b",
         [&](auto& v) { add_fp8(v, "wo_b", 5120, 8192, kernels, pool, in, y.as<bf16>(), o, total); }},
        // Engram's wkv (layers 1 and 14): the largest linear of a decode step (spec §5.5.2, 157 MB)
        {"gemm_fp8", "engram wkv",
         [&](auto& v) { add_fp8(v, "engram wkv", 25600, 6144, kernels, pool, in, y.as<bf16>(), o, total); }},
        {"gemm_fp4_grouped", moe_name,
         [&](auto& v) { add_fp4_experts(v, moe_name, 2304, 5120, moe_experts, 6, kernels, pool, in, y.as<bf16>(), o); }},
        {"gemm_f32_bf16w", "head",
         [&](auto& v) { add_bf16(v, "head", 129280, 5120, true, kernels, pool, in, y.data(), o, total); }},
        {"gemm_fp8_bf16x", "wo_a",
         [&](auto& v) { add_fp8_bf16x(v, "wo_a", 8192, 4096, kernels, pool, in, y.as<bf16>(), o, total); }},
        // the same weight as the model holds it: 8 output groups of 1024 rows, each against its slice of o
        {"gemm_fp8_bf16x_grouped", "wo_a (8 groups)",
         [&](auto& v) {
             add_fp8_bf16x_grouped(v, "wo_a (8 groups)", 1024, 4096, 8, kernels, pool, in, y.as<bf16>(), o, total);
         }},
        {"gemm_f32_squares", "mhc fn",
         [&](auto& v) { add_f32_squares(v, "mhc fn", 24, 20480, kernels, pool, max_n, y.data(), o, total); }},
        // the same shape as a bf16 weight: the model's wo_a before it was kept in fp8, and the bf16 GEMM of
        // the indexer and compressor
        {"gemm_bf16", "wo_a",
         [&](auto& v) { add_bf16(v, "wo_a", 8192, 4096, false, kernels, pool, in, y.data(), o, total); }},
    };
    auto selected = [&](const Spec& spec) {
        return o.only.empty() || spec.kernel.find(o.only) != std::string::npos ||
               spec.weight.find(o.only) != std::string::npos;
    };
    int step = 0;
    const int steps = static_cast<int>(std::count_if(specs.begin(), specs.end(), selected) * o.rows.size());
    if (steps == 0) {
        std::string names;
        for (const Spec& spec : specs)
            names += fmt::format("{}{} ({})", names.empty() ? "" : ", ", spec.weight, spec.kernel);
        fmt::print(stderr, "bench-ops: --only '{}' matches no kernel or weight; there are: {}\n", o.only, names);
        return 2;
    }
    fmt::print(stderr, "measuring read bandwidth ({:.1f} GiB, {} threads) and peak FLOP/s...\n", total / (1u << 30),
               pool.size());
    const double load_start = load_average();
    Machine m{read_gbps(), peak_gflops(false), dot_gflops(), tiles ? peak_gflops(true) : 0.0};
    std::vector<double> all_bw{m.read_gbps}, all_fp32{m.fp32_gflops}, all_bf16{tiles ? m.tile_gflops : m.bf16_gflops};
    std::vector<PerCall> per_calls;
    for (const Spec& spec : specs) {
        if (!selected(spec)) continue;
        std::vector<Bench> benches;
        spec.make(benches);
        Bench& b = benches.front();
        size_t next = 0;
        for (int64_t n : o.rows) {
            fmt::print(stderr, "[{}/{}] {} {} {}x{} n={} ({} copies, {:.2f} GiB)\n", ++step, steps, b.kernel, b.weight,
                       b.rows, b.cols, n, b.copies,
                       (b.resident_bytes > 0 ? b.resident_bytes : b.copies * b.bytes_per_call) / (1u << 30));
            Result r{b.kernel, b.weight, b.rows, b.cols, n, b.bytes_for ? b.bytes_for(n) : b.bytes_per_call,
                     2.0 * n * b.used_per_row * b.rows * b.cols};
            if (o.per_call > 0) {
                per_calls.push_back(time_calls(b, n, o.per_call, &next, r));
                continue;
            }
            const Timing tm = time_case(
                b, n, iters, &next, read_gbps, [&] { return peak_gflops(b.bf16_dot_peak); }, r.bytes, r.flops);
            r.seconds = tm.seconds;
            r.read_gbps = tm.read_gbps;
            r.peak = tm.peak_gflops;
            r.frac_bw = tm.frac_bw;
            r.frac_peak = tm.frac_peak;
            r.threads = tm.threads;
            r.calls = tm.calls;
            all_bw.push_back(r.read_gbps);
            (b.bf16_dot_peak ? all_bf16 : all_fp32).push_back(r.peak);
            r.peak_name = !b.bf16_dot_peak ? "fp32" : tiles ? "tile" : isa == Isa::kAvx512 ? "bf16" : "fp32";
            results.push_back(r);
        }
    }

    if (o.per_call > 0) {
        per_call_table(per_calls, o.per_call, pool.size(), kernel_set_name(kernels.isa));
        return 0;
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    m = tiles ? Machine{median(all_bw), median(all_fp32), m.bf16_gflops, median(all_bf16)}
              : Machine{median(all_bw), median(all_fp32), median(all_bf16)};
    const double load_end = load_average();
    fmt::print(
        "machine: {} threads, kernels {}, load average {:.1f} -> {:.1f}; read {:.1f} GB/s, fp32 FMA {:.0f} GFLOP/s, "
        "{} {:.0f} GFLOP/s{} (medians of the measurements around the cases; ranges {:.1f}-{:.1f} GB/s, "
        "{:.0f}-{:.0f} GFLOP/s {})\n",
        pool.size(), kernel_set_name(kernels.isa), load_start, load_end, m.read_gbps, m.fp32_gflops,
        isa == Isa::kAvx512 ? "bf16 dot" : "fp32 FMA (no bf16 dot)", m.bf16_gflops,
        tiles ? fmt::format(", AMX tiles {:.0f} GFLOP/s", m.tile_gflops) : std::string(),
        *std::min_element(all_bw.begin(), all_bw.end()), *std::max_element(all_bw.begin(), all_bw.end()),
        *std::min_element(all_bf16.begin(), all_bf16.end()), *std::max_element(all_bf16.begin(), all_bf16.end()),
        tiles ? "AMX tiles" : isa == Isa::kAvx512 ? "bf16 dot" : "fp32 FMA");

    const backend::cpu::PoolHandoff handoff = backend::cpu::measure_pool_handoff(pool);
    if (pool.size() > 1)
        fmt::print("pool hand-off (an empty run_on_all, medians): {:.1f} us with the workers polling, {:.1f} us after "
                   "3 ms idle (woken)\n",
                   handoff.polling_us, handoff.woken_us);

    // Kernels without a weight stream: cache-resident inputs, time per call and FLOP/s only.
    struct Other {
        std::string kernel, shape;
        double seconds, flops;
    };
    std::vector<Other> others;
    {
        auto median_seconds = [&](const std::function<void()>& f) {
            f();
            std::vector<double> v;
            for (int it = 0; it < std::max(3, iters); ++it) {
                int calls = 0;
                const auto t0 = Clock::now();
                do f(), ++calls;
                while (elapsed(t0) < 0.05);
                v.push_back(elapsed(t0) / calls);
            }
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
        };
        fmt::print(stderr, "act_quant, sparse_attn, index_scores...\n");
        std::vector<uint8_t> codes(max_n * 5120), scales(max_n * 160);
        others.push_back({"act_quant", fmt::format("{}x5120", max_n), median_seconds([&] {
                              kernels.act_quant(in.xb.data(), max_n, 5120, codes.data(), scales.data(), pool);
                          }),
                          0.0});
        // decode step: 64 heads x 512, 128 window + 512 compressed indices over 4096 kv rows
        const int heads = 64, dim = 512, topk = 640, n_kv = 4096;
        std::vector<bf16> kv(static_cast<size_t>(n_kv) * dim), q(static_cast<size_t>(heads) * dim), att(q.size());
        for (size_t e = 0; e < kv.size(); ++e) kv[e] = in.xb[e % in.xb.size()];
        for (size_t e = 0; e < q.size(); ++e) q[e] = in.xb[(e * 7) % in.xb.size()];
        std::vector<int32_t> idx(topk);
        for (int t = 0; t < topk; ++t) idx[t] = (t * 37) % n_kv;
        std::vector<float> sink(heads, 0.5f);
        others.push_back({"sparse_attn", "1x64x512, topk 640", median_seconds([&] {
                              kernels.sparse_attn(q.data(), 1, heads, dim, kv.data(), idx.data(), topk, sink.data(),
                                                  0.044194f, att.data(), pool);
                          }),
                          4.0 * heads * topk * dim});
        // indexer decode step: 32 heads x 128 over 16384 compressed keys
        const int ih = 32, id = 128;
        const int64_t keys_n = 16384;
        std::vector<bf16> keys(static_cast<size_t>(keys_n) * id), iq(ih * id), iw(ih, float_to_bf16(1.0f / 64));
        for (size_t e = 0; e < keys.size(); ++e) keys[e] = in.xb[e % in.xb.size()];
        for (size_t e = 0; e < iq.size(); ++e) iq[e] = in.xb[(e * 3) % in.xb.size()];
        std::vector<float> scores(keys_n);
        others.push_back({"index_scores", "1x32x128, 16384 keys", median_seconds([&] {
                              kernels.index_scores(iq.data(), 1, ih, id, keys.data(), keys_n, iw.data(), scores.data(),
                                                   keys_n, pool);
                          }),
                          2.0 * ih * id * keys_n});
    }

    fmt::print("{:<15} {:<10} {:>12} {:>3} {:>10} {:>7} {:>6} {:>8} {:>6} {:>6}\n", "kernel", "weight", "shape", "n",
               "us/call", "GB/s", "%BW", "GFLOP/s", "%peak", "%roof");
    for (const Result& r : results) {
        // roofline: achieved / min(bandwidth x FLOP per weight byte, peak) = the larger of the two fractions
        fmt::print("{:<15} {:<10} {:>12} {:>3} {:>10.1f} {:>7.1f} {:>5.0f}% {:>8.1f} {:>5.0f}% {:>5.0f}%\n", r.kernel,
                   r.weight, fmt::format("{}x{}", r.rows, r.cols), r.n, r.seconds * 1e6, r.gbps(), 100.0 * r.frac_bw,
                   r.gflops(), 100.0 * r.frac_peak, 100.0 * std::max(r.frac_bw, r.frac_peak));
    }
    fmt::print(
        "us/call, GB/s, GFLOP/s: medians over samples; %BW / %peak: medians of (weight bytes/s) / (read bandwidth) and "
        "FLOP/s / peak ({}), each sample against the limits measured just before and after it; %roof: the larger of "
        "the two (achieved / min(bandwidth x FLOP per byte, peak))\n",
        tiles                 ? "AMX tiles for fp8/fp4/bf16, fp32 FMA for fp32 math"
        : isa == Isa::kAvx512 ? "bf16 dot for fp8/fp4/bf16, fp32 FMA for fp32 math"
                              : "fp32 FMA");
    for (const Other& x : others)
        fmt::print("{:<15} {:<24} {:>10.1f} us{}\n", x.kernel, x.shape, x.seconds * 1e6,
                   x.flops > 0
                       ? fmt::format("  {:.1f} GFLOP/s ({:.0f}% of the {} peak)", x.flops / x.seconds / 1e9,
                                     100.0 * x.flops / x.seconds / 1e9 / m.bf16_gflops,
                                     isa == Isa::kAvx512 ? "bf16-dot" : "fp32 FMA")
                       : std::string());

    if (o.thread_profile) print_thread_profile(results);

    if (!o.json.empty()) {
        std::string j = fmt::format(
            "{{\n  \"isa\": \"{}\", \"threads\": {}, \"load_average\": [{:.2f}, {:.2f}], \"read_gbps\": {:.3f}, "
            "\"fp32_gflops\": {:.3f}, \"bf16_gflops\": {:.3f}, \"tile_gflops\": {:.3f}, \"handoff_polling_us\": {:.3f}, "
            "\"handoff_woken_us\": {:.3f},\n  \"results\": [\n",
            kernel_set_name(kernels.isa), pool.size(), load_start, load_end, m.read_gbps, m.fp32_gflops, m.bf16_gflops,
            m.tile_gflops, handoff.polling_us, handoff.woken_us);
        for (size_t i = 0; i < results.size(); ++i) {
            const Result& r = results[i];
            j += fmt::format(
                "    {{\"kernel\": \"{}\", \"weight\": \"{}\", \"rows\": {}, \"cols\": {}, \"n\": {}, \"us_per_call\": "
                "{:.3f}, "
                "\"gbps\": {:.3f}, \"gflops\": {:.3f}, \"read_gbps\": {:.3f}, \"peak_gflops\": {:.3f}, \"frac_bw\": "
                "{:.4f}, "
                "\"frac_peak\": {:.4f}, \"peak\": \"{}\"{}}}{}\n",
                r.kernel, json_escape(r.weight), r.rows, r.cols, r.n, r.seconds * 1e6, r.gbps(), r.gflops(),
                r.read_gbps, r.peak, r.frac_bw, r.frac_peak, r.peak_name, o.thread_profile ? thread_json(r) : "",
                i + 1 < results.size() ? "," : "");
        }
        j += "  ],\n  \"other\": [\n";
        for (size_t i = 0; i < others.size(); ++i)
            j += fmt::format(
                "    {{\"kernel\": \"{}\", \"shape\": \"{}\", \"us_per_call\": {:.3f}, \"gflops\": {:.3f}}}{}\n",
                others[i].kernel, others[i].shape, others[i].seconds * 1e6, others[i].flops / others[i].seconds / 1e9,
                i + 1 < others.size() ? "," : "");
        j += "  ]\n}\n";
        if (o.json == "-") {
            fmt::print("{}", j);
        } else {
            std::FILE* f = std::fopen(o.json.c_str(), "w");
            if (!f) {
                fmt::print(stderr, "bench-ops: cannot write {}\n", o.json);
                return 1;
            }
            std::fputs(j.c_str(), f);
            std::fclose(f);
        }
    }
    return 0;
}

double thread_cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}


// Per-core ceilings: one thread, 256 weight rows (L2-resident), activation rows n; GB/s of weight bytes and
// GFLOP/s against the single-thread peak, all in thread CPU time.
int run_in_cache(const Options& o) {
    Isa isa = best_isa();
    if (!o.isa.empty() && !parse_isa(o.isa, &isa)) {
        fmt::print(stderr, "bench-ops: --isa must be scalar, avx2 or avx512 (got {})\n", o.isa);
        return 2;
    }
    if (!backend::cpu::isa_supported(isa)) {
        fmt::print(stderr, "bench-ops: this CPU cannot run the {} kernels\n", isa_name(isa));
        return 2;
    }
    static const char* kNames[] = {"gemm_fp8", "gemm_fp4", "gemm_bf16", "gemm_f32_bf16w", "gemm_f32"};
    auto selected = [&](int kind) {
        return o.only.empty() || std::string_view(kNames[kind]).find(o.only) != std::string_view::npos;
    };
    int kinds = 0;
    for (int kind = 0; kind < 5; ++kind) kinds += selected(kind);
    if (kinds == 0) {
        fmt::print(stderr, "bench-ops: --only '{}' matches no in-cache kernel; there are: {}, {}, {}, {}, {}\n", o.only,
                   kNames[0], kNames[1], kNames[2], kNames[3], kNames[4]);
        return 2;
    }
    const Kernels& k = backend::kernels_for(isa);
    ThreadPool one(1);
    const Isa peak_isa = isa == Isa::kAvx512 ? Isa::kAvx512 : Isa::kAvx2;
    // the probes on one thread, in CPU time
    auto peak = [&](bool dot) {
        return backend::cpu::peak_probe_flops_per_thread(peak_isa, dot) /
               cpu_seconds_per_call([&] { backend::cpu::measure_peak_gflops(peak_isa, dot, one); }) / 1e9;
    };
    const double fp32 = peak(false), dot = peak(true);
    // the bf16 kernels against the AMX tile peak where the table runs on tiles (as in the streamed table)
    const bool tiles = isa == Isa::kAvx512 && backend::cpu::tile_peak_available();
    const double tile = tiles ? backend::cpu::tile_probe_flops_per_thread() /
                                    cpu_seconds_per_call([&] { backend::cpu::measure_tile_peak_gflops(one); }) / 1e9
                              : 0.0;
    if (tiles)
        fmt::print(
            "in-cache, 1 thread, kernels {}: peak fp32 FMA {:.0f} GFLOP/s, bf16 dot {:.0f} GFLOP/s, AMX tiles {:.0f} "
            "GFLOP/s (thread CPU time)\n",
            kernel_set_name(k.isa), fp32, dot, tile);
    else if (peak_isa == Isa::kAvx512)
        fmt::print(
            "in-cache, 1 thread, kernels {}: peak fp32 FMA {:.0f} GFLOP/s, bf16 dot {:.0f} GFLOP/s (thread CPU time)\n",
            kernel_set_name(k.isa), fp32, dot);
    else
        fmt::print("in-cache, 1 thread, kernels {}: peak fp32 FMA {:.0f} GFLOP/s (thread CPU time)\n",
                   kernel_set_name(k.isa), fp32);
    const int64_t rows = 256, max_n = *std::max_element(o.rows.begin(), o.rows.end());
    fmt::print("{:<15} {:>10} {:>3} {:>10} {:>9} {:>6}\n", "kernel", "shape", "n", "GB/s/core", "GFLOP/s", "%peak");
    for (int kind = 0; kind < 5; ++kind) {
        if (!selected(kind)) continue;
        const int64_t cols = kind == 1 ? 4096 : 2048;
        std::vector<uint8_t> codes(rows * cols), scales(rows * cols / 32);
        if (kind == 0) fill_fp8_codes(codes.data(), codes.size(), 5);
        else fill_codes(codes.data(), codes.size(), 5, 0xff);
        fill_scales(scales.data(), scales.size(), 5);
        std::vector<bf16> wb(rows * cols), xb(max_n * cols);
        std::vector<float> wf(rows * cols), xf(max_n * cols), yf(max_n * rows);
        for (size_t e = 0; e < wb.size(); ++e)
            wf[e] = bf16_to_float(wb[e] = float_to_bf16(((e * 7919) % 1000) / 1000.0f - 0.5f));
        for (size_t e = 0; e < xb.size(); ++e)
            xf[e] = bf16_to_float(xb[e] = float_to_bf16(((e * 104729) % 1000) / 1000.0f - 0.5f));
        std::vector<uint8_t> ac(max_n * cols), as(max_n * cols / 32);
        k.act_quant(xb.data(), max_n, cols, ac.data(), as.data(), one);
        std::vector<bf16> yb(max_n * rows);
        backend::PackedWeight pw;
        backend::Fp8Matrix w8{codes.data(), scales.data(), rows, cols};
        backend::Fp4Matrix w4{codes.data(), scales.data(), rows, cols};
        if (kind == 0) k.prepare_fp8(w8, &pw, one), w8.prepared = &pw;
        if (kind == 1) k.prepare_fp4(w4, &pw, one), w4.prepared = &pw;
        backend::Bf16Matrix wh{wb.data(), rows, cols};
        if ((kind == 2 || kind == 3) && k.prepare_bf16) k.prepare_bf16(wh, &pw, one);
        if ((kind == 2 || kind == 3) && pw.layout != backend::PackedLayout::kNone) wh.prepared = &pw;
        const double wbytes = kind == 0   ? rows * cols
                              : kind == 1 ? rows * cols / 2 + rows * cols / 32
                              : kind == 4 ? rows * cols * 4
                                          : rows * cols * 2;
        for (int64_t n : o.rows) {
            const backend::Fp8Acts a{ac.data(), as.data(), n, cols};
            const double s = cpu_seconds_per_call([&] {
                switch (kind) {
                    case 0: k.gemm_fp8(a, w8, yb.data(), rows, one); break;
                    case 1: k.gemm_fp4(a, w4, yb.data(), rows, one); break;
                    case 2: k.gemm_bf16(xb.data(), n, wh, yb.data(), rows, one); break;
                    case 3: k.gemm_f32_bf16w(xf.data(), n, wh, yf.data(), rows, one); break;
                    default: k.gemm_f32(xf.data(), n, {wf.data(), rows, cols}, yf.data(), rows, one); break;
                }
            });
            const double gflops = 2.0 * n * rows * cols / s / 1e9;
            const double peak = kind <= 2 && tiles ? tile : (kind <= 2 && isa == Isa::kAvx512) ? dot : fp32;
            fmt::print("{:<15} {:>10} {:>3} {:>10.1f} {:>9.1f} {:>5.0f}%\n", kNames[kind],
                       fmt::format("{}x{}", rows, cols), n, wbytes / s / 1e9, gflops, 100.0 * gflops / peak);
        }
    }
    fmt::print(
        "GB/s/core: weight bytes per second of one core's CPU time (the most one core can stream through "
        "the kernel); %peak: against the one-thread peak of the kernel's math on this machine: the AMX tiles "
        "(tdpbf16ps) for fp8 / fp4 / bf16 where the table has them, else the bf16 dot product (AVX-512) or fp32 FMA; "
        "fp32 FMA for fp32 math. Each call also prepares its activation rows, which 256 weight rows amortize 9-128x "
        "less than the released shapes (2304-32768 rows): compare kernels whose preparation differs streamed too\n");
    return 0;
}

// The options each mode reads. One given to a mode that does not read it is refused, not silently ignored.
std::vector<std::string> options_read(const Options& o) {
    if (o.rowwise) return {"--rowwise"};  // fixed ops and shapes, every kernel table, one thread
    if (o.in_cache) return {"--in-cache", "--isa", "--rows", "--only"};  // one thread
    if (o.per_call > 0) return {"--per-call", "--threads", "--isa", "--rows", "--quick", "--only", "--no-hugepages"};
    return {"--threads", "--isa", "--iters", "--rows", "--quick", "--only", "--thread-profile", "--no-hugepages",
            "--json"};
}

const char* mode_name(const Options& o) {
    return o.rowwise ? "--rowwise" : o.in_cache ? "--in-cache" : o.per_call > 0 ? "--per-call" : "the streamed table";
}

// The options given to `sub` that `reads` lacks (--help aside), comma-separated ("" if none).
std::string unread_options(const CLI::App& sub, const std::vector<std::string>& reads) {
    std::vector<const CLI::Option*> unread;
    for (const CLI::Option* opt : sub.get_options())
        if (!opt->get_lnames().empty()) {
            const std::string name = "--" + opt->get_lnames().front();
            if (name != "--help" && name != "--help-all" && std::find(reads.begin(), reads.end(), name) == reads.end())
                unread.push_back(opt);
        }
    return given_option_names(unread);
}

}  // namespace

double cpu_seconds_per_call(const std::function<void()>& f) {
    f();
    double best = 1e30;
    for (int round = 0; round < 5; ++round) {
        const double t0 = thread_cpu_seconds();
        int calls = 0;
        do f(), ++calls;
        while (thread_cpu_seconds() - t0 < 0.06);
        best = std::min(best, (thread_cpu_seconds() - t0) / calls);
    }
    return best;
}

Command make_bench_ops_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto opts = std::make_shared<Options>();
        auto* sub = app.add_subcommand("bench-ops",
                                       "Measure kernel throughput against the machine's measured bandwidth and peak");
        sub->add_option("--threads", opts->threads, "Threads (default: all hardware threads)");
        sub->add_option("--isa", opts->isa, "Kernel set: scalar, avx2 or avx512 (default: best for this CPU)");
        sub->add_option("--iters", opts->iters, "Timed samples per case; the median is reported")
            ->check(CLI::PositiveNumber);
        sub->add_option("--rows", opts->rows, "Activation rows n to measure (default 1 4 16 64)")->delimiter(',');
        sub->add_flag("--quick", opts->quick, "0.5 GiB of weight copies and at most 2 samples (smoke test)");
        sub->add_option("--only", opts->only,
                        "Only the weights whose kernel or name contains this text (with --in-cache: the kernels)");
        sub->add_flag("--in-cache", opts->in_cache,
                      "Instead: per-core compute ceilings, one thread on L2-resident weights, timed in thread CPU "
                      "time (robust on a shared machine); reads --isa, --rows and --only");
        sub->add_flag("--rowwise", opts->rowwise,
                      "Instead: the row-wise ops (RMSNorm, SwiGLU, RoPE, Sinkhorn, mHC, top-k, Engram gather) of "
                      "every kernel table on one thread, side by side");
        sub->add_flag("--thread-profile", opts->thread_profile,
                      "Also show where the threads spend each case's calls: time inside the pool's calls, in shared "
                      "activation preparation, the mean and the busiest thread's share (many-core scaling)");
        sub->add_option("--per-call", opts->per_call,
                        "Instead of each case's medians of 0.3 s samples: this many calls timed one by one, their "
                        "minimum, 25th percentile and median (an A/B of a kernel change on a noisy machine)")
            ->check(CLI::PositiveNumber);
        sub->add_flag("!--no-hugepages", opts->hugepages, "Do not ask for transparent huge pages on weight buffers");
        sub->add_option("--json", opts->json, "Also write the results as JSON to this file ('-' for stdout)");
        sub->callback([opts, exit_code, sub] {
            const std::string unread = unread_options(*sub, options_read(*opts));
            if (!unread.empty()) {
                fmt::print(stderr, "bench-ops: {} does not read {}\n", mode_name(*opts), unread);
                *exit_code = 2;
                return;
            }
            *exit_code = opts->rowwise ? run_rowwise_bench() : opts->in_cache ? run_in_cache(*opts) : run_bench(*opts);
        });
    }};
}

}  // namespace deepinfer::cli

// Synthetic weight generation (see weight_init.h).
#include "tiny/weight_init.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/numeric.h"

namespace deepinfer::tiny {
namespace {

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
    return h;
}

// splitmix64: integer-only, so the weights are identical on every machine and compiler.
class Rng {
   public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // Approximately standard normal: Irwin-Hall sum of four 32-bit uniforms, computed exactly in integers.
    float normal() {
        uint64_t a = next(), b = next();
        uint64_t sum = (a & 0xffffffffu) + (a >> 32) + (b & 0xffffffffu) + (b >> 32);  // < 2^34
        double u = static_cast<double>(sum) / 4294967296.0;  // in [0, 4), mean 2, variance 1/3
        return static_cast<float>((u - 2.0) * 1.7320508075688772);
    }
    uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }

   private:
    uint64_t state_;
};

struct Stats {
    float mean = 0.0f;  // for norms: the mean, with a 10% spread
    float std = 1.0f;
    bool is_norm = false;
};

// Appendix B: norm means, and projection std as a multiple of fan_in^-0.5.
Stats stats_for(const model::TensorSpec& spec) {
    const std::string& r = spec.role;
    auto norm = [](float mean) { return Stats{mean, 0.1f * mean, true}; };
    if (r == "attn_norm") return norm(0.025f);
    if (r == "ffn_norm") return norm(0.2f);
    if (r == "attn.q_norm") return norm(0.97f);
    if (r == "attn.kv_norm") return norm(0.4f);
    if (r == "attn.compressor.norm") return norm(0.6f);
    if (r == "attn.indexer.k_norm") return norm(0.5f);
    if (r == "norm" || r == "dspark.main_norm" || r == "dspark.norm") return norm(1.0f);
    if (r == "engram.q_weight" || r == "engram.k_weight") return norm(1.0f);
    if (r == "embed") return {0.0f, 0.12f};
    if (r == "dspark.markov_head.embed") return {0.0f, 0.1f};
    if (r == "engram.embed") return {0.0f, 0.1f};
    if (r == "hc.base" || r == "hc.scale" || r == "attn.attn_sink") return {0.0f, 0.5f};
    if (r == "ffn.gate.bias" || r == "ffn.gate.bias_vl") return {0.0f, 0.1f};
    const double fan_in = static_cast<double>(spec.shape.back() * (spec.kind == model::TensorKind::kFp4Weight ? 2 : 1));
    double gain = 1.0;
    if (r == "attn.wq_a") gain = 1.6;
    else if (r == "attn.wq_b") gain = 0.95;
    else if (r == "attn.wkv") gain = 1.8;
    else if (r == "attn.wo_a") gain = 1.6;
    else if (r == "attn.wo_b") gain = 1.9;
    else if (r == "ffn.gate") gain = 2.9;
    else if (r == "ffn.experts.w1" || r == "ffn.experts.w3" || r == "ffn.shared_experts.w1" ||
             r == "ffn.shared_experts.w3")
        gain = 1.5;
    else if (r == "ffn.experts.w2" || r == "ffn.shared_experts.w2") gain = 1.05;
    return {0.0f, static_cast<float>(gain / std::sqrt(fan_in))};
}

int64_t numel(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

// e8m0 exponent byte of the smallest power of two s with amax / s <= max_code.
uint8_t pow2_scale(float amax, float max_code) {
    if (amax <= 0.0f) return 127;
    int e = static_cast<int>(std::ceil(std::log2(static_cast<double>(amax) / max_code)));
    if (std::ldexp(1.0, e) * max_code < amax) ++e;
    return static_cast<uint8_t>(std::clamp(e + 127, 1, 254));
}

}  // namespace

void generate_tensor(const model::ModelConfig& config, const model::TensorSpec& spec, uint64_t seed,
                     std::vector<uint8_t>* out, std::vector<uint8_t>* scale_out) {
    Rng rng(seed ^ fnv1a(spec.name));
    const Stats st = stats_for(spec);
    const int64_t n = numel(spec.shape);
    switch (spec.kind) {
        case model::TensorKind::kPlain: {
            out->resize(static_cast<size_t>(n) * dtype_size(spec.dtype));
            for (int64_t i = 0; i < n; ++i) {
                float v = st.mean + st.std * rng.normal();
                if (spec.dtype == DType::kBF16) {
                    bf16 b = float_to_bf16(v);
                    std::memcpy(out->data() + i * 2, &b, 2);
                } else {
                    DI_CHECK(spec.dtype == DType::kF32);
                    std::memcpy(out->data() + i * 4, &v, 4);
                }
            }
            break;
        }
        case model::TensorKind::kFp8Weight:
        case model::TensorKind::kEngramTable: {
            // fp32 values quantized per block: 32x32 blocks for Linears, 1x32 row groups for Engram tables.
            const int64_t rows = spec.shape[0], cols = spec.shape[1];
            const bool engram = spec.kind == model::TensorKind::kEngramTable;
            const int64_t block_rows = engram ? 1 : 32;
            const int64_t grid_rows = (rows + block_rows - 1) / block_rows, grid_cols = (cols + 31) / 32;
            std::vector<float> values(static_cast<size_t>(n));
            for (auto& v : values) v = st.std * rng.normal();
            out->resize(static_cast<size_t>(n));
            scale_out->resize(static_cast<size_t>(grid_rows * grid_cols));
            for (int64_t br = 0; br < grid_rows; ++br)
                for (int64_t bc = 0; bc < grid_cols; ++bc) {
                    float amax = 0.0f;
                    for (int64_t r = br * block_rows; r < std::min(rows, (br + 1) * block_rows); ++r)
                        for (int64_t k = bc * 32; k < std::min(cols, (bc + 1) * 32); ++k)
                            amax = std::fmax(amax, std::fabs(values[r * cols + k]));
                    uint8_t s = pow2_scale(amax, kE4M3Max);
                    (*scale_out)[br * grid_cols + bc] = s;
                    float inv = 1.0f / e8m0_to_float(s);
                    for (int64_t r = br * block_rows; r < std::min(rows, (br + 1) * block_rows); ++r)
                        for (int64_t k = bc * 32; k < std::min(cols, (bc + 1) * 32); ++k)
                            (*out)[r * cols + k] = float_to_e4m3(values[r * cols + k] * inv);
                }
            break;
        }
        case model::TensorKind::kFp4Weight: {
            // Uniform random e2m1 codes (RMS ~3.2) with a per-32 power-of-two scale near std / 3.2, one
            // step of jitter either way (Appendix B).
            const int64_t rows = spec.shape[0], packed_cols = spec.shape[1], cols = packed_cols * 2;
            out->resize(static_cast<size_t>(n));
            scale_out->resize(static_cast<size_t>(rows * cols / 32));
            for (int64_t i = 0; i < n; ++i) {
                uint64_t bits = rng.next();
                (*out)[i] = static_cast<uint8_t>(bits & 0xff);
            }
            const int base = static_cast<int>(std::lround(std::log2(st.std / 3.2)));
            for (auto& s : *scale_out) {
                int jitter = static_cast<int>(rng.below(3)) - 1;
                s = static_cast<uint8_t>(std::clamp(base + jitter + 127, 1, 254));
            }
            break;
        }
        case model::TensorKind::kFp8Scale:
        case model::TensorKind::kFp4Scale:
        case model::TensorKind::kEngramScale:
            DI_CHECK_MSG(false, "scale tensor {} is generated with its weight", spec.name);
    }
    (void)config;
}

}  // namespace deepinfer::tiny

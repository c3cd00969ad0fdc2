// The ggml side of `deepinfer bench-ops` (tools/ggml_compare/README.md), as a llama.cpp user runs ggml:
// weights in the buffer type llama.cpp's loader gives them (auto), graphs through ggml-backend. Built against a
// fetched ggml by side_by_side.sh, never part of deepinfer's build.
//   ggml_bench mm   type rows cols threads iters n1,n2,... auto|repack|plain [4k|huge]
//   ggml_bench mmid type rows cols experts used threads iters n1,n2,... auto|repack|plain [4k|huge]
// auto: the first of the CPU backend's extra buffer types whose device accepts the op with the weight in it (AMX
// for q8_0 on CPUs with AMX-INT8, CPU_REPACK for MXFP4: mxfp4_8x8 on AVX2 machines), else the plain CPU buffer,
// as llama.cpp's weight_buft_supported picks them; repack / plain force CPU_REPACK / the plain buffer.
// mm: one mul_mat per weight copy (copies >= 2 GiB); mmid: mul_mat_id over one [experts, rows, cols] weight,
// token t of call c routed to experts (97 c + 7 t + 61 j) mod experts, j < used (deepinfer's moe case).
// 4k (default): the weight buffer in the pages ggml's allocation gets where transparent huge pages are madvise-only
// (Debian's default): 4 KB. huge: the buffer madvise(MADV_HUGEPAGE)d before its first touch, as ggml's buffers (the
// repacked and AMX ones are anonymous memory) get them where THP is "always" (deepinfer's own weights ask for them).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

static std::vector<ggml_backend_buffer_type_t> extra_bufts(ggml_backend_dev_t dev) {
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    auto fn = (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    std::vector<ggml_backend_buffer_type_t> out;
    for (ggml_backend_buffer_type_t* p = fn ? fn(dev) : nullptr; p && *p; ++p) out.push_back(*p);
    return out;
}

// The buffer type for weight w (K x M, E experts) as llama.cpp's loader picks it: the first extra buffer type for
// which the CPU device supports the op (mul_mat, or mul_mat_id for experts) with w in a buffer of that type.
static ggml_backend_buffer_type_t auto_buft(ggml_type type, int64_t K, int64_t M, int64_t E, int64_t used, bool id) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_init_params p = {ggml_tensor_overhead() * 8, nullptr, true};
    ggml_context* c = ggml_init(p);
    ggml_tensor* w = id ? ggml_new_tensor_3d(c, type, K, M, E) : ggml_new_tensor_2d(c, type, K, M);
    ggml_tensor* x = id ? ggml_new_tensor_3d(c, GGML_TYPE_F32, K, 1, 1) : ggml_new_tensor_2d(c, GGML_TYPE_F32, K, 1);
    ggml_tensor* op =
        id ? ggml_mul_mat_id(c, w, x, ggml_new_tensor_2d(c, GGML_TYPE_I32, used, 1)) : ggml_mul_mat(c, w, x);
    ggml_backend_buffer_type_t chosen = ggml_backend_cpu_buffer_type();
    for (ggml_backend_buffer_type_t b : extra_bufts(dev)) {
        ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(b, 0);
        w->buffer = buf;
        const bool ok = ggml_backend_dev_supports_op(dev, op);
        w->buffer = nullptr;
        ggml_backend_buffer_free(buf);
        if (ok) {
            chosen = b;
            break;
        }
    }
    ggml_free(c);
    return chosen;
}

static ggml_backend_buffer_type_t named_buft(const char* name) {
    for (ggml_backend_buffer_type_t b : extra_bufts(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)))
        if (std::string(ggml_backend_buft_name(b)) == name) return b;
    return nullptr;
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    const std::string mode = argv[1];
    const bool id = mode == "mmid";
    const int fixed_args = id ? 11 : 9;
    if (argc != fixed_args && argc != fixed_args + 1) {
        std::fprintf(stderr, "usage: see the header of ggml_bench.cpp\n");
        return 2;
    }
    int a = 2;
    const std::string tname = argv[a++];
    const int64_t M = std::atoll(argv[a++]), K = std::atoll(argv[a++]);
    const int64_t E = id ? std::atoll(argv[a++]) : 1, used = id ? std::atoll(argv[a++]) : 1;
    const int threads = std::atoi(argv[a++]), iters = std::atoi(argv[a++]);
    std::vector<int64_t> ns;
    for (char* s = std::strtok(argv[a++], ","); s; s = std::strtok(nullptr, ",")) ns.push_back(std::atoll(s));
    const std::string placement = argv[a++];
    const std::string pages = a < argc ? argv[a++] : "4k";
    if (pages != "4k" && pages != "huge") {
        std::fprintf(stderr, "pages '%s': must be 4k or huge\n", pages.c_str());
        return 1;
    }
    const ggml_type type = tname == "mxfp4" ? GGML_TYPE_MXFP4 : tname == "q8_0" ? GGML_TYPE_Q8_0 : tname == "bf16" ? GGML_TYPE_BF16 : GGML_TYPE_F32;

    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, threads);
    ggml_backend_buffer_type_t buft = placement == "auto"     ? auto_buft(type, K, M, E, used, id)
                                      : placement == "repack" ? named_buft("CPU_REPACK")
                                      : placement == "plain"  ? ggml_backend_cpu_buffer_type()
                                                              : nullptr;
    if (!buft) {
        std::fprintf(stderr, "placement '%s': must be auto, repack (needs a CPU_REPACK buffer type) or plain\n",
                     placement.c_str());
        return 1;
    }
    const size_t row = ggml_row_size(type, K), wbytes = row * M;
    const size_t copies = id ? 1 : std::max<size_t>(2, (size_t)std::ceil(2.0 * (1u << 30) / wbytes));
    const int calls = id ? 8 : (int)copies;
    const int64_t nmax = *std::max_element(ns.begin(), ns.end());

    // weights
    ggml_init_params wp = {ggml_tensor_overhead() * (copies + 4), nullptr, true};
    ggml_context* cw = ggml_init(wp);
    std::vector<ggml_tensor*> w(copies);
    for (size_t c = 0; c < copies; ++c) w[c] = id ? ggml_new_tensor_3d(cw, type, K, M, E) : ggml_new_tensor_2d(cw, type, K, M);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(cw, buft);
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    if (pages == "huge") {  // the whole 2 MB pages inside the buffer, before the weights first touch them
        const uintptr_t base = (uintptr_t)ggml_backend_buffer_get_base(wbuf), huge = 2u << 20;
        const uintptr_t from = (base + huge - 1) & ~(huge - 1);
        const uintptr_t to = (base + ggml_backend_buffer_get_size(wbuf)) & ~(huge - 1);
        if (to > from && madvise((void*)from, to - from, MADV_HUGEPAGE) != 0) {
            std::perror("ggml_bench: madvise(MADV_HUGEPAGE)");
            return 1;
        }
    }
    {
        std::vector<float> f((size_t)M * K);
        std::mt19937 rng(1);
        std::normal_distribution<float> d(0.0f, 0.02f);
        for (auto& v : f) v = d(rng);
        std::vector<uint8_t> q(wbytes);
        if (type == GGML_TYPE_BF16) {
            auto* p = (ggml_bf16_t*)q.data();
            for (size_t i = 0; i < f.size(); ++i) p[i] = ggml_fp32_to_bf16(f[i]);
        } else {
            ggml_quantize_chunk(type, f.data(), q.data(), 0, M, K, nullptr);
        }
        std::vector<uint8_t> all(wbytes * E);
        for (int64_t e = 0; e < E; ++e) std::memcpy(all.data() + e * wbytes, q.data(), wbytes);
        for (size_t c = 0; c < copies; ++c) ggml_backend_tensor_set(w[c], all.data(), 0, all.size());
    }
    // activations (and routing)
    ggml_init_params ap = {ggml_tensor_overhead() * (calls + 4), nullptr, true};
    ggml_context* ca = ggml_init(ap);
    ggml_tensor* x = id ? ggml_new_tensor_3d(ca, GGML_TYPE_F32, K, 1, nmax) : ggml_new_tensor_2d(ca, GGML_TYPE_F32, K, nmax);
    std::vector<ggml_tensor*> ids;
    if (id)
        for (int c = 0; c < calls; ++c) ids.push_back(ggml_new_tensor_2d(ca, GGML_TYPE_I32, used, nmax));
    ggml_backend_buffer_t abuf = ggml_backend_alloc_ctx_tensors(ca, be);
    {
        std::vector<float> xv((size_t)K * nmax);
        for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.001 * i);
        ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * 4);
        for (int c = 0; c < (int)ids.size(); ++c) {
            std::vector<int32_t> iv((size_t)used * nmax);
            for (int64_t t = 0; t < nmax; ++t)
                for (int64_t j = 0; j < used; ++j) iv[t * used + j] = (int32_t)((97 * c + 7 * t + 61 * j) % E);
            ggml_backend_tensor_set(ids[c], iv.data(), 0, iv.size() * 4);
        }
    }
    std::printf("ggml %s %s %lldx%lld%s: %.2f MB per %s, %zu copies, %s buffer, %s pages, %d threads\n", mode.c_str(),
                tname.c_str(), (long long)M, (long long)K,
                id ? (" x " + std::to_string(E) + " experts, " + std::to_string(used) + " used").c_str() : "",
                wbytes / 1e6, id ? "expert" : "copy", copies, ggml_backend_buft_name(buft), pages.c_str(), threads);
    for (int64_t n : ns) {
        ggml_init_params gp = {ggml_tensor_overhead() * (4 * calls + 16) + ggml_graph_overhead_custom(4096, false), nullptr, true};
        ggml_context* cg = ggml_init(gp);
        ggml_cgraph* gf = ggml_new_graph_custom(cg, 4096, false);
        if (id) {
            ggml_tensor* bv = ggml_view_3d(cg, x, K, 1, n, x->nb[1], x->nb[2], 0);
            for (int c = 0; c < calls; ++c) {
                ggml_tensor* iv = ggml_view_2d(cg, ids[c], used, n, ids[c]->nb[1], 0);
                ggml_build_forward_expand(gf, ggml_mul_mat_id(cg, w[0], bv, iv));
            }
        } else {
            ggml_tensor* xv = ggml_view_2d(cg, x, K, n, x->nb[1], 0);
            for (size_t c = 0; c < copies; ++c) ggml_build_forward_expand(gf, ggml_mul_mat(cg, w[c], xv));
        }
        ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_get_default_buffer_type(be));
        ggml_gallocr_alloc_graph(ga, gf);
        ggml_backend_graph_compute(be, gf);  // warm-up
        std::vector<double> per_op;
        for (int it = 0; it < iters; ++it) {
            const double t0 = now();
            ggml_backend_graph_compute(be, gf);
            per_op.push_back((now() - t0) / calls);
        }
        std::sort(per_op.begin(), per_op.end());
        const double t = per_op[per_op.size() / 2];
        // weight bytes a call reads: the distinct routed experts (mmid) or the copy
        double bytes = (double)wbytes;
        if (id) {
            std::vector<bool> hit(E);
            for (int64_t tk = 0; tk < n; ++tk)
                for (int64_t j = 0; j < used; ++j) hit[(7 * tk + 61 * j) % E] = true;
            bytes *= (double)std::count(hit.begin(), hit.end(), true);
        }
        std::printf("  n=%-3lld %10.1f us/op %8.1f GB/s %8.1f GFLOP/s\n", (long long)n, t * 1e6, bytes / t / 1e9,
                    2.0 * n * used * M * K / t / 1e9);
        ggml_gallocr_free(ga);
        ggml_free(cg);
    }
    ggml_backend_buffer_free(abuf);
    ggml_backend_buffer_free(wbuf);
    ggml_free(ca);
    ggml_free(cw);
    ggml_backend_free(be);
    return 0;
}

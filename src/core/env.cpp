// The one place that reads environment variables.
#include "core/env.h"

#include <cstdlib>

namespace deepinfer::env {
namespace {
std::string get(const char* name) {
    const char* value = std::getenv(name);
    return value ? std::string(value) : std::string();
}
}  // namespace

std::string cache_dir() {
    if (auto dir = get("DEEPINFER_CACHE_DIR"); !dir.empty()) return dir;
    if (auto xdg = get("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/deepinfer";
    if (auto home = get("HOME"); !home.empty()) return home + "/.cache/deepinfer";
    return "/tmp/deepinfer-cache";
}

std::string log_level() { return get("DEEPINFER_LOG_LEVEL"); }
std::string forced_isa() { return get("DEEPINFER_ISA"); }

std::string forced_zmm_rate() { return get("DEEPINFER_ZMM_RATE"); }
std::string forced_ymm_rate() { return get("DEEPINFER_YMM_RATE"); }
std::string forced_amx() { return get("DEEPINFER_AMX"); }
std::string forced_avx_vnni() { return get("DEEPINFER_AVX_VNNI"); }

int default_threads() {
    std::string value = get("DEEPINFER_THREADS");
    if (value.empty()) return 0;
    return std::atoi(value.c_str());
}

std::string tokenizer_dir() { return get("DEEPINFER_TOKENIZER_DIR"); }

int mpi_launcher_world_size() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
        std::string value = get(name);
        if (!value.empty()) return std::atoi(value.c_str());
    }
    return 0;
}

}  // namespace deepinfer::env

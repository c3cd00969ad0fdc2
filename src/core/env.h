// The one place that reads environment variables. Everything else receives configuration in structs.
#pragma once

#include <string>

namespace deepinfer::env {

// DEEPINFER_CACHE_DIR, else $XDG_CACHE_HOME/deepinfer, else $HOME/.cache/deepinfer.
std::string cache_dir();
// DEEPINFER_LOG_LEVEL (debug|info|warn|error|off); empty when unset.
std::string log_level();
// DEEPINFER_ISA (scalar|avx2|avx512): force a kernel set (tests, benchmarks); empty when unset.
std::string forced_isa();
// DEEPINFER_ZMM_RATE (half|full): take 512-bit vector ops as run at half rate (two 256-bit halves, as on Zen 4)
// or at full rate, whatever the CPU is (tests, benchmarks); empty when unset.
std::string forced_zmm_rate();
// DEEPINFER_YMM_RATE (half|full): take 256-bit vector ops as run at half rate (two 128-bit halves, as on Zen 1) or
// not, whatever the CPU; tests force each (core/cpu_features.h ymm_half_rate).
std::string forced_ymm_rate();
// DEEPINFER_AMX (on|off): off keeps the AVX-512 table's fp8 GEMM off AMX tiles on a CPU that has them (tests,
// benchmarks); empty when unset.
std::string forced_amx();
// DEEPINFER_AVX_VNNI (on|off|evex): off keeps the AVX2 table's integer MXFP4 kernels off the VNNI dot products on a
// CPU that has them, evex takes their EVEX encoding where the CPU has both (tests, benchmarks;
// core/cpu_features.h avx2_vnni_encoding); empty when unset.
std::string forced_avx_vnni();
// DEEPINFER_THREADS: default thread count when --threads is not given; 0 when unset.
int default_threads();
// DEEPINFER_TOKENIZER_DIR: directory with a tokenizer.json to use for real-vocabulary tiny checkpoints.
std::string tokenizer_dir();

// World size announced by an MPI launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE); 0 when not launched
// by one.
int mpi_launcher_world_size();

}  // namespace deepinfer::env

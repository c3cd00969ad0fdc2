// Per-linear timing (off by default): the wall time, weight bytes and flops of every ops::linear_* call, summed by
// kind and shape, so a benchmark can show which projections fall short of the memory bandwidth or of the
// arithmetic peak (`deepinfer bench-decode --op-profile`). Costs two clock reads and a map update per call when on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::ops {

// What one call does, as the linear describes it.
struct OpCall {
    std::string name;        // kind and weight shape, e.g. "fp8 1280x5120 n1", "fp4 grouped 12x 2304x5120 n1"
    double bytes = 0.0;      // weight bytes the call reads (codes and scales)
    double flops = 0.0;      // 2 x weight elements x activation rows: the products and sums of the GEMMs
    bool fp32_math = false;  // the kernels multiply in fp32 (fp32 activations or weights), not on bf16 / int8 units
};

struct OpStat {
    std::string name;
    int64_t calls = 0;
    double seconds = 0.0;  // wall time of the calls, activation quantization included
    double bytes = 0.0;    // summed over the calls, as OpCall's
    double flops = 0.0;
    bool fp32_math = false;
};

void set_op_profiling(bool on);
bool op_profiling();
void reset_op_profile();
// The totals since the last reset, the most time first.
std::vector<OpStat> op_profile();

// Times one call when profiling is on; `describe` runs only then (it fills the OpCall: name, bytes, flops).
class OpTimer {
   public:
    template <class Describe>
    explicit OpTimer(Describe&& describe) {
        if (!op_profiling()) return;
        on_ = true;
        describe(call_);
        start_ = now();
    }
    ~OpTimer() {
        if (on_) record(call_, now() - start_);
    }
    OpTimer(const OpTimer&) = delete;
    OpTimer& operator=(const OpTimer&) = delete;

   private:
    static double now();
    static void record(const OpCall& call, double seconds);
    bool on_ = false;
    OpCall call_;
    double start_ = 0.0;
};

}  // namespace deepinfer::ops

// Per-linear timing (off by default): the wall time and weight bytes of every ops::linear_* call, summed by
// kind and shape, so a benchmark can show which projections fall short of the memory bandwidth
// (`deepinfer bench-decode --op-profile`). Costs two clock reads and a map update per call when on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::ops {

struct OpStat {
    std::string name;  // kind and weight shape, e.g. "fp8 1280x5120 n1", "fp4 grouped 12x 2304x5120 n1"
    int64_t calls = 0;
    double seconds = 0.0;  // wall time of the calls, activation quantization included
    double bytes = 0.0;    // weight bytes the calls read (codes and scales)
};

void set_op_profiling(bool on);
bool op_profiling();
void reset_op_profile();
// The totals since the last reset, the most time first.
std::vector<OpStat> op_profile();

// Times one call when profiling is on; `describe` runs only then (it names the call and counts its bytes).
class OpTimer {
   public:
    template <class Describe>
    explicit OpTimer(Describe&& describe) {
        if (!op_profiling()) return;
        on_ = true;
        describe(name_, bytes_);
        start_ = now();
    }
    ~OpTimer() {
        if (on_) record(name_, now() - start_, bytes_);
    }
    OpTimer(const OpTimer&) = delete;
    OpTimer& operator=(const OpTimer&) = delete;

   private:
    static double now();
    static void record(const std::string& name, double seconds, double bytes);
    bool on_ = false;
    std::string name_;
    double bytes_ = 0.0, start_ = 0.0;
};

}  // namespace deepinfer::ops

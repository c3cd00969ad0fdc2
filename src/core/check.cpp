// Failure path of the CHECK macros.
#include "core/check.h"

namespace deepinfer::detail {

void check_failed(const char* file, int line, const char* condition, const std::string& message) {
    std::fprintf(stderr, "deepinfer: internal check failed at %s:%d: %s%s%s\n", file, line, condition,
                 message.empty() ? "" : " -- ", message.c_str());
    std::fflush(stderr);
    std::abort();
}

}  // namespace deepinfer::detail

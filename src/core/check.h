// CHECK macros for broken internal invariants (programming errors): print where and why, then abort.
// Bad input never reaches these; it is reported through Status (core/status.h).
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace deepinfer::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition, const std::string& message);
}  // namespace deepinfer::detail

#define DI_CHECK(cond)                                                                  \
    do {                                                                                \
        if (!(cond)) [[unlikely]]                                                       \
            ::deepinfer::detail::check_failed(__FILE__, __LINE__, #cond, std::string()); \
    } while (0)

#define DI_CHECK_MSG(cond, ...)                                                                   \
    do {                                                                                          \
        if (!(cond)) [[unlikely]]                                                                 \
            ::deepinfer::detail::check_failed(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
    } while (0)

#define DI_CHECK_EQ(a, b) DI_CHECK_MSG((a) == (b), "{} vs {}", (a), (b))
#define DI_CHECK_LT(a, b) DI_CHECK_MSG((a) < (b), "{} vs {}", (a), (b))
#define DI_CHECK_LE(a, b) DI_CHECK_MSG((a) <= (b), "{} vs {}", (a), (b))

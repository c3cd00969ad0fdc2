// Recoverable errors: Status carries a message naming what was wrong (file, tensor, field, parameter);
// Expected<T> is a value or a Status. No exceptions cross the engine loop, a thread or a rank.
#pragma once

#include <fmt/format.h>

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace deepinfer {

enum class StatusCode { kOk, kInvalidArgument, kNotFound, kIoError, kCorrupt, kUnsupported, kResourceExhausted,
                        kInternal, kCancelled };

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
   public:
    Status() = default;
    Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

    static Status ok() { return {}; }
    bool is_ok() const { return code_ == StatusCode::kOk; }
    explicit operator bool() const { return is_ok(); }
    StatusCode code() const { return code_; }
    const std::string& message() const { return message_; }
    // Prefix the message with context, e.g. the file being read: "model.safetensors: <message>".
    Status with_context(const std::string& context) const {
        if (is_ok()) return *this;
        return {code_, context + ": " + message_};
    }
    std::string to_string() const;

   private:
    StatusCode code_ = StatusCode::kOk;
    std::string message_;
};

template <typename... Args>
Status error(StatusCode code, fmt::format_string<Args...> format, Args&&... args) {
    return Status(code, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status invalid_argument(fmt::format_string<Args...> format, Args&&... args) {
    return Status(StatusCode::kInvalidArgument, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status corrupt(fmt::format_string<Args...> format, Args&&... args) {
    return Status(StatusCode::kCorrupt, fmt::format(format, std::forward<Args>(args)...));
}

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Expected {
   public:
    Expected(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
    Expected(Status status) : state_(std::move(status)) { assert(!std::get<Status>(state_).is_ok()); }  // NOLINT

    bool has_value() const { return state_.index() == 0; }
    explicit operator bool() const { return has_value(); }
    T& value() & { return std::get<T>(state_); }
    const T& value() const& { return std::get<T>(state_); }
    T&& value() && { return std::get<T>(std::move(state_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    const Status& status() const {
        static const Status kOk;
        return has_value() ? kOk : std::get<Status>(state_);
    }

   private:
    std::variant<T, Status> state_;
};

}  // namespace deepinfer

// Propagate a failed Status / Expected out of the calling function.
#define DI_RETURN_IF_ERROR(expr)                           \
    do {                                                   \
        ::deepinfer::Status di_status_ = (expr);           \
        if (!di_status_.is_ok()) return di_status_;        \
    } while (0)

#define DI_CONCAT_INNER(a, b) a##b
#define DI_CONCAT(a, b) DI_CONCAT_INNER(a, b)
#define DI_ASSIGN_OR_RETURN(lhs, expr) DI_ASSIGN_OR_RETURN_IMPL(DI_CONCAT(di_expected_, __LINE__), lhs, expr)
#define DI_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
    auto tmp = (expr);                           \
    if (!tmp.has_value()) return tmp.status();   \
    lhs = std::move(tmp).value()

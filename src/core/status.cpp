// Status names and formatting.
#include "core/status.h"

namespace deepinfer {

const char* status_code_name(StatusCode code) {
    switch (code) {
        case StatusCode::kOk: return "ok";
        case StatusCode::kInvalidArgument: return "invalid argument";
        case StatusCode::kNotFound: return "not found";
        case StatusCode::kIoError: return "I/O error";
        case StatusCode::kCorrupt: return "corrupt input";
        case StatusCode::kUnsupported: return "unsupported";
        case StatusCode::kResourceExhausted: return "resource exhausted";
        case StatusCode::kInternal: return "internal error";
        case StatusCode::kCancelled: return "cancelled";
    }
    return "unknown";
}

std::string Status::to_string() const {
    if (is_ok()) return "ok";
    return fmt::format("{}: {}", status_code_name(code_), message_);
}

}  // namespace deepinfer

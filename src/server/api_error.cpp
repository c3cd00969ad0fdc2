// ApiError construction and JSON form.
#include "server/api_error.h"

#include <cctype>

namespace deepinfer::server {

nlohmann::json error_json(const ApiError& e) {
    nlohmann::json err;
    err["message"] = e.message;
    err["type"] = e.type;
    err["param"] = e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param);
    err["code"] = e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code);
    return nlohmann::json{{"error", err}};
}

ApiError bad_request(std::string message, std::string param, std::string code) {
    ApiError e;
    e.status = 400;
    e.message = std::move(message);
    e.param = std::move(param);
    e.code = std::move(code);
    return e;
}

ApiError not_found(std::string message, std::string code) {
    ApiError e;
    e.status = 404;
    e.type = "not_found_error";
    e.message = std::move(message);
    e.code = std::move(code);
    return e;
}

std::string leading_param(const std::string& message) {
    size_t i = 0;
    while (i < message.size() && (std::islower(static_cast<unsigned char>(message[i])) || message[i] == '_' ||
                                  message[i] == '.' || std::isdigit(static_cast<unsigned char>(message[i]))))
        ++i;
    if (i == 0 || i == message.size()) return "";
    // "stop[2] must ..." names stop; "prompt: ..." names prompt; "top_p must ..." names top_p.
    if (message[i] == '[' || message[i] == ':' || message[i] == ' ') return message.substr(0, i);
    return "";
}

ApiError from_status(const Status& s) {
    ApiError e;
    e.message = s.message();
    switch (s.code()) {
        case StatusCode::kInvalidArgument:
        case StatusCode::kNotFound:
        case StatusCode::kUnsupported:
            e.status = 400;
            e.param = leading_param(s.message());
            break;
        case StatusCode::kResourceExhausted:
            e.status = 429;
            e.type = "rate_limit_error";
            e.code = "queue_full";
            break;
        case StatusCode::kCancelled:
            e.status = 503;
            e.type = "service_unavailable_error";
            break;
        case StatusCode::kOk:
        case StatusCode::kIoError:
        case StatusCode::kCorrupt:
        case StatusCode::kInternal:
            e.status = 500;
            e.type = "internal_error";
            break;
    }
    return e;
}

}  // namespace deepinfer::server

// OpenAI-style API errors: {"error": {"message", "type", "param", "code"}} with the HTTP status they travel
// with, and the mapping from engine / parser Status values (whose messages start with the parameter name).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer::server {

struct ApiError {
    int status = 400;
    std::string type = "invalid_request_error";
    std::string message;
    std::string param;  // the request field at fault; empty -> null
    std::string code;   // machine-readable reason; empty -> null
};

nlohmann::json error_json(const ApiError& e);

ApiError bad_request(std::string message, std::string param = "", std::string code = "");
ApiError not_found(std::string message, std::string code = "");

// A recoverable Status as the client sees it: kInvalidArgument / kNotFound (of request data) -> 400,
// kResourceExhausted -> 429, kUnsupported -> 400, anything else -> 500. The parameter is the leading field
// name of the message ("top_p must be ...", "prompt: 9000 tokens ...", "stop[2] must ...").
ApiError from_status(const Status& s);

// The field name a message starts with, or "" when it starts with something else.
std::string leading_param(const std::string& message);

}  // namespace deepinfer::server

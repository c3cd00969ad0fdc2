// Field readers for request JSON (see json_fields.h).
#include "server/json_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace deepinfer::server {

int json_nesting_depth(std::string_view text, int limit) {
    int depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;  // the escaped character, '"' included
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
            if (deepest > limit) return limit + 1;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return deepest;
}

std::string describe_json(const Json& v) {
    switch (v.type()) {
        case Json::value_t::null: return "null";
        case Json::value_t::boolean: return v.get<bool>() ? "boolean true" : "boolean false";
        case Json::value_t::string: {
            std::string s = v.get<std::string>();
            if (s.size() > 40) s = s.substr(0, 37) + "...";
            return "string " + Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
        }
        case Json::value_t::number_integer:
        case Json::value_t::number_unsigned:
        case Json::value_t::number_float: return "number " + v.dump();
        case Json::value_t::array: return "array";
        case Json::value_t::object: return "object";
        case Json::value_t::binary:
        case Json::value_t::discarded: return "invalid value";
    }
    return "invalid value";
}

bool has_field(const Json& obj, std::string_view key) {
    auto it = obj.find(key);
    return it != obj.end() && !it->is_null();
}

namespace {

const Json* field(const Json& obj, std::string_view key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

std::string name(std::string_view prefix, std::string_view key) { return std::string(prefix) + std::string(key); }

// An integral JSON number as int64 (floats only when integral and in range).
bool as_int64(const Json& v, int64_t* out) {
    if (v.is_number_integer() && !v.is_number_unsigned()) {
        *out = v.get<int64_t>();
        return true;
    }
    if (v.is_number_unsigned()) {
        uint64_t u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
        *out = static_cast<int64_t>(u);
        return true;
    }
    if (v.is_number_float()) {
        double d = v.get<double>();
        if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e18) return false;
        *out = static_cast<int64_t>(d);
        return true;
    }
    return false;
}

}  // namespace

Status read_bool(const Json& obj, std::string_view key, bool* out, std::string_view prefix) {
    const Json* v = field(obj, key);
    if (!v) return Status::ok();
    if (!v->is_boolean()) return invalid_argument("{} must be a boolean, got {}", name(prefix, key), describe_json(*v));
    *out = v->get<bool>();
    return Status::ok();
}

Status read_int(const Json& obj, std::string_view key, int64_t min, int64_t max, int64_t* out,
                std::string_view prefix) {
    const Json* v = field(obj, key);
    if (!v) return Status::ok();
    int64_t x = 0;
    if (!v->is_number() || !as_int64(*v, &x))
        return invalid_argument("{} must be an integer, got {}", name(prefix, key), describe_json(*v));
    if (x < min || x > max)
        return invalid_argument("{} must be an integer in [{}, {}], got {}", name(prefix, key), min, max, x);
    *out = x;
    return Status::ok();
}

Status read_int(const Json& obj, std::string_view key, int* out, std::string_view prefix) {
    int64_t x = *out;
    DI_RETURN_IF_ERROR(read_int(obj, key, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), &x, prefix));
    *out = static_cast<int>(x);
    return Status::ok();
}

Status read_seed(const Json& obj, std::string_view key, uint64_t* out) {
    const Json* v = field(obj, key);
    if (!v) return Status::ok();
    if (v->is_number_unsigned()) {
        *out = v->get<uint64_t>();
        return Status::ok();
    }
    int64_t x = 0;
    if (!v->is_number() || !as_int64(*v, &x))
        return invalid_argument("{} must be an integer, got {}", key, describe_json(*v));
    *out = static_cast<uint64_t>(x);
    return Status::ok();
}

Status read_float(const Json& obj, std::string_view key, float* out, std::string_view prefix) {
    const Json* v = field(obj, key);
    if (!v) return Status::ok();
    if (!v->is_number()) return invalid_argument("{} must be a number, got {}", name(prefix, key), describe_json(*v));
    const double d = v->get<double>();
    if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max())
        return invalid_argument("{} must be a finite number, got {}", name(prefix, key), v->dump());
    *out = static_cast<float>(d);
    return Status::ok();
}

Status read_string(const Json& obj, std::string_view key, std::string* out, std::string_view prefix) {
    const Json* v = field(obj, key);
    if (!v) return Status::ok();
    if (!v->is_string()) return invalid_argument("{} must be a string, got {}", name(prefix, key), describe_json(*v));
    *out = v->get<std::string>();
    return Status::ok();
}

Status read_string_or_list(const Json& obj, std::string_view key, std::vector<std::string>* out) {
    const Json* v = field(obj, key);
    if (!v) return Status::ok();
    out->clear();
    if (v->is_string()) {
        out->push_back(v->get<std::string>());
        return Status::ok();
    }
    if (!v->is_array())
        return invalid_argument("{} must be a string or a list of strings, got {}", key, describe_json(*v));
    for (size_t i = 0; i < v->size(); ++i) {
        const Json& item = (*v)[i];
        if (!item.is_string()) return invalid_argument("{}[{}] must be a string, got {}", key, i, describe_json(item));
        out->push_back(item.get<std::string>());
    }
    return Status::ok();
}

Status read_token_ids(const Json& obj, std::string_view key, std::vector<int32_t>* out) {
    const Json* v = field(obj, key);
    if (!v) return Status::ok();
    if (!v->is_array()) return invalid_argument("{} must be a list of token ids, got {}", key, describe_json(*v));
    out->clear();
    for (size_t i = 0; i < v->size(); ++i) {
        int64_t x = 0;
        const Json& item = (*v)[i];
        if (!item.is_number() || !as_int64(item, &x) || x < 0 || x > std::numeric_limits<int32_t>::max())
            return invalid_argument("{}[{}] must be a token id (an integer >= 0), got {}", key, i, describe_json(item));
        out->push_back(static_cast<int32_t>(x));
    }
    return Status::ok();
}

}  // namespace deepinfer::server

// Python-compatible JSON serialization (see python_json.h); follows CPython's json.encoder (py_encode_basestring
// for strings, float.__repr__ for floats).
#include "tokenizer/python_json.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace deepinfer::tokenizer {
namespace {

void dump_string(const std::string& s, std::string& out) {
    out.push_back('"');
    for (char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
                } else {
                    out.push_back(c);
                }
        }
    }
    out.push_back('"');
}

// float.__repr__: the shortest digits that round-trip; fixed notation for decimal exponents -4..15 (with ".0"
// when integral), otherwise d[.ddd]e+XX / e-XX with at least two exponent digits.
void dump_float(double v, std::string& out) {
    if (std::isnan(v)) {
        out += "NaN";
        return;
    }
    if (std::isinf(v)) {
        out += v > 0 ? "Infinity" : "-Infinity";
        return;
    }
    char buffer[64];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), v, std::chars_format::scientific);
    std::string sci(buffer, end);  // e.g. "-1.2345e+17"
    const size_t e_pos = sci.find('e');
    const int exponent = std::stoi(sci.substr(e_pos + 1));
    std::string mantissa = sci.substr(0, e_pos);
    const bool negative = mantissa[0] == '-';
    if (negative) mantissa.erase(0, 1);
    std::string digits;
    for (char c : mantissa) {
        if (c != '.') digits.push_back(c);
    }
    if (negative) out.push_back('-');
    if (exponent >= -4 && exponent < 16) {
        if (exponent < 0) {
            out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
        } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
            out += digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
        } else {
            out += digits.substr(0, static_cast<size_t>(exponent) + 1) + "." + digits.substr(static_cast<size_t>(exponent) + 1);
        }
    } else {
        out += digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
    }
}

void dump(const nlohmann::ordered_json& v, std::string& out) {
    switch (v.type()) {
        case nlohmann::ordered_json::value_t::null: out += "null"; break;
        case nlohmann::ordered_json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
        case nlohmann::ordered_json::value_t::number_integer: out += std::to_string(v.get<int64_t>()); break;
        case nlohmann::ordered_json::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
        case nlohmann::ordered_json::value_t::number_float: dump_float(v.get<double>(), out); break;
        case nlohmann::ordered_json::value_t::string: dump_string(v.get_ref<const std::string&>(), out); break;
        case nlohmann::ordered_json::value_t::array: {
            out.push_back('[');
            bool first = true;
            for (const auto& item : v) {
                if (!first) out += ", ";
                first = false;
                dump(item, out);
            }
            out.push_back(']');
            break;
        }
        case nlohmann::ordered_json::value_t::object: {
            out.push_back('{');
            bool first = true;
            for (const auto& [key, item] : v.items()) {
                if (!first) out += ", ";
                first = false;
                dump_string(key, out);
                out += ": ";
                dump(item, out);
            }
            out.push_back('}');
            break;
        }
        case nlohmann::ordered_json::value_t::binary:
        case nlohmann::ordered_json::value_t::discarded: out += "null"; break;
    }
}

}  // namespace

std::string python_json_dumps(const nlohmann::ordered_json& value) {
    std::string out;
    dump(value, out);
    return out;
}

}  // namespace deepinfer::tokenizer

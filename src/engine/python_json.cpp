// engine/python_json.cpp — the Python-compatible JSON writer: float repr, string escaping and
// the value walk with json.dumps's separators and indentation.
#include "engine/python_json.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace jllm {

namespace {

// Python's float repr: the shortest digit string that round-trips, printed in fixed notation
// when the decimal exponent is in [-4, 16), else as d.ddde+XX (at least two exponent digits).
std::string python_float_repr(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    if (v == 0.0) return std::signbit(v) ? "-0.0" : "0.0";

    char buf[40];
    for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    // buf = [-]d[.ddd]e(+|-)XX
    std::string s(buf);
    bool neg = false;
    if (s[0] == '-') {
        neg = true;
        s.erase(0, 1);
    }
    const size_t epos = s.find('e');
    const int exp10 = std::atoi(s.c_str() + epos + 1);
    std::string digits;
    for (size_t i = 0; i < epos; ++i) {
        if (s[i] != '.') digits += s[i];
    }
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();

    std::string out = neg ? "-" : "";
    const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
        } else if (static_cast<size_t>(decpt) >= digits.size()) {
            out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
        } else {
            out += digits.substr(0, static_cast<size_t>(decpt)) + "." +
                   digits.substr(static_cast<size_t>(decpt));
        }
    } else {
        out += digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char ebuf[16];
        std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
        out += ebuf;
    }
    return out;
}

// Escapes only what json.dumps(ensure_ascii=False) escapes: '"', '\\' and C0 controls.
void python_json_string(const std::string& s, std::string& out) {
    out += '"';
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char esc[8];
                    std::snprintf(esc, sizeof(esc), "\\u%04x", c);
                    out += esc;
                } else {
                    out += ch;
                }
        }
    }
    out += '"';
}

void python_json_value(const OrderedJson& j, int indent, int level, std::string& out) {
    const auto newline = [&](int lvl) {
        out += '\n';
        out.append(static_cast<size_t>(indent) * static_cast<size_t>(lvl), ' ');
    };
    const char* item_sep = indent >= 0 ? "," : ", ";
    switch (j.type()) {
        case OrderedJson::value_t::null: out += "null"; break;
        case OrderedJson::value_t::boolean: out += j.get<bool>() ? "true" : "false"; break;
        case OrderedJson::value_t::number_integer: out += std::to_string(j.get<int64_t>()); break;
        case OrderedJson::value_t::number_unsigned: out += std::to_string(j.get<uint64_t>()); break;
        case OrderedJson::value_t::number_float: out += python_float_repr(j.get<double>()); break;
        case OrderedJson::value_t::string: python_json_string(j.get_ref<const std::string&>(), out); break;
        case OrderedJson::value_t::array: {
            if (j.empty()) {
                out += "[]";
                break;
            }
            out += '[';
            bool first = true;
            for (const auto& el : j) {
                if (!first) out += item_sep;
                first = false;
                if (indent >= 0) newline(level + 1);
                python_json_value(el, indent, level + 1, out);
            }
            if (indent >= 0) newline(level);
            out += ']';
            break;
        }
        case OrderedJson::value_t::object: {
            if (j.empty()) {
                out += "{}";
                break;
            }
            out += '{';
            bool first = true;
            for (auto it = j.begin(); it != j.end(); ++it) {
                if (!first) out += item_sep;
                first = false;
                if (indent >= 0) newline(level + 1);
                python_json_string(it.key(), out);
                out += ": ";
                python_json_value(it.value(), indent, level + 1, out);
            }
            if (indent >= 0) newline(level);
            out += '}';
            break;
        }
        default:
            throw JllmError("chat template: JSON value of an unsupported type (binary)");
    }
}

}  // namespace

OrderedJson parse_ordered_json(std::string_view text, const char* what) {
    try {
        return OrderedJson::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& e) {
        throw JllmError(strfmt("chat template: %s is not valid JSON (%s)", what, e.what()));
    }
}

std::string python_json_dumps_value(const OrderedJson& j, int indent) {
    std::string out;
    python_json_value(j, indent, 0, out);
    return out;
}

std::string python_json_dumps(std::string_view json_text, int indent) {
    return python_json_dumps_value(parse_ordered_json(json_text, "input"), indent);
}

}  // namespace jllm

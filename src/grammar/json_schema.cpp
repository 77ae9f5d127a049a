// grammar/json_schema.cpp — see json_schema.h. One GBNF rule per schema node (named after its
// place: root-name-item...), the JSON primitives once; whitespace between a value's parts. Regular expressions (pattern) go through grammar/regex_gbnf.h.
#include "grammar/json_schema.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "grammar/regex_gbnf.h"

namespace jllm {

namespace {

using Json = nlohmann::ordered_json;

// The JSON primitives every converted schema may use. Whitespace goes between a value's parts,
// never after the whole document, so a complete document ends the generation; each gap is one
// space or one line break with its indentation, so a sampled answer cannot pad a document with
// blank runs until its token limit (as [ \t\n]{0,20} per gap let it).
const char* const PRIMITIVES = R"(ws ::= (" " | "\n" [ \t]{0,20})?
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
string ::= "\"" char* "\""
number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* ws )? "}"
array ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
)";

const std::set<std::string> ANNOTATIONS = {"title",      "description", "default",  "examples", "$schema", "$id",
                                           "$comment",   "deprecated",  "readOnly", "writeOnly", "strict"};
const std::set<std::string> KEYWORDS = {"type",          "properties", "required",  "additionalProperties",
                                        "enum",          "const",      "items",     "prefixItems",
                                        "minItems",      "maxItems",   "minLength", "maxLength",
                                        "pattern",       "format",     "minimum",   "maximum",
                                        "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf",
                                        "allOf",         "$ref",       "$defs",     "definitions"};

// Fixed-length decimal strings a..b (same length): digit patterns, most significant first.
std::string fixed_range(const std::string& a, const std::string& b) {
    if (a.empty()) return "";
    if (a[0] == b[0]) {
        const std::string rest = fixed_range(a.substr(1), b.substr(1));
        return "\"" + std::string(1, a[0]) + "\"" + (rest.empty() ? "" : " " + rest);
    }
    const size_t n = a.size() - 1;
    const bool a_low = a.find_first_not_of('0', 1) == std::string::npos;
    const bool b_high = b.find_first_not_of('9', 1) == std::string::npos;
    auto digits = [](char lo, char hi) {
        return lo == hi ? "\"" + std::string(1, lo) + "\"" : "[" + std::string(1, lo) + "-" + std::string(1, hi) + "]";
    };
    auto any = [&](size_t k) { return k == 0 ? std::string() : " [0-9]" + (k > 1 ? "{" + std::to_string(k) + "}" : std::string()); };
    std::vector<std::string> alts;
    const char lo = a_low ? a[0] : static_cast<char>(a[0] + 1);
    const char hi = b_high ? b[0] : static_cast<char>(b[0] - 1);
    if (!a_low) alts.push_back("\"" + std::string(1, a[0]) + "\" " + fixed_range(a.substr(1), std::string(n, '9')));
    if (lo <= hi) alts.push_back(digits(lo, hi) + any(n));
    if (!b_high) alts.push_back("\"" + std::string(1, b[0]) + "\" " + fixed_range(std::string(n, '0'), b.substr(1)));
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

// Non-negative integers in [lo, hi] (hi empty: unbounded), as JSON writes them.
std::string nonneg_range(int64_t lo, std::optional<int64_t> hi) {
    std::vector<std::string> alts;
    const std::string a = std::to_string(lo);
    const size_t max_len = hi ? std::to_string(*hi).size() : a.size();
    for (size_t len = a.size(); len <= max_len; ++len) {
        const std::string from = len == a.size() ? a : "1" + std::string(len - 1, '0');
        std::string to = std::string(len, '9');
        if (hi && len == max_len) to = std::to_string(*hi);
        if (from.size() == to.size() && from <= to) alts.push_back(fixed_range(from, to));
    }
    if (!hi) alts.push_back("[1-9] [0-9]{" + std::to_string(a.size()) + ",15}");  // longer than lo
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

class Converter {
public:
    // top: the name of the rule whose sentences are the schema's instances (the others derive
    // their names from it).
    Converter(const Json& root, std::string top) : root_(root), top_(std::move(top)) { used_.insert(top_); }

    // The rules, without the primitives.
    std::string run() {
        const std::string expr = visit(root_, top_, "#");
        return top_ + " ::= " + expr + "\n" + out_;
    }

private:
    [[noreturn]] static void fail(const std::string& where, const std::string& what) {
        throw SchemaError("json schema: " + what + " at " + where);
    }

    // A rule `name` (made unique) with `body`; returns its name.
    std::string add(const std::string& base, const std::string& body) {
        std::string name;
        for (char c : base) name += (std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-');
        if (name.empty() || name == top_) name += "-v";
        std::string unique = name;
        for (int k = 2; used_.count(unique); ++k) unique = name + "-" + std::to_string(k);
        used_.insert(unique);
        out_ += unique + " ::= " + body + "\n";
        return unique;
    }

    // Exactly the JSON value `v` (objects and arrays with whitespace allowed between their parts).
    static std::string literal_value(const Json& v) {
        if (v.is_object()) {
            std::string out = "\"{\" ws";
            bool first = true;
            for (const auto& kv : v.items()) {
                out += std::string(first ? "" : " ws \",\" ws") + " " + gbnf_literal(Json(kv.key()).dump()) +
                       " ws \":\" ws " + literal_value(kv.value());
                first = false;
            }
            return out + " ws \"}\"";
        }
        if (v.is_array()) {
            std::string out = "\"[\" ws";
            for (size_t i = 0; i < v.size(); ++i) out += std::string(i ? " ws \",\" ws" : "") + " " + literal_value(v[i]);
            return out + " ws \"]\"";
        }
        return gbnf_literal(v.dump());
    }

    static bool matches_type(const Json& v, const std::string& t) {
        if (t == "string") return v.is_string();
        if (t == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
        if (t == "number") return v.is_number();
        if (t == "boolean") return v.is_boolean();
        if (t == "null") return v.is_null();
        if (t == "object") return v.is_object();
        if (t == "array") return v.is_array();
        return false;
    }

    std::vector<std::string> types_of(const Json& s, const std::string& where) {
        std::vector<std::string> out;
        if (!s.contains("type")) return out;
        const Json& t = s["type"];
        auto one = [&](const Json& x) {
            static const std::set<std::string> known = {"string", "number", "integer", "boolean", "null", "object", "array"};
            if (!x.is_string() || !known.count(x.get<std::string>())) fail(where + "/type", "unknown type " + x.dump());
            out.push_back(x.get<std::string>());
        };
        if (t.is_array()) {
            if (t.empty()) fail(where + "/type", "an empty type list");
            for (const Json& x : t) one(x);
        } else {
            one(t);
        }
        return out;
    }

    const Json& resolve(const std::string& ref, const std::string& where) {
        for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
            const std::string p = prefix;
            if (ref.rfind(p, 0) != 0) continue;
            const std::string key = p.substr(2, p.size() - 3);  // $defs / definitions
            std::string name = ref.substr(p.size());
            for (size_t i; (i = name.find("~1")) != std::string::npos;) name.replace(i, 2, "/");
            for (size_t i; (i = name.find("~0")) != std::string::npos;) name.replace(i, 2, "~");
            if (!root_.contains(key) || !root_[key].contains(name)) fail(where, "$ref " + ref + " names no definition");
            return root_[key][name];
        }
        if (ref == "#") return root_;
        fail(where, "$ref " + ref + " (only #/$defs/... and #/definitions/... are supported)");
    }

    std::string visit(const Json& s, const std::string& name, const std::string& where) {
        if (s.is_boolean()) {
            if (s.get<bool>()) return "value";
            fail(where, "the schema false admits no value");
        }
        if (!s.is_object()) fail(where, "a schema must be an object or a boolean");
        for (const auto& kv : s.items()) {
            if (!KEYWORDS.count(kv.key()) && !ANNOTATIONS.count(kv.key())) fail(where, "unsupported keyword '" + kv.key() + "'");
        }
        if (s.contains("$ref")) {
            if (!s["$ref"].is_string()) fail(where + "/$ref", "$ref must be a string");
            const std::string ref = s["$ref"].get<std::string>();
            auto it = refs_.find(ref);
            if (it != refs_.end()) return it->second;
            // Reserve the name first: a definition may refer to itself.
            std::string base = top_ + "-ref-" + ref.substr(ref.find_last_of('/') + 1);
            std::string rule = base;
            for (int k = 2; used_.count(rule); ++k) rule = base + "-" + std::to_string(k);
            used_.insert(rule);
            refs_.emplace(ref, rule);
            const std::string body = visit(resolve(ref, where + "/$ref"), rule + "-v", ref);
            out_ += rule + " ::= " + body + "\n";
            return rule;
        }
        const std::vector<std::string> types = types_of(s, where);
        if (s.contains("const")) return literal_value(s["const"]);
        if (s.contains("enum")) {
            if (!s["enum"].is_array() || s["enum"].empty()) fail(where + "/enum", "enum must be a non-empty array");
            std::string body;
            for (const Json& v : s["enum"]) {
                const bool typed = types.empty() || std::any_of(types.begin(), types.end(),
                                                                [&](const std::string& t) { return matches_type(v, t); });
                if (typed) body += (body.empty() ? "" : " | ") + literal_value(v);
            }
            if (body.empty()) fail(where + "/enum", "no enum value has the schema's type");
            return add(name, body);
        }
        for (const char* key : {"anyOf", "oneOf"}) {
            if (!s.contains(key)) continue;
            const Json& list = s[key];
            if (!list.is_array() || list.empty()) fail(where + "/" + key, std::string(key) + " must be a non-empty array");
            std::string body;
            for (size_t i = 0; i < list.size(); ++i) {
                body += (i ? " | " : "") + visit(list[i], name + "-" + std::to_string(i), where + "/" + key + "/" + std::to_string(i));
            }
            return add(name, body);
        }
        if (s.contains("allOf")) return visit(merge_all_of(s, where), name, where);
        if (types.size() > 1) {
            std::string body;
            for (const std::string& t : types) {
                Json one = s;
                one["type"] = t;
                body += (body.empty() ? "" : " | ") + visit(one, name + "-" + t, where);
            }
            return add(name, body);
        }
        std::string t = types.empty() ? "" : types[0];
        if (t.empty()) {
            if (s.contains("properties") || s.contains("additionalProperties")) t = "object";
            else if (s.contains("items") || s.contains("prefixItems")) t = "array";
            else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength")) t = "string";
            else return "value";
        }
        if (t == "string") return string_rule(s, name, where);
        if (t == "integer") return integer_rule(s, name, where);
        if (t == "number") return number_rule(s, name, where);
        if (t == "boolean") return "boolean";
        if (t == "null") return "null";
        if (t == "object") return object_rule(s, name, where);
        return array_rule(s, name, where);
    }

    // allOf of object schemas as one object schema with the same instances: properties merged
    // (a property several parts constrain must be constrained by one only, the others naming just
    // its type), required united, and where a part (or the schema itself) closes its properties
    // (additionalProperties false) only the properties every closed part names remain.
    Json merge_all_of(const Json& s, const std::string& where) {
        const Json& list = s["allOf"];
        if (!list.is_array() || list.empty()) fail(where + "/allOf", "allOf must be a non-empty array");
        Json top = s;
        top.erase("allOf");
        bool top_empty = true;
        for (const auto& kv : top.items()) top_empty = top_empty && ANNOTATIONS.count(kv.key());
        if (list.size() == 1 && top_empty) return list[0];
        std::vector<std::pair<const Json*, std::string>> parts = {{&top, where}};
        for (size_t i = 0; i < list.size(); ++i) {
            const std::string at = where + "/allOf/" + std::to_string(i);
            const Json& part = list[i].is_object() && list[i].contains("$ref")
                                   ? resolve(list[i]["$ref"].get<std::string>(), at)
                                   : list[i];
            if (!part.is_object()) fail(at, "allOf takes object schemas");
            parts.emplace_back(&part, at);
        }
        Json props = Json::object();
        Json required = Json::array();
        std::vector<std::set<std::string>> closed;  // the property names of each closed part
        auto type_only = [](const Json& x) {
            if (!x.is_object()) return false;
            for (const auto& kv : x.items()) {
                if (kv.key() != "type" && !ANNOTATIONS.count(kv.key())) return false;
            }
            return true;
        };
        for (const auto& [part, at] : parts) {
            std::set<std::string> names;
            for (const auto& kv : part->items()) {
                const std::string& k = kv.key();
                if (k == "properties") {
                    for (const auto& p : kv.value().items()) {
                        names.insert(p.key());
                        if (!props.contains(p.key()) || type_only(props[p.key()])) {
                            props[p.key()] = p.value();
                        } else if (!type_only(p.value())) {
                            fail(at + "/properties/" + p.key(), "property '" + p.key() + "' constrained by several allOf parts");
                        }
                    }
                } else if (k == "required") {
                    for (const Json& r : kv.value()) required.push_back(r);
                } else if (k == "type") {
                    if (kv.value() != "object") fail(at, "allOf of schemas that are not objects");
                } else if (k == "additionalProperties") {
                    if (kv.value() == false) closed.emplace_back();
                    else if (kv.value() != true) fail(at + "/additionalProperties", "additionalProperties schemas inside allOf");
                } else if (!ANNOTATIONS.count(k)) {
                    fail(at, "'" + k + "' inside allOf (only object properties merge)");
                }
            }
            if (part->contains("additionalProperties") && (*part)["additionalProperties"] == false) closed.back() = names;
        }
        Json merged = {{"type", "object"}};
        Json kept = Json::object();
        for (const auto& p : props.items()) {
            const bool ok = std::all_of(closed.begin(), closed.end(), [&](const std::set<std::string>& c) { return c.count(p.key()) > 0; });
            if (ok) kept[p.key()] = p.value();
        }
        for (const Json& r : required) {
            if (!kept.contains(r.get<std::string>())) {
                fail(where + "/allOf", "required property '" + r.get<std::string>() + "' is excluded by additionalProperties false");
            }
        }
        merged["properties"] = kept;
        merged["required"] = required;
        if (!closed.empty()) merged["additionalProperties"] = false;
        return merged;
    }

    std::string string_rule(const Json& s, const std::string& name, const std::string& where) {
        const bool has_len = s.contains("minLength") || s.contains("maxLength");
        if (s.contains("format")) {
            if (s.contains("pattern") || has_len) fail(where, "format together with pattern or a length");
            const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
            static const char* const DATE = R"(([0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])))";
            static const char* const TIME =
                R"((([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])))";
            std::string body;
            if (f == "date") body = DATE;
            else if (f == "time") body = TIME;
            else if (f == "date-time") body = std::string(DATE) + " \"T\" " + TIME;
            else if (f == "uuid") body = "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}";
            else fail(where + "/format", "unsupported format '" + f + "'");
            return add(name, "\"\\\"\" " + body + " \"\\\"\"");
        }
        if (s.contains("pattern")) {
            if (has_len) fail(where, "pattern together with minLength or maxLength");
            if (!s["pattern"].is_string()) fail(where + "/pattern", "pattern must be a string");
            try {
                return add(name, "\"\\\"\" " + regex_to_gbnf(s["pattern"].get<std::string>()) + " \"\\\"\"");
            } catch (const JllmError& e) {
                fail(where + "/pattern", e.what());
            }
        }
        if (!has_len) return "string";
        const int64_t lo = count_keyword(s, "minLength", 0, where);
        const int64_t hi = count_keyword(s, "maxLength", -1, where);
        if (hi >= 0 && hi < lo) fail(where, "maxLength below minLength");
        const std::string rep = hi < 0 ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
        return add(name, "\"\\\"\" char" + rep + " \"\\\"\"");
    }

    static int64_t count_keyword(const Json& s, const char* key, int64_t fallback, const std::string& where) {
        if (!s.contains(key)) return fallback;
        const Json& v = s[key];
        if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
            fail(where + "/" + key, std::string(key) + " must be a non-negative integer");
        }
        const int64_t n = v.get<int64_t>();
        if (n > 100000) fail(where + "/" + key, std::string(key) + " over 100000");
        return n;
    }

    std::string integer_rule(const Json& s, const std::string& name, const std::string& where) {
        std::optional<int64_t> lo, hi;
        auto bound = [&](const char* key, bool lower, bool exclusive) {
            if (!s.contains(key)) return;
            const Json& v = s[key];
            if (!v.is_number()) fail(where + "/" + key, std::string(key) + " must be a number");
            const double x = v.get<double>();
            if (std::fabs(x) > 9.0e15) fail(where + "/" + key, std::string(key) + " beyond 9e15");
            int64_t b = lower ? static_cast<int64_t>(std::ceil(x)) : static_cast<int64_t>(std::floor(x));
            if (exclusive && static_cast<double>(b) == x) b += lower ? 1 : -1;
            if (lower) lo = lo ? std::max(*lo, b) : b;
            else hi = hi ? std::min(*hi, b) : b;
        };
        bound("minimum", true, false);
        bound("exclusiveMinimum", true, true);
        bound("maximum", false, false);
        bound("exclusiveMaximum", false, true);
        if (!lo && !hi) return "integer";
        if (lo && hi && *lo > *hi) fail(where, "no integer between the bounds");
        std::vector<std::string> alts;
        // Negative part: -(1 .. -lo) clipped by hi.
        if (!lo || *lo < 0) {
            const int64_t from = hi && *hi < 0 ? -*hi : 1;
            alts.push_back("\"-\" " + nonneg_range(from, lo ? std::optional<int64_t>(-*lo) : std::nullopt));
        }
        if (!hi || *hi >= 0) alts.push_back(nonneg_range(lo && *lo > 0 ? *lo : 0, hi));
        std::string body = "(";
        for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
        return add(name, body + ")");
    }

    // A bound of a number: integral values only (fractional bounds would need digit-by-digit
    // comparison of the fraction; refused by name).
    struct NumberBound {
        int64_t v = 0;
        bool inclusive = true;
    };
    static std::optional<NumberBound> number_bound(const Json& s, const std::string& where, bool lower) {
        std::optional<NumberBound> b;
        for (const bool exclusive : {false, true}) {
            const char* key = lower ? (exclusive ? "exclusiveMinimum" : "minimum") : (exclusive ? "exclusiveMaximum" : "maximum");
            if (!s.contains(key)) continue;
            const Json& v = s[key];
            if (!v.is_number()) fail(where + "/" + key, std::string(key) + " must be a number");
            const double x = v.get<double>();
            if (std::fabs(x) > 9.0e15) fail(where + "/" + key, std::string(key) + " beyond 9e15");
            if (std::floor(x) != x) fail(where + "/" + key, std::string("'") + key + "' on a number: integral bounds only");
            const NumberBound nb{static_cast<int64_t>(x), !exclusive};
            // The tighter of minimum and exclusiveMinimum (maximum and exclusiveMaximum).
            const bool tighter = !b || (lower ? (nb.v > b->v || (nb.v == b->v && !nb.inclusive))
                                              : (nb.v < b->v || (nb.v == b->v && !nb.inclusive)));
            if (tighter) b = nb;
        }
        return b;
    }

    // Magnitudes a.f (integer part a, fraction f) from `lo` up to `hi` (`bounded` false: no upper
    // bound), as grammar alternatives; empty when there is none.
    static std::vector<std::string> magnitudes(NumberBound lo, bool bounded, NumberBound hi) {
        static const std::string ANY = " (\".\" [0-9]{1,16})?", ZERO = " (\".\" \"0\"{1,16})?",
                                 NONZERO = " \".\" [0-9]{0,15} [1-9]";
        const auto digits = [](int64_t v) { return "\"" + std::to_string(v) + "\""; };
        std::vector<std::string> alts;
        if (bounded && (hi.v < lo.v || (hi.v == lo.v && !(hi.inclusive && lo.inclusive)))) return alts;
        if (bounded && hi.v == lo.v) return {digits(lo.v) + ZERO};
        // a == lo: any fraction when lo is included, a non-zero one when not.
        alts.push_back(digits(lo.v) + (lo.inclusive ? ANY : NONZERO));
        // lo < a < hi: any fraction.
        if (!bounded) {
            alts.push_back(nonneg_range(lo.v + 1, std::nullopt) + ANY);
        } else if (hi.v - 1 >= lo.v + 1) {
            alts.push_back(nonneg_range(lo.v + 1, hi.v - 1) + ANY);
        }
        // a == hi: the value itself, when included.
        if (bounded && hi.inclusive) alts.push_back(digits(hi.v) + ZERO);
        return alts;
    }

    // Numbers between integral bounds, without an exponent: a negative part (magnitudes from
    // -hi or 0 up to -lo) and a non-negative one (from lo or 0 up to hi).
    std::string number_rule(const Json& s, const std::string& name, const std::string& where) {
        const std::optional<NumberBound> lo = number_bound(s, where, true), hi = number_bound(s, where, false);
        if (!lo && !hi) return "number";
        const NumberBound l = lo.value_or(NumberBound{}), h = hi.value_or(NumberBound{});
        std::vector<std::string> alts;
        if (!lo || l.v < 0) {
            const NumberBound from = hi && h.v <= 0 ? NumberBound{-h.v, h.inclusive} : NumberBound{0, true};
            for (const std::string& m : magnitudes(from, lo.has_value(), NumberBound{-l.v, l.inclusive})) {
                alts.push_back("\"-\" " + m);
            }
        }
        if (!hi || h.v >= 0) {
            const NumberBound from = lo && l.v >= 0 ? l : NumberBound{0, true};
            for (const std::string& m : magnitudes(from, hi.has_value(), h)) alts.push_back(m);
        }
        if (alts.empty()) fail(where, "no number between the bounds");
        std::string body = "(";
        for (size_t i = 0; i < alts.size(); ++i) body += std::string(i ? " | " : "") + "(" + alts[i] + ")";
        return add(name, body + ")");
    }

    std::string object_rule(const Json& s, const std::string& name, const std::string& where) {
        const Json props = s.value("properties", Json::object());
        if (!props.is_object()) fail(where + "/properties", "properties must be an object");
        std::set<std::string> required;
        if (s.contains("required")) {
            if (!s["required"].is_array()) fail(where + "/required", "required must be an array");
            for (const Json& r : s["required"]) {
                if (!r.is_string()) fail(where + "/required", "required lists names");
                if (!props.contains(r.get<std::string>())) {
                    fail(where + "/required", "required property '" + r.get<std::string>() + "' is not in properties");
                }
                required.insert(r.get<std::string>());
            }
        }
        const Json extra = s.contains("additionalProperties") ? s["additionalProperties"] : Json(props.empty());
        if (props.empty()) {
            if (extra == false) return add(name, "\"{\" ws \"}\"");
            const std::string v = extra == true ? "value" : visit(extra, name + "-value", where + "/additionalProperties");
            if (v == "value") return "object";
            return add(name, "\"{\" ws ( string ws \":\" ws " + v + " ( ws \",\" ws string ws \":\" ws " + v +
                                 " )* ws )? \"}\"");
        }
        struct Prop {
            std::string kv;
            bool required;
        };
        std::vector<Prop> ps;
        for (const auto& p : props.items()) {
            const std::string v = visit(p.value(), name + "-" + p.key(), where + "/properties/" + p.key());
            ps.push_back(Prop{add(name + "-" + p.key() + "-kv", gbnf_literal(Json(p.key()).dump()) + " ws \":\" ws " + v),
                              required.count(p.key()) > 0});
        }
        // first(i): properties i.. with none written yet; rest(i): after one was (a comma first).
        const size_t n = ps.size();
        std::vector<std::string> rest(n + 1), first(n + 1);
        for (size_t i = n; i-- > 0;) {
            const std::string tail = rest[i + 1].empty() ? "" : " " + rest[i + 1];
            const std::string r = ps[i].required ? "ws \",\" ws " + ps[i].kv + tail
                                                 : "( ws \",\" ws " + ps[i].kv + " )?" + tail;
            rest[i] = add(name + "-rest", r);
            std::string f = ps[i].kv + tail;
            if (!ps[i].required) f = "( " + f + " )" + (first[i + 1].empty() ? "?" : " | " + first[i + 1]);
            first[i] = add(name + "-first", f);
        }
        return add(name, "\"{\" ws " + first[0] + " ws \"}\"");
    }

    std::string array_rule(const Json& s, const std::string& name, const std::string& where) {
        const int64_t lo = count_keyword(s, "minItems", 0, where);
        const int64_t hi = count_keyword(s, "maxItems", -1, where);
        if (hi >= 0 && hi < lo) fail(where, "maxItems below minItems");
        std::vector<std::string> prefix;
        if (s.contains("prefixItems")) {
            const Json& p = s["prefixItems"];
            if (!p.is_array()) fail(where + "/prefixItems", "prefixItems must be an array");
            for (size_t i = 0; i < p.size(); ++i) {
                prefix.push_back(visit(p[i], name + "-" + std::to_string(i), where + "/prefixItems/" + std::to_string(i)));
            }
            if (hi >= 0 && static_cast<int64_t>(prefix.size()) > hi) fail(where, "maxItems below the prefixItems");
        }
        std::string item;  // empty: no item past the prefix
        if (!s.contains("items")) item = "value";
        else if (s["items"] == false) item = "";
        else item = visit(s["items"], name + "-item", where + "/items");
        const int64_t k = static_cast<int64_t>(prefix.size());
        if (item.empty() && lo > k) fail(where, "minItems above the prefixItems with items false");
        std::string body = "\"[\" ws";
        std::string seq;
        for (size_t i = 0; i < prefix.size(); ++i) seq += (i ? " ws \",\" ws " : " ") + prefix[i];
        if (!item.empty()) {
            const int64_t more_lo = std::max<int64_t>(0, lo - k);
            const int64_t more_hi = hi < 0 ? -1 : hi - k;
            if (more_hi != 0) {
                if (k > 0) {
                    const std::string rep = more_hi < 0 ? "{" + std::to_string(more_lo) + ",}"
                                                        : "{" + std::to_string(more_lo) + "," + std::to_string(more_hi) + "}";
                    seq += " ( ws \",\" ws " + item + " )" + rep;
                } else {
                    const int64_t first_lo = std::max<int64_t>(0, more_lo - 1);
                    const std::string rep = more_hi < 0 ? "{" + std::to_string(first_lo) + ",}"
                                                        : "{" + std::to_string(first_lo) + "," + std::to_string(more_hi - 1) + "}";
                    std::string list = item + " ( ws \",\" ws " + item + " )" + rep;
                    seq += more_lo == 0 ? " ( " + list + " )?" : " " + list;
                }
            }
        }
        body += seq + " ws \"]\"";
        return add(name, body);
    }

    const Json& root_;
    std::string top_;
    std::string out_;
    std::set<std::string> used_ = {"ws", "char", "string", "number", "integer", "boolean", "null", "value", "object", "array"};
    std::map<std::string, std::string> refs_;
};

}  // namespace

std::string gbnf_literal(std::string_view text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7F) {
            out += strfmt("\\x%02X", c);
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

std::string json_object_gbnf() { return std::string("root ::= object\n") + PRIMITIVES; }

std::string json_primitives_gbnf() { return PRIMITIVES; }

std::string json_schema_rules(std::string_view schema_json, const std::string& name) {
    Json schema;
    try {
        schema = Json::parse(schema_json);
    } catch (const nlohmann::json::exception& e) {
        throw SchemaError(std::string("json schema: not valid JSON: ") + e.what());
    }
    return Converter(schema, name).run();
}

std::string json_schema_to_gbnf(std::string_view schema_json) {
    return json_schema_rules(schema_json, "root") + PRIMITIVES;
}

}  // namespace jllm

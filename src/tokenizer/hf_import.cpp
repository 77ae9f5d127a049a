// tokenizer/hf_import.cpp — reads tokenizer.json / tokenizer_config.json with nlohmann-json.
//
// Mapping: model.vocab + added_tokens -> tokens (gaps become "[PAD<id>]", UNUSED); added tokens
// with special=true -> CONTROL (parsed only on request), others -> USER_DEFINED (always parsed);
// merges (either "a b" strings or ["a","b"] pairs) -> "a b"; an NFC normalizer -> "nfc";
// model.ignore_merges; lstrip/rstrip of added tokens -> tokenizer.jllm.{l,r}strip_ids.
#include "tokenizer/hf_import.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/pretokenizer.h"

namespace jllm {

namespace {

using nlohmann::json;

json read_json(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw JllmError("hf_import: cannot open " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    try {
        return json::parse(ss.str());
    } catch (const json::exception& e) {
        throw JllmError("hf_import: " + path + ": bad JSON: " + e.what());
    }
}

// Pre-tokenizer entries in order (a Sequence is flattened).
void flatten(const json& j, const char* list_key, std::vector<json>& out) {
    if (!j.is_object()) return;
    if (j.value("type", "") == "Sequence" && j.contains(list_key)) {
        for (const json& e : j[list_key]) flatten(e, list_key, out);
    } else {
        out.push_back(j);
    }
}

bool has_type(const json& j, const char* list_key, const char* type) {
    std::vector<json> parts;
    flatten(j, list_key, parts);
    for (const json& p : parts) {
        if (p.value("type", "") == type) return true;
    }
    return false;
}

// Family from the pre_tokenizer section; "" when it matches none.
std::string detect_pre(const json& pre_tokenizer) {
    std::vector<json> parts;
    flatten(pre_tokenizer, "pretokenizers", parts);
    if (parts.size() == 2 && parts[0].value("type", "") == "Split" &&
        parts[1].value("type", "") == "ByteLevel" && !parts[1].value("use_regex", true)) {
        const json& pat = parts[0]["pattern"];
        const std::string re = pat.is_object() ? pat.value("Regex", "") : "";
        for (const auto& s : pre_tokenizer_table()) {
            if (*s.hf_regex && re == s.hf_regex) return s.name;
        }
        return "";
    }
    if (parts.size() == 1 && parts[0].value("type", "") == "ByteLevel" &&
        parts[0].value("use_regex", true)) {
        return "gpt-2";
    }
    if (parts.size() == 2 && parts[0].value("type", "") == "Digits" &&
        parts[0].value("individual_digits", false) && parts[1].value("type", "") == "ByteLevel" &&
        parts[1].value("use_regex", true)) {
        return "smollm";  // starcoder and refact split the same way
    }
    return "";
}

// tokenizer_config.json writes special tokens as a string or as {"content": ...}.
std::string token_content(const json& j) {
    if (j.is_string()) return j.get<std::string>();
    if (j.is_object() && j.contains("content") && j["content"].is_string()) {
        return j["content"].get<std::string>();
    }
    return "";
}

// Whether a TemplateProcessing post-processor puts `bos` first in a single sequence.
bool post_processor_adds(const json& post, const std::string& tok, bool first) {
    std::vector<json> parts;
    flatten(post, "processors", parts);
    for (const json& p : parts) {
        if (p.value("type", "") != "TemplateProcessing" || !p.contains("single")) continue;
        const json& single = p["single"];
        if (!single.is_array() || single.empty()) continue;
        const json& e = first ? single.front() : single.back();
        if (e.contains("SpecialToken") && e["SpecialToken"].value("id", "") == tok) return true;
    }
    return false;
}

}  // namespace

TokenizerVocab hf_load_vocab(const std::string& tokenizer_json_path,
                             const std::string& config_path, const HfImportOptions& opt) {
    const json tj = read_json(tokenizer_json_path);
    json cfg = json::object();
    if (!config_path.empty()) cfg = read_json(config_path);
    const std::string& where = tokenizer_json_path;
    try {
        const json& model = tj.at("model");
        if (model.value("type", "") != "BPE") {
            throw JllmError("hf_import: " + where + ": model.type '" + model.value("type", "?") +
                            "' is not supported (expected BPE)");
        }
        const json pre_tok = tj.contains("pre_tokenizer") ? tj["pre_tokenizer"] : json();
        const json decoder = tj.contains("decoder") ? tj["decoder"] : json();
        const bool byte_level = has_type(pre_tok, "pretokenizers", "ByteLevel") ||
                                has_type(decoder, "decoders", "ByteLevel");
        if (!byte_level) {
            throw JllmError("hf_import: " + where +
                            ": only byte-level BPE tokenizers are supported (no ByteLevel "
                            "pre-tokenizer or decoder)");
        }

        TokenizerVocab v;
        v.model = "gpt2";
        const std::string detected = detect_pre(pre_tok);
        if (!opt.pre.empty()) {
            v.pre = opt.pre;
            // Families that split identically (smollm, starcoder, refact) are not a conflict.
            const PreTokenizerSpec* given = find_pre_tokenizer(opt.pre);
            const PreTokenizerSpec* found = detected.empty() ? nullptr : find_pre_tokenizer(detected);
            const bool same = given && found && given->regex == found->regex &&
                              given->split_digits == found->split_digits;
            if (found && !same) {
                JLLM_LOG_WARN("[hf_import] pre-tokenizer given as '%s' but the file looks like '%s'",
                              opt.pre.c_str(), detected.c_str());
            }
        } else if (!detected.empty()) {
            v.pre = detected;
        } else {
            throw JllmError("hf_import: " + where +
                            ": pre-tokenizer not recognised; name the family (--pre)");
        }

        // Token list: the model's vocabulary, then added tokens (which may reuse ids).
        const json& vocab = model.at("vocab");
        int64_t max_id = -1;
        for (auto it = vocab.begin(); it != vocab.end(); ++it) max_id = std::max<int64_t>(max_id, it.value().get<int64_t>());
        const json added = tj.contains("added_tokens") ? tj["added_tokens"] : json::array();
        for (const json& a : added) max_id = std::max<int64_t>(max_id, a.at("id").get<int64_t>());
        if (max_id < 0 || max_id >= INT32_MAX) throw JllmError("hf_import: " + where + ": bad token ids");
        const size_t n = static_cast<size_t>(max_id + 1);
        v.tokens.assign(n, std::string());
        v.token_types.assign(n, static_cast<int32_t>(TokenType::UNUSED));
        std::vector<uint8_t> set(n, 0);
        for (auto it = vocab.begin(); it != vocab.end(); ++it) {
            const int64_t id = it.value().get<int64_t>();
            if (id < 0) throw JllmError("hf_import: " + where + ": negative token id");
            v.tokens[id] = it.key();
            v.token_types[id] = static_cast<int32_t>(TokenType::NORMAL);
            set[id] = 1;
        }
        for (const json& a : added) {
            const int64_t id = a.at("id").get<int64_t>();
            if (id < 0) throw JllmError("hf_import: " + where + ": negative added token id");
            v.tokens[id] = a.at("content").get<std::string>();
            v.token_types[id] = static_cast<int32_t>(a.value("special", false)
                                                         ? TokenType::CONTROL
                                                         : TokenType::USER_DEFINED);
            set[id] = 1;
            if (a.value("lstrip", false)) v.lstrip_ids.push_back(static_cast<int32_t>(id));
            if (a.value("rstrip", false)) v.rstrip_ids.push_back(static_cast<int32_t>(id));
        }
        for (size_t id = 0; id < n; ++id) {
            if (!set[id]) v.tokens[id] = "[PAD" + std::to_string(id) + "]";
        }

        const json& merges = model.at("merges");
        v.merges.reserve(merges.size());
        for (const json& m : merges) {
            if (m.is_string()) {
                v.merges.push_back(m.get<std::string>());
            } else if (m.is_array() && m.size() == 2) {
                v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
            } else {
                throw JllmError("hf_import: " + where + ": a merge is neither \"a b\" nor [a, b]");
            }
        }
        v.ignore_merges = model.value("ignore_merges", false);

        const json norm = tj.contains("normalizer") ? tj["normalizer"] : json();
        if (norm.is_null()) {
            v.normalizer = "none";
        } else if (has_type(norm, "normalizers", "NFC")) {
            v.normalizer = "nfc";
        } else {
            throw JllmError("hf_import: " + where + ": normalizer '" + norm.value("type", "?") +
                            "' is not supported (only NFC)");
        }

        auto find_id = [&](const std::string& text) -> int32_t {
            if (text.empty()) return -1;
            for (const json& a : added) {
                if (a.at("content").get<std::string>() == text) return a.at("id").get<int32_t>();
            }
            auto it = vocab.find(text);
            return it == vocab.end() ? -1 : it.value().get<int32_t>();
        };
        const std::string bos = cfg.contains("bos_token") ? token_content(cfg["bos_token"]) : "";
        const std::string eos = cfg.contains("eos_token") ? token_content(cfg["eos_token"]) : "";
        const std::string pad = cfg.contains("pad_token") ? token_content(cfg["pad_token"]) : "";
        const std::string unk = model.contains("unk_token") ? token_content(model["unk_token"]) : "";
        v.bos_id = find_id(bos);
        v.eos_id = find_id(eos);
        v.pad_id = find_id(pad);
        v.unk_id = find_id(unk);

        const json post = tj.contains("post_processor") ? tj["post_processor"] : json();
        if (opt.add_bos) v.add_bos = *opt.add_bos;
        else if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) v.add_bos = cfg["add_bos_token"].get<bool>();
        else v.add_bos = !bos.empty() && post_processor_adds(post, bos, true);
        if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean()) v.add_eos = cfg["add_eos_token"].get<bool>();
        else v.add_eos = !eos.empty() && post_processor_adds(post, eos, false);

        if (cfg.contains("chat_template")) {
            const json& ct = cfg["chat_template"];
            if (ct.is_string()) {
                v.chat_template = ct.get<std::string>();
            } else if (ct.is_array()) {  // [{"name": ..., "template": ...}]
                for (const json& e : ct) {
                    if (e.value("name", "") == "default") v.chat_template = e.value("template", "");
                }
            }
        }
        return v;
    } catch (const json::exception& e) {
        throw JllmError("hf_import: " + where + ": unexpected structure: " + e.what());
    }
}

TokenizerVocab hf_tokenizer_to_gguf(const std::string& tokenizer_json_path,
                                    const std::string& config_path, GgufWriter& w,
                                    const HfImportOptions& opt) {
    TokenizerVocab v = hf_load_vocab(tokenizer_json_path, config_path, opt);
    write_vocab_metadata(v, w);
    return v;
}

}  // namespace jllm

// engine/constraint.cpp — see constraint.h.
#include "engine/constraint.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"

namespace jllm {

namespace {
constexpr std::string_view THINK_CLOSE = "</think>";
}  // namespace

Grammar compile_output_constraint(const OutputConstraint& c) {
    switch (c.kind) {
        case OutputConstraint::Kind::Grammar: return parse_gbnf(c.text);
        case OutputConstraint::Kind::JsonSchema: return parse_gbnf(json_schema_to_gbnf(c.text));
        case OutputConstraint::Kind::JsonObject: return parse_gbnf(json_object_gbnf());
        case OutputConstraint::Kind::None: break;
    }
    throw JllmError("no output constraint to compile");
}

Status check_output_constraint(const OutputConstraint& c) {
    if (c.kind == OutputConstraint::Kind::None) return Status::success();
    try {
        (void)compile_output_constraint(c);
    } catch (const std::exception& e) {
        return Status::error(e.what());
    }
    for (const auto* list : {&c.triggers, &c.start_triggers}) {
        for (const std::string& t : *list) {
            if (t.empty()) return Status::error("grammar: an empty trigger");
        }
    }
    return Status::success();
}

OutputConstrainer::OutputConstrainer(const OutputConstraint& c, std::shared_ptr<const VocabTrie> trie, bool after_think,
                                     int32_t think_token)
    : matcher_(compile_output_constraint(c), trie),
      words_(trie->words()),
      triggers_(c.triggers),
      start_triggers_(c.start_triggers),
      wait_think_(after_think),
      think_token_(after_think ? -1 : think_token) {
    for (const std::string& t : triggers_) longest_trigger_ = std::max(longest_trigger_, t.size());
    active_ = !wait_think_ && triggers_.empty() && start_triggers_.empty();
}

const uint32_t* OutputConstrainer::mask() {
    const auto t0 = std::chrono::steady_clock::now();
    const uint32_t* m = compute_mask();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    mask_ms_ += ms;
    mask_max_ms_ = std::max(mask_max_ms_, ms);
    return m;
}

const uint32_t* OutputConstrainer::compute_mask() {
    if (!active_) return nullptr;
    const uint32_t* m = matcher_.mask();
    if (!at_output_start_ || think_token_ < 0) return m;
    first_mask_.assign(m, m + words_);
    first_mask_[static_cast<size_t>(think_token_) / 32] |= 1u << (think_token_ % 32);
    return first_mask_.data();
}

// The output opened a reasoning block: the constraint waits for its close.
void OutputConstrainer::open_reasoning() {
    wait_think_ = true;
    active_ = false;
    pending_.clear();
}

void OutputConstrainer::push(int32_t token, std::string_view piece) {
    if (at_output_start_) {
        at_output_start_ = false;
        if (think_token_ >= 0 && token == think_token_) return open_reasoning();
    }
    if (active_) {
        if (!matcher_.accept(token)) throw JllmError("grammar: the sampled token is outside the grammar");
        return;
    }
    advance_inactive(piece);
}

void OutputConstrainer::push_text(std::string_view text) {
    static constexpr std::string_view THINK_OPEN = "<think>";
    if (at_output_start_) {
        at_output_start_ = false;
        if (think_token_ >= 0 && text.substr(0, THINK_OPEN.size()) == THINK_OPEN) {
            open_reasoning();
            text.remove_prefix(THINK_OPEN.size());
        }
    }
    if (text.empty()) return;
    if (active_) {
        if (!matcher_.accept_text(text)) throw JllmError("grammar: the assistant prefix is outside the grammar");
        return;
    }
    advance_inactive(text);
}

void OutputConstrainer::advance_inactive(std::string_view text) {
    pending_.append(text);
    if (wait_think_) {
        const size_t at = pending_.find(THINK_CLOSE);
        if (at == std::string::npos) {
            if (pending_.size() > THINK_CLOSE.size()) pending_.erase(0, pending_.size() - THINK_CLOSE.size());
            return;
        }
        wait_think_ = false;
        // The whitespace that separates the block from the answer is no part of the answer.
        const size_t from = pending_.find_first_not_of(" \t\r\n", at + THINK_CLOSE.size());
        pending_.erase(0, from == std::string::npos ? pending_.size() : from);
        if (triggers_.empty() && start_triggers_.empty()) {
            active_ = true;
            if (!pending_.empty() && !matcher_.accept_text(pending_)) {
                throw JllmError("grammar: the text after the reasoning block does not start the grammar");
            }
            pending_.clear();
            return;
        }
    }
    if (at_start_ && !start_triggers_.empty()) {
        const size_t ws = pending_.find_first_not_of(" \t\r\n");
        if (ws == std::string::npos) return;  // only whitespace yet
        const std::string_view rest = std::string_view(pending_).substr(ws);
        bool could = false;
        for (const std::string& t : start_triggers_) {
            if (rest.substr(0, t.size()) == t) {
                active_ = true;
                if (!matcher_.accept_text(rest)) {
                    throw JllmError("grammar: the output from its trigger on does not start a sentence of the grammar");
                }
                pending_.clear();
                return;
            }
            could = could || std::string_view(t).substr(0, rest.size()) == rest;
        }
        if (could) return;  // the answer may still open with a start trigger
        at_start_ = false;
    }
    size_t first = std::string::npos;
    for (const std::string& t : triggers_) first = std::min(first, pending_.find(t));
    if (first == std::string::npos) {
        // Keep what could still be the start of a trigger.
        if (longest_trigger_ == 0) {
            pending_.clear();  // no trigger can come any more
        } else if (pending_.size() >= longest_trigger_) {
            pending_.erase(0, pending_.size() - (longest_trigger_ - 1));
        }
        return;
    }
    active_ = true;
    if (!matcher_.accept_text(std::string_view(pending_).substr(first))) {
        throw JllmError("grammar: the output from its trigger on does not start a sentence of the grammar");
    }
    pending_.clear();
}

}  // namespace jllm

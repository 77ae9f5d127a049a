// engine/constraint.cpp — see constraint.h.
#include "engine/constraint.h"

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
    for (const std::string& t : c.triggers) {
        if (t.empty()) return Status::error("grammar: an empty trigger");
    }
    return Status::success();
}

OutputConstrainer::OutputConstrainer(const OutputConstraint& c, std::shared_ptr<const VocabTrie> trie, bool after_think)
    : matcher_(compile_output_constraint(c), std::move(trie)), triggers_(c.triggers), wait_think_(after_think) {
    for (const std::string& t : triggers_) longest_trigger_ = std::max(longest_trigger_, t.size());
    active_ = !wait_think_ && triggers_.empty();
}

const uint32_t* OutputConstrainer::mask() { return active_ ? matcher_.mask() : nullptr; }

void OutputConstrainer::push(int32_t token, std::string_view piece) {
    if (active_) {
        if (!matcher_.accept(token)) throw JllmError("grammar: the sampled token is outside the grammar");
        return;
    }
    pending_.append(piece);
    if (wait_think_) {
        const size_t at = pending_.find(THINK_CLOSE);
        if (at == std::string::npos) {
            if (pending_.size() > THINK_CLOSE.size()) pending_.erase(0, pending_.size() - THINK_CLOSE.size());
            return;
        }
        wait_think_ = false;
        pending_.erase(0, at + THINK_CLOSE.size());
        if (triggers_.empty()) {
            active_ = true;
            if (!pending_.empty() && !matcher_.accept_text(pending_)) {
                throw JllmError("grammar: the text after the reasoning block does not start the grammar");
            }
            pending_.clear();
            return;
        }
    }
    size_t first = std::string::npos;
    for (const std::string& t : triggers_) first = std::min(first, pending_.find(t));
    if (first == std::string::npos) {
        // Keep what could still be the start of a trigger.
        if (longest_trigger_ > 0 && pending_.size() >= longest_trigger_) pending_.erase(0, pending_.size() - (longest_trigger_ - 1));
        return;
    }
    active_ = true;
    if (!matcher_.accept_text(std::string_view(pending_).substr(first))) {
        throw JllmError("grammar: the output from its trigger on does not start a sentence of the grammar");
    }
    pending_.clear();
}

}  // namespace jllm

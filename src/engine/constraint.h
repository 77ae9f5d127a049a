// engine/constraint.h — a request's output constraint while it generates (GenerateRequest::
// constraint): the grammar it compiles to, when it applies (after the reasoning block closes when
// the prompt opened one; from a trigger string on for a lazy constraint) and each step's token
// mask. Before it applies a step is unconstrained (mask() is null).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/token_mask.h"
#include "jllm_engine.h"

namespace jllm {

// The constraint's grammar; throws GrammarError / SchemaError when it does not compile.
Grammar compile_output_constraint(const OutputConstraint& c);

class OutputConstrainer {
public:
    // after_think: the output opens inside a reasoning block (<think> in the prompt). think_token
    // (-1: none): the output may open one with this token (the first step allows it beside the
    // grammar's tokens); either way the constraint starts after the block closes.
    OutputConstrainer(const OutputConstraint& c, std::shared_ptr<const VocabTrie> trie, bool after_think,
                      int32_t think_token = -1);

    // The tokens allowed at this step, or null while the constraint does not apply yet.
    const uint32_t* mask();
    // Time spent in mask() so far, and its longest call.
    double mask_ms() const { return mask_ms_; }
    double mask_max_ms() const { return mask_max_ms_; }
    // The output grew by `token` (raw bytes `piece`). Throws JllmError when the grammar refuses it
    // (a token outside the mask) or a trigger's text does not start a sentence of the grammar.
    void push(int32_t token, std::string_view piece);
    // The output grew by `text` that is no token of its own (an assistant prefix).
    void push_text(std::string_view text);
    bool active() const { return active_; }
    // The grammar is complete and nothing may follow: the generation is over.
    bool finished() const { return active_ && matcher_.finished(); }

private:
    GrammarMatcher matcher_;
    size_t words_;  // of a mask
    std::vector<std::string> triggers_;
    std::vector<std::string> start_triggers_;
    bool at_start_ = true;  // the answer so far is whitespace (a start trigger may still come)
    size_t longest_trigger_ = 0;
    bool wait_think_;
    int32_t think_token_;
    bool at_output_start_ = true;    // nothing generated yet (the reasoning block may still open)
    std::vector<uint32_t> first_mask_;  // the grammar's first mask with think_token_ allowed
    double mask_ms_ = 0, mask_max_ms_ = 0;
    const uint32_t* compute_mask();
    bool active_ = false;
    std::string pending_;  // output not yet matched while inactive (a trigger's start may be in it)
    void advance_inactive(std::string_view text);
    void open_reasoning();
};

}  // namespace jllm

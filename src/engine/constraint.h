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
    // after_think: the output opens inside a reasoning block (<think> in the prompt).
    OutputConstrainer(const OutputConstraint& c, std::shared_ptr<const VocabTrie> trie, bool after_think);

    // The tokens allowed at this step, or null while the constraint does not apply yet.
    const uint32_t* mask();
    // The output grew by `token` (raw bytes `piece`). Throws JllmError when the grammar refuses it
    // (a token outside the mask) or a trigger's text does not start a sentence of the grammar.
    void push(int32_t token, std::string_view piece);
    bool active() const { return active_; }
    // The grammar is complete and nothing may follow: the generation is over.
    bool finished() const { return active_ && matcher_.finished(); }

private:
    GrammarMatcher matcher_;
    std::vector<std::string> triggers_;
    size_t longest_trigger_ = 0;
    bool wait_think_;
    bool active_ = false;
    std::string pending_;  // output not yet matched while inactive (a trigger's start may be in it)
};

}  // namespace jllm

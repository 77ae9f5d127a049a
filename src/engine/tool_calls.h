// engine/tool_calls.h — tool calls in the model family's own format: the grammar that makes every
// call parse and fit its function's parameter schema, and the parser that takes calls out of the
// output as it streams, so no call text reaches the content.
//   Hermes (Qwen2.5, Qwen3):  <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>,
//                             several separated by a newline; with tool_choice auto also the bare
//                             {"name": "NAME", "arguments": {...}} as the whole answer, bare or
//                             in a ```json code block (small Qwen2.5 models answer that way)
//   Llama 3.1:                {"name": "NAME", "parameters": {...}} as the whole answer, one call
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat_template.h"
#include "jllm_engine.h"

namespace jllm {

enum class ToolFormat { None, Hermes, Llama31 };

// The format of the model's template (None: it has no tool calls).
ToolFormat tool_format(ChatTemplateKind kind, std::string_view gguf_template);

// The functions of an OpenAI `tools` array: their names and parameter schemas (as JSON text; no
// parameters: no arguments). Throws JllmError naming what is wrong with the array.
struct ToolFunction {
    std::string name;
    std::string parameters;
};
std::vector<ToolFunction> parse_tool_functions(const std::string& tools_json);

// The constraint of `t` in format `f` (t.choice not None): Auto lazily from the call's opening on,
// Required / Named from the first token. Throws JllmError (SchemaError for a parameter schema
// that cannot be enforced, an unknown Named function).
OutputConstraint tool_constraint(ToolFormat f, const ToolRequest& t);

// Content text in, content and tool calls out, as the text streams.
class ToolCallStream {
public:
    struct Part {
        Channel channel = Channel::Content;  // Content or ToolCall
        std::string text;                    // ToolCall: a piece of the arguments
        int tool = -1;                       // ToolCall: the call's index
        bool start = false;                  // the call's first piece (its id and name are known)
    };

    explicit ToolCallStream(ToolFormat f);
    void push(std::string_view text, std::vector<Part>& out);
    void flush(std::vector<Part>& out);  // the output ended
    // Every call the output made in full (a call cut short is left out).
    std::vector<ToolCall> calls() const;
    const ToolCall& call(int i) const { return calls_[static_cast<size_t>(i)]; }

private:
    enum class State { Text, Name, Args, After };
    void emit_args(std::string_view s, std::vector<Part>& out);

    std::string open_, mid_, close_, sep_;  // a tagged call's fixed parts around name and arguments
    std::string bare_open_;                 // a bare call's opening (it is the whole answer)
    bool at_start_ = true;                  // nothing but whitespace yet: a bare call may open
    std::string end_tail_;                  // a bare or fenced call: the answer ends with this
    State state_ = State::Text;
    std::string buf_;
    std::vector<ToolCall> calls_;
    std::vector<bool> complete_;
    std::mt19937_64 rng_;
};

}  // namespace jllm

// engine/text_stream.h — the text side of generation: stop strings matched across token
// boundaries (never emitted), and the split of <think>...</think> into the reasoning channel.
// Both hold back only the shortest tail that could still become a match, so streaming stays live.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jllm_engine.h"

namespace jllm {

class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops);
    // Appends `text`; returns what is safe to emit. When a stop string completes, *stopped is
    // set and only the text before it is returned; later input is ignored.
    std::string push(std::string_view text, bool* stopped);
    std::string flush();  // the held-back tail (end of generation without a stop)
    const std::string& matched() const { return matched_; }  // the stop string that ended it ("" none)

private:
    std::vector<std::string> stops_;
    std::string matched_;
    std::string pending_;
    bool stopped_ = false;
};

class ThinkSplitter {
public:
    // enabled=false: everything is content. start_in_reasoning: the prompt already opened <think>.
    ThinkSplitter(bool enabled, bool start_in_reasoning);
    void push(std::string_view text, std::vector<std::pair<Channel, std::string>>& out);
    void flush(std::vector<std::pair<Channel, std::string>>& out);
    Channel channel() const { return in_reasoning_ ? Channel::Reasoning : Channel::Content; }

private:
    void emit(std::string_view s, std::vector<std::pair<Channel, std::string>>& out);
    bool enabled_;
    bool in_reasoning_;
    bool strip_newlines_ = false;  // drop newlines right after a tag
    std::string pending_;
};

}  // namespace jllm

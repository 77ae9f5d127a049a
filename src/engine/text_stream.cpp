// engine/text_stream.cpp — stop-string matching and think-tag splitting on streamed text.
#include "engine/text_stream.h"

#include <algorithm>

namespace jllm {

namespace {
// Length of the longest suffix of `s` that is a proper prefix of `pat`.
size_t partial_suffix(std::string_view s, std::string_view pat) {
    const size_t max = std::min(s.size(), pat.size() - 1);
    for (size_t len = max; len > 0; --len) {
        if (s.substr(s.size() - len) == pat.substr(0, len)) return len;
    }
    return 0;
}
constexpr std::string_view OPEN_TAG = "<think>";
constexpr std::string_view CLOSE_TAG = "</think>";
}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) {
    for (std::string& s : stops) {
        if (!s.empty()) stops_.push_back(std::move(s));
    }
}

std::string StopMatcher::push(std::string_view text, bool* stopped) {
    *stopped = stopped_;
    if (stopped_) return {};
    pending_.append(text);
    size_t first = std::string::npos;
    for (const std::string& s : stops_) {
        const size_t at = pending_.find(s);
        if (at < first || (at == first && at != std::string::npos && s.size() > matched_.size())) {
            first = at;
            matched_ = s;
        }
    }
    if (first != std::string::npos) {
        stopped_ = true;
        *stopped = true;
        std::string out = pending_.substr(0, first);
        pending_.clear();
        return out;
    }
    size_t hold = 0;
    for (const std::string& s : stops_) hold = std::max(hold, partial_suffix(pending_, s));
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
}

std::string StopMatcher::flush() {
    std::string out;
    if (!stopped_) out.swap(pending_);
    pending_.clear();
    return out;
}

ThinkSplitter::ThinkSplitter(bool enabled, bool start_in_reasoning)
    : enabled_(enabled), in_reasoning_(enabled && start_in_reasoning), strip_newlines_(in_reasoning_) {}

void ThinkSplitter::emit(std::string_view s, std::vector<std::pair<Channel, std::string>>& out) {
    if (strip_newlines_) {
        size_t k = 0;
        while (k < s.size() && s[k] == '\n') k++;
        s.remove_prefix(k);
        if (s.empty()) return;
        strip_newlines_ = false;
    }
    const Channel ch = channel();
    if (!out.empty() && out.back().first == ch) out.back().second.append(s);
    else out.emplace_back(ch, std::string(s));
}

void ThinkSplitter::push(std::string_view text, std::vector<std::pair<Channel, std::string>>& out) {
    if (!enabled_) {
        if (!text.empty()) emit(text, out);
        return;
    }
    pending_.append(text);
    for (;;) {
        const std::string_view tag = in_reasoning_ ? CLOSE_TAG : OPEN_TAG;
        const size_t at = pending_.find(tag);
        if (at == std::string::npos) break;
        emit(std::string_view(pending_).substr(0, at), out);
        pending_.erase(0, at + tag.size());
        in_reasoning_ = !in_reasoning_;
        strip_newlines_ = true;
    }
    const std::string_view tag = in_reasoning_ ? CLOSE_TAG : OPEN_TAG;
    const size_t hold = partial_suffix(pending_, tag);
    emit(std::string_view(pending_).substr(0, pending_.size() - hold), out);
    pending_.erase(0, pending_.size() - hold);
}

void ThinkSplitter::flush(std::vector<std::pair<Channel, std::string>>& out) {
    if (!pending_.empty()) emit(pending_, out);
    pending_.clear();
}

}  // namespace jllm

// tokenizer/streaming_detokenizer.h — turns generated ids into text as they arrive. Output is
// always valid UTF-8: bytes of a character split across tokens are held until it completes;
// ill-formed bytes become U+FFFD (one per maximal subpart, as in utf8_lossy); flush() ends the
// stream, turning a held incomplete sequence into U+FFFD. No exceptions for valid ids.
#pragma once

#include <cstdint>
#include <string>

namespace jllm {

class Tokenizer;

class StreamingDetokenizer {
public:
    explicit StreamingDetokenizer(const Tokenizer& tok);
    // Text that became complete with this token (possibly empty). JllmError on a bad id.
    std::string push(int32_t id);
    // The same, appended to `out`: no allocation once `out` has room (the decode loop's form).
    void push(int32_t id, std::string& out);
    // Whatever is still held, as U+FFFD; then the stream is at its start again.
    std::string flush();
    // Drops held bytes and starts a new stream (the SPM leading space is stripped again).
    void reset();
    size_t pending_bytes() const { return held_.size(); }

private:
    const Tokenizer& tok_;
    std::string held_;       // an incomplete UTF-8 prefix (at most 3 bytes)
    bool at_start_ = true;   // SPM: the first text piece loses its leading space
};

}  // namespace jllm

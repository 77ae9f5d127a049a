// tokenizer/streaming_detokenizer.cpp — incremental UTF-8-safe detokenization.
#include "tokenizer/streaming_detokenizer.h"

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_util.h"

namespace jllm {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok) : tok_(tok) {}

void StreamingDetokenizer::reset() {
    held_.clear();
    at_start_ = true;
}

std::string StreamingDetokenizer::push(int32_t id) {
    std::string out;
    push(id, out);
    return out;
}

void StreamingDetokenizer::push(int32_t id, std::string& out) {
    if (id < 0 || id >= tok_.n_vocab()) {
        throw JllmError(strfmt("detokenizer: token id %d is outside the vocabulary [0, %d)", id,
                               tok_.n_vocab()));
    }
    const std::string& piece = tok_.piece_ref(id);
    std::string_view p = piece;
    if (at_start_ && tok_.is_spm() && tok_.add_space_prefix()) {
        if (tok_.is_control(id)) {  // BOS etc.: the space strip stays pending
            out += piece;
            return;
        }
        if (!p.empty() && p[0] == ' ') p.remove_prefix(1);
    }
    at_start_ = false;
    held_.append(p.data(), p.size());

    // Emit every complete character; keep a valid prefix that only the end cut short.
    size_t i = 0;
    const size_t n = held_.size();
    while (i < n) {
        const uint8_t c = static_cast<uint8_t>(held_[i]);
        if (c < 0x80) {
            out.push_back(static_cast<char>(c));
            ++i;
            continue;
        }
        bool complete = false, truncated = false;
        const size_t len = utf8_scan(held_, i, &complete, &truncated);
        if (complete) {
            out.append(held_, i, len);
        } else if (truncated) {
            break;  // wait for the bytes of the next token
        } else {
            out.append("\xEF\xBF\xBD");  // one per maximal ill-formed subpart
        }
        i += len;
    }
    held_.erase(0, i);
}

std::string StreamingDetokenizer::flush() {
    std::string out = held_.empty() ? std::string() : utf8_lossy(held_);
    reset();
    return out;
}

}  // namespace jllm

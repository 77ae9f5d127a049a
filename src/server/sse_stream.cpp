// server/sse_stream.cpp — the SSE event framing and the order of a streamed answer's chunks.
#include "server/sse_stream.h"

#include <string>
#include <utility>

namespace jllm::server {

SseStream::SseStream(ResponseShape shape, bool logprobs, bool with_top, Write write)
    : shape_(std::move(shape)), logprobs_(logprobs), with_top_(with_top), write_(std::move(write)) {}

bool SseStream::send(const Json& chunk) {
    const std::string s = "data: " + dump_json(chunk) + "\n\n";
    return write_(s.data(), s.size());
}

bool SseStream::open() {
    const std::optional<Json> chunk = shape_.opening_chunk();
    return !chunk || send(*chunk);
}

bool SseStream::piece(const Piece& p) {
    const bool content = p.channel == Channel::Content;
    Json lp = nullptr;  // reasoning pieces carry no logprobs
    if (logprobs_ && content) {
        lp = shape_.empty_logprobs();
        shape_.append_logprob(lp, p, text_offset_, with_top_);
    }
    if (content) text_offset_ += p.text.size();
    const std::optional<Json> chunk = shape_.piece_chunk(p, lp);
    return !chunk || send(*chunk);
}

bool SseStream::finish(FinishReason finish, const GenerateStats* usage) {
    bool alive = send(shape_.final_chunk(finish));
    if (alive && usage) alive = send(shape_.usage_chunk(*usage));
    return alive;
}

bool SseStream::error(const ApiError& e) { return send(error_json(e)); }

bool SseStream::done() {
    static const char done[] = "data: [DONE]\n\n";
    return write_(done, sizeof done - 1);
}

}  // namespace jllm::server

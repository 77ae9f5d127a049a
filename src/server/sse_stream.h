// server/sse_stream.h — one streamed answer as server-sent events, for chat and completions
// alike: `data: <chunk JSON>\n\n` per event and `data: [DONE]\n\n` last. ResponseShape decides
// what each chunk holds; this type decides their order, attaches each content piece's logprobs
// and counts the text offset they report. Knows nothing of HTTP: it writes through a callback.
#pragma once

#include <cstddef>
#include <functional>

#include "jllm_engine.h"
#include "server/api_error.h"
#include "server/openai_response.h"

namespace jllm::server {

class SseStream {
public:
    // Writes bytes to the client; false once the client is gone.
    using Write = std::function<bool(const char* data, size_t size)>;

    // `logprobs`: attach each content piece's logprobs; `with_top`: completions' top_logprobs.
    SseStream(ResponseShape shape, bool logprobs, bool with_top, Write write);

    // Every call returns false when the write failed (the client hung up).
    bool open();                    // the chunk before any piece, where the shape has one
    bool piece(const Piece& p);     // one content, reasoning or tool-call delta
    // The chunk with the finish reason, then the usage chunk when `usage` is given.
    bool finish(FinishReason finish, const GenerateStats* usage);
    bool error(const ApiError& e);  // an error object in place of the finish chunk
    bool done();                    // [DONE]

private:
    bool send(const Json& chunk);

    ResponseShape shape_;
    bool logprobs_;
    bool with_top_;
    Write write_;
    size_t text_offset_ = 0;  // bytes of content sent so far
};

}  // namespace jllm::server

// examples/embed/main.cpp — the engine in process, as a home assistant embeds it: load a model,
// render a chat with its template, stream the answer piece by piece, cancel a second answer from
// another thread, and read the statistics. Only include/jllm.h (installed under include/jllm).
//   embed MODEL.gguf ["question"]
#include <jllm.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s MODEL.gguf [question]\n", argv[0]);
        return 2;
    }
    const std::string question = argc > 2 ? argv[2] : "What is the capital of France?";
    jllm::set_log_level(jllm::LogLevel::Warn);

    jllm::EngineConfig cfg;
    cfg.model_path = argv[1];
    cfg.n_ctx = 1024;
    jllm::Engine engine;
    const jllm::Status st = engine.load(cfg);  // errors come back as a Status, never an exception
    if (!st.ok) {
        std::fprintf(stderr, "load failed: %s\n", st.message.c_str());
        return 1;
    }
    const jllm::ModelInfo info = engine.model_info();
    std::fprintf(stderr, "loaded %s (%s) on %s in %.0f ms\n", info.name.c_str(), info.arch.c_str(),
                 info.backend.c_str(), info.load_ms);

    // 1. A chat turn, rendered by the model's template and streamed.
    std::vector<jllm::ChatMessage> chat;
    chat.push_back(jllm::ChatMessage{"user", question, "", {}, "", ""});
    jllm::GenerateRequest req;
    req.prompt = engine.render_chat(chat, jllm::ChatRenderOptions{});
    req.parse_special = true;  // the template's control tokens
    req.add_bos = false;       // the template places BOS itself
    req.sampling.temperature = 0;
    req.max_tokens = 48;
    req.session_id = "example";
    const jllm::GenerateResult r = engine.generate(req, [](const jllm::Piece& p) {
        if (p.channel == jllm::Channel::Content) {
            std::fwrite(p.text.data(), 1, p.text.size(), stdout);
            std::fflush(stdout);
        }
        return true;  // false would stop the generation
    });
    std::printf("\n");
    if (r.finish == jllm::FinishReason::Error) {
        std::fprintf(stderr, "generation failed: %s\n", r.error.c_str());
        return 1;
    }
    engine.checkpoint();  // keep this conversation's KV for its next turn
    std::fprintf(stderr, "finish %s: %d prompt tokens (%d reused), %d generated, %.1f tok/s, TTFT %.1f ms\n",
                 jllm::finish_reason_name(r.finish), r.stats.prompt_tokens, r.stats.reused_tokens,
                 r.stats.completion_tokens, r.stats.decode_tps, r.stats.ttft_ms);

    // 2. A long answer cancelled from a second thread once a few pieces have arrived.
    chat.push_back(jllm::ChatMessage{"assistant", r.text, "", {}, "", ""});
    chat.push_back(jllm::ChatMessage{"user", "Now write a very long story about that city.", "", {}, "", ""});
    req.prompt = engine.render_chat(chat, jllm::ChatRenderOptions{});
    req.max_tokens = 400;
    std::atomic<int> pieces{0};
    std::thread canceller([&] {
        while (pieces.load() < 8) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        engine.cancel();  // safe from any thread
    });
    const jllm::GenerateResult c = engine.generate(req, [&](const jllm::Piece&) {
        pieces.fetch_add(1);
        return true;
    });
    canceller.join();
    std::fprintf(stderr, "second answer: finish %s after %d tokens; %d of its prompt tokens reused (%s)\n",
                 jllm::finish_reason_name(c.finish), c.stats.completion_tokens, c.stats.reused_tokens,
                 jllm::cache_source_name(c.stats.cache_source));
    const jllm::MemoryReport mem = engine.memory_report();
    std::fprintf(stderr, "memory: model %.1f MB, KV %.1f MB, resident now %.1f MB\n", mem.model / 1048576.0,
                 mem.kv / 1048576.0, mem.rss_now / 1048576.0);
    return c.finish == jllm::FinishReason::Cancelled ? 0 : 1;
}

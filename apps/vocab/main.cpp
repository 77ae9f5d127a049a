// apps/vocab/main.cpp — jllm-vocab: writes a vocab-only GGUF (no tensors) from a Hugging Face
// tokenizer folder (tokenizer.json + tokenizer_config.json), e.g.
//   jllm-vocab --hf shared/testdata/tokenizers/qwen3 --pre qwen2 -o qwen3-vocab.gguf
#include <cstdio>
#include <string>
#include <sys/stat.h>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "jllm_version.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/tokenizer.h"

namespace {

bool exists(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0;
}

// general.architecture when --arch is not given.
std::string default_arch(const std::string& pre) {
    if (pre == "qwen2") return "qwen2";
    if (pre == "llama-bpe") return "llama";
    if (pre == "smollm") return "llama";
    if (pre == "starcoder") return "starcoder2";
    if (pre == "refact") return "refact";
    return "gpt2";
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"jllm-vocab: Hugging Face tokenizer.json to a vocab-only GGUF"};
    std::string hf_dir, pre, out, arch, name;
    bool add_bos = false, no_add_bos = false;
    app.add_option("--hf", hf_dir, "folder with tokenizer.json (and tokenizer_config.json)")->required();
    app.add_option("--pre", pre, "pre-tokenizer family (qwen2, llama-bpe, smollm, gpt-2, starcoder, refact); default: detect");
    app.add_option("-o,--output", out, "output .gguf")->required();
    app.add_option("--arch", arch, "general.architecture (default from the family)");
    app.add_option("--name", name, "general.name (default: the folder name)");
    app.add_flag("--add-bos", add_bos, "set tokenizer.ggml.add_bos_token = true");
    app.add_flag("--no-add-bos", no_add_bos, "set tokenizer.ggml.add_bos_token = false");
    app.set_version_flag("--version", std::string(JLLM_VERSION) + " (" + JLLM_GIT_COMMIT + ")");
    CLI11_PARSE(app, argc, argv);

    try {
        const std::string tj = hf_dir + "/tokenizer.json";
        const std::string cfg = hf_dir + "/tokenizer_config.json";
        jllm::HfImportOptions opt;
        opt.pre = pre;
        if (add_bos && no_add_bos) throw jllm::JllmError("--add-bos and --no-add-bos conflict");
        if (add_bos) opt.add_bos = true;
        if (no_add_bos) opt.add_bos = false;

        jllm::GgufWriter w;
        jllm::TokenizerVocab v = jllm::hf_load_vocab(tj, exists(cfg) ? cfg : "", opt);
        if (name.empty()) {
            std::string d = hf_dir;
            while (d.size() > 1 && d.back() == '/') d.pop_back();
            name = d.substr(d.find_last_of('/') + 1);
        }
        w.set_string("general.architecture", arch.empty() ? default_arch(v.pre) : arch);
        w.set_string("general.name", name);
        jllm::write_vocab_metadata(v, w);
        w.write_file(out);

        // Read it back through the engine's own path as a check.
        auto f = jllm::GgufFile::open(out);
        auto tok = jllm::Tokenizer::from_gguf(*f);
        std::printf("%s: %d tokens, %zu merges, pre=%s, bos=%d eos=%d, add_bos=%s, eog=%zu ids\n",
                    out.c_str(), tok->n_vocab(), v.merges.size(), tok->pre().c_str(),
                    tok->bos_id(), tok->eos_id(), tok->add_bos() ? "true" : "false",
                    tok->eog_ids().size());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "jllm-vocab: %s\n", e.what());
        return 1;
    }
    return 0;
}

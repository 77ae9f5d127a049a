// model/model_info.cpp — formats a GGUF file's contents for `--info`.
#include "model/model_info.h"

#include <cinttypes>
#include <map>

#include "core/error.h"
#include "gguf/gguf.h"
#include "jllm_engine.h"
#include "model/model_config.h"

namespace jllm {

namespace {
std::string human_bytes(uint64_t b) {
    if (b >= (1ull << 30)) return strfmt("%.2f GiB", static_cast<double>(b) / (1ull << 30));
    if (b >= (1ull << 20)) return strfmt("%.2f MiB", static_cast<double>(b) / (1ull << 20));
    if (b >= (1ull << 10)) return strfmt("%.2f KiB", static_cast<double>(b) / (1ull << 10));
    return strfmt("%" PRIu64 " B", b);
}
}  // namespace

std::string describe_gguf(const GgufFile& f, bool verbose) {
    std::string o;
    o += strfmt("file:            %s\n", f.path().c_str());
    o += strfmt("file size:       %" PRIu64 " bytes (%s)\n", f.file_size(), human_bytes(f.file_size()).c_str());
    o += strfmt("gguf version:    %u (alignment %" PRIu64 ", %zu metadata keys, %zu tensors)\n", f.version(),
                f.alignment(), f.kvs().size(), f.tensors().size());
    const std::string arch = std::string(f.get_string("general.architecture").value_or("(none)"));
    o += strfmt("architecture:    %s\n", arch.c_str());
    o += strfmt("name:            %s\n", std::string(f.get_string("general.name").value_or("(none)")).c_str());

    if (find_arch_recipe(arch) != nullptr) {
        const ModelConfig c = load_model_config(f);
        o += strfmt("engine support:  yes (%s RoPE%s%s)\n",
                    c.recipe->rope_style == RopeStyle::NeoX ? "NeoX" : "normal",
                    c.recipe->qkv_bias ? ", QKV bias" : "", c.recipe->qk_norm ? ", Q/K norm" : "");
        o += strfmt("n_layer:         %" PRId64 "\n", c.n_layer);
        o += strfmt("n_embd:          %" PRId64 "\n", c.n_embd);
        o += strfmt("n_ff:            %" PRId64 "\n", c.n_ff);
        o += strfmt("n_head:          %" PRId64 "\n", c.n_head);
        o += strfmt("n_head_kv:       %" PRId64 "\n", c.n_head_kv);
        o += strfmt("head_dim:        %" PRId64 "\n", c.head_dim);
        o += strfmt("n_rot:           %" PRId64 "\n", c.n_rot);
        o += strfmt("n_ctx_train:     %" PRId64 "\n", c.n_ctx_train);
        o += strfmt("n_vocab:         %" PRId64 "\n", c.n_vocab);
        o += strfmt("rms_eps:         %g\n", static_cast<double>(c.rms_eps));
        o += strfmt("rope_freq_base:  %g\n", static_cast<double>(c.rope_freq_base));
        o += strfmt("rope_scaling:    %s", rope_scaling_name(c.rope_scaling));
        if (c.rope_scaling != RopeScaling::None) {
            o += strfmt(" (factor %g, original context %" PRId64 ")", static_cast<double>(c.rope_scaling_factor),
                        c.rope_scaling_orig_ctx);
        }
        o += "\n";
        const bool tied = f.find_tensor("output.weight") == nullptr;
        if (!f.tensors().empty()) o += strfmt("output:          %s\n", tied ? "tied to token_embd" : "separate");
    } else {
        o += strfmt("engine support:  no (supported: %s); hyper-parameters as stored:\n",
                    supported_arch_names().c_str());
        const std::string p = arch + ".";
        for (const GgufKV& kv : f.kvs()) {
            if (kv.key.compare(0, p.size(), p) == 0) {
                o += strfmt("  %-40s %s\n", kv.key.c_str(), kv.value.to_string().c_str());
            }
        }
    }

    const std::string tok_model = std::string(f.get_string("tokenizer.ggml.model").value_or("(none)"));
    const std::string tok_pre = std::string(f.get_string("tokenizer.ggml.pre").value_or("(none)"));
    const GgufArray* tokens = f.get_array("tokenizer.ggml.tokens");
    o += strfmt("tokenizer:       %s (pre-tokenizer %s), vocab %" PRIu64 " tokens%s\n", tok_model.c_str(),
                tok_pre.c_str(), tokens ? tokens->count : 0,
                f.has("tokenizer.chat_template") ? ", chat template present" : "");

    std::map<std::string, std::pair<size_t, uint64_t>> by_type;
    uint64_t total = 0;
    for (const GgufTensorInfo& t : f.tensors()) {
        auto& e = by_type[type_name(t.type)];
        e.first++;
        e.second += t.nbytes;
        total += t.nbytes;
    }
    o += strfmt("tensors:         %zu (%s of data)\n", f.tensors().size(), human_bytes(total).c_str());
    for (const auto& [name, cnt] : by_type) {
        o += strfmt("  %-6s %5zu tensors  %s\n", name.c_str(), cnt.first, human_bytes(cnt.second).c_str());
    }

    if (verbose) {
        o += "metadata:\n";
        for (const GgufKV& kv : f.kvs()) {
            o += strfmt("  %-44s %-7s %s\n", kv.key.c_str(), gguf_type_name(kv.value.type),
                        kv.value.to_string().c_str());
        }
        o += "tensors (name, type, shape, file offset, bytes):\n";
        for (const GgufTensorInfo& t : f.tensors()) {
            o += strfmt("  %-36s %-5s %-20s %12" PRIu64 " %12" PRIu64 "\n", t.name.c_str(), type_name(t.type),
                        t.shape_string().c_str(), t.file_offset, t.nbytes);
        }
    }
    return o;
}

Status describe_model(const std::string& path, bool verbose, std::string& text) {
    try {
        const std::unique_ptr<GgufFile> f = GgufFile::open(path);
        text = describe_gguf(*f, verbose);
        return Status::success();
    } catch (const std::exception& e) {
        return Status::error(e.what());
    }
}

}  // namespace jllm

// tokenizer/hf_import.h — Hugging Face tokenizer.json (+ tokenizer_config.json) to the
// tokenizer.ggml.* metadata of a GGUF. Used by jllm-vocab, the synthetic-model writer and tests.
// Supports byte-level BPE (ByteLevel pre-tokenizer or decoder). Only the token list of the
// tokenizer is written: padding it to the embedding row count is the caller's business.
#pragma once

#include <optional>
#include <string>

#include "tokenizer/vocab.h"

namespace jllm {

class GgufWriter;

struct HfImportOptions {
    // tokenizer.ggml.pre; "" = detect from the pre_tokenizer section (JllmError if unknown).
    std::string pre;
    // Overrides add_bos_token from tokenizer_config.json / the post-processor.
    std::optional<bool> add_bos;
};

// Reads the files into a vocabulary. `config_path` may be "" (no tokenizer_config.json).
// Throws JllmError on unreadable files, bad JSON or an unsupported tokenizer.
TokenizerVocab hf_load_vocab(const std::string& tokenizer_json_path,
                             const std::string& config_path, const HfImportOptions& opt = {});

// Reads both files and adds tokenizer.ggml.{model,pre,tokens,token_type,merges,bos_token_id,
// eos_token_id,unknown_token_id,padding_token_id,add_bos_token,add_eos_token},
// tokenizer.jllm.* and tokenizer.chat_template to `w`. Returns what it wrote.
TokenizerVocab hf_tokenizer_to_gguf(const std::string& tokenizer_json_path,
                                    const std::string& config_path, GgufWriter& w,
                                    const HfImportOptions& opt = {});

}  // namespace jllm

// tests/unit/synth/test_synth_types.cpp — the q4_k_m type table against the golden written by
// scripts/golden/gen_synth_goldens.py from llama.cpp's own quantizer (tests/data/synth/
// q4_k_m_types.tsv): every preset, every tensor, same names and same types. Plus the qwen3-4b
// byte budget against the anchor file (ANCHORS.md: 2,495,403,392 bytes).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "quant/quant_types.h"
#include "synth/synth_model.h"
#include "synth/synth_presets.h"
#include "test_paths.h"

namespace jllm {
namespace {

using TypeTable = std::map<std::string, std::map<std::string, std::string>>;  // preset -> tensor -> TYPE

TypeTable load_golden() {
    const std::string path = test::data_dir() + "/synth/q4_k_m_types.tsv";
    std::istringstream in(test::read_file(path));
    TypeTable t;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        std::string preset, name, type;
        std::getline(ls, preset, '\t');
        std::getline(ls, name, '\t');
        std::getline(ls, type, '\t');
        t[preset][name] = type;
    }
    return t;
}

TEST(SynthTypeTable, MatchesLlamaCppQ4KM) {
    const TypeTable golden = load_golden();
    ASSERT_FALSE(golden.empty());
    std::set<std::string> seen;
    for (const auto& [preset, want] : golden) {
        const SynthPreset* p = find_synth_preset(preset);
        ASSERT_NE(p, nullptr) << preset;
        seen.insert(preset);
        std::map<std::string, std::string> got;
        for (const SynthTensor& t : plan_synth_tensors(*p, p->n_layer, QuantRecipe::Q4_K_M)) got[t.name] = type_name(t.type);
        EXPECT_EQ(got.size(), want.size()) << preset;
        int mismatches = 0;
        for (const auto& [name, type] : want) {
            auto it = got.find(name);
            if (it == got.end()) {
                ADD_FAILURE() << preset << ": llama.cpp has tensor " << name << ", we do not";
                continue;
            }
            if (it->second != type && ++mismatches <= 10) {
                ADD_FAILURE() << preset << ": " << name << " is " << it->second << ", llama.cpp chose " << type;
            }
        }
        EXPECT_EQ(mismatches, 0) << preset;
    }
    // The golden covers every preset.
    for (const SynthPreset& p : synth_presets()) EXPECT_TRUE(seen.count(p.name)) << "no golden for " << p.name;
}

TEST(SynthTypeTable, Qwen3_4bTensorBytesFitTheAnchor) {
    // Tensor data (each tensor padded to 32 bytes) must account for the anchor's size less its
    // metadata (a few MB of tokenizer), i.e. within 0.5% below 2,495,403,392.
    const SynthPreset& p = *find_synth_preset("qwen3-4b");
    uint64_t bytes = 0;
    for (const SynthTensor& t : plan_synth_tensors(p, p.n_layer, QuantRecipe::Q4_K_M)) {
        uint64_t rows = 1;
        for (size_t i = 1; i < t.ne.size(); ++i) rows *= static_cast<uint64_t>(t.ne[i]);
        bytes += (row_size(t.type, t.ne[0]) * rows + 31) / 32 * 32;
    }
    const double anchor = 2495403392.0;
    EXPECT_LE(bytes, anchor);
    EXPECT_GT(bytes, anchor * 0.995);
}

}  // namespace
}  // namespace jllm

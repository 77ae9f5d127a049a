// tests/common/tok_test_util.cpp — see tok_test_util.h.
#include "tok_test_util.h"

#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"
#include "tokenizer/hf_import.h"

namespace jllm::test {

namespace {

std::mutex g_mu;

double mtime(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return -1.0;
    return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9;
}

}  // namespace

const Tokenizer& vocab_tokenizer(const std::string& name) {
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    std::lock_guard<std::mutex> lock(g_mu);
    auto& slot = cache[name];
    if (!slot) {
        auto f = GgufFile::open(shared_dir() + "/testdata/vocab/ggml-vocab-" + name + ".gguf");
        slot = Tokenizer::from_gguf(*f);
    }
    return *slot;
}

std::string converted_gguf_path(const std::string& name) {
    const std::string dir = name == "tiny_bpe" ? data_dir() + "/tokenizer/tiny_bpe"
                                               : shared_dir() + "/testdata/tokenizers/" + name;
    const std::string out_dir = std::string(JLLM_BINARY_DIR) + "/test_tokenizer_data";
    ::mkdir(out_dir.c_str(), 0755);
    const std::string out = out_dir + "/" + name + ".gguf";
    const double t = mtime(out);
    if (t < 0 || t < mtime("/proc/self/exe") || t < mtime(dir + "/tokenizer.json")) {
        GgufWriter w;
        w.set_string("general.architecture", name == "qwen3" ? "qwen3" : "llama");
        w.set_string("general.name", name + "-vocab");
        hf_tokenizer_to_gguf(dir + "/tokenizer.json", dir + "/tokenizer_config.json", w);
        w.write_file(out);  // temp file + rename: safe with tests running in parallel
    }
    return out;
}

const Tokenizer& hf_tokenizer(const std::string& name) {
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    std::lock_guard<std::mutex> lock(g_mu);
    auto& slot = cache[name];
    if (!slot) {
        auto f = GgufFile::open(converted_gguf_path(name));
        slot = Tokenizer::from_gguf(*f);
    }
    return *slot;
}

std::vector<VocabCase> read_vocab_cases(const std::string& inp_path, const std::string& out_path) {
    const std::string inp = read_file(inp_path);
    const std::string out = read_file(out_path);
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<VocabCase> cases;
    size_t pos = 0;
    while (pos < inp.size()) {
        const size_t e = inp.find(sep, pos);
        if (e == std::string::npos) break;
        cases.push_back({inp.substr(pos, e - pos), {}});
        pos = e + sep.size();
    }
    std::istringstream lines(out);
    std::string line;
    size_t k = 0;
    while (std::getline(lines, line) && k < cases.size()) {
        std::istringstream ids(line);
        int32_t id;
        while (ids >> id) cases[k].ids.push_back(id);
        ++k;
    }
    if (k != cases.size()) cases.clear();  // the test reports the mismatch as 0 cases
    return cases;
}

std::string hex_to_bytes(const std::string& hex) {
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
        out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return out;
}

std::string ids_to_string(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += " " + std::to_string(id);
    return s;
}

}  // namespace jllm::test

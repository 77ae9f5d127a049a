// apps/cli/main.cpp — `jetson-llm`, the command-line front end. Flags follow DESIGN.md's one
// flag table; every error is one line on stderr and a non-zero exit.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "jllm_version.h"
#include "model/model_info.h"

namespace {

struct CliOptions {
    std::string model;
    bool info = false;
    bool verbose = false;
    bool version = false;
};

int run_info(const CliOptions& o) {
    std::unique_ptr<jllm::GgufFile> f = jllm::GgufFile::open(o.model);
    std::fputs(jllm::describe_gguf(*f, o.verbose).c_str(), stdout);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CliOptions o;
    CLI::App app{"jetson-llm — LLM inference for the Jetson Orin Nano (GGUF models)", "jetson-llm"};
    app.add_option("-m,--model", o.model, "GGUF model file");
    app.add_flag("--info", o.info, "Print the model's architecture, hyper-parameters, tokenizer and tensors");
    app.add_flag("-v,--verbose", o.verbose, "More output (--info: every metadata key and tensor)");
    app.add_flag("--version", o.version, "Print the version and exit");

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::fputs(app.help().c_str(), stdout);
        return 0;
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "jetson-llm: error: %s (see --help)\n", e.what());
        return 2;
    }

    if (o.version) {
        std::printf("jetson-llm %s (commit %s)\n", JLLM_VERSION, JLLM_GIT_COMMIT);
        return 0;
    }
    if (o.verbose) jllm::set_log_level(jllm::LogLevel::Debug);
    try {
        if (o.model.empty()) {
            std::fprintf(stderr, "jetson-llm: error: no model given (use -m FILE; see --help)\n");
            return 2;
        }
        if (o.info) return run_info(o);
        std::fprintf(stderr, "jetson-llm: error: nothing to do (use --info; see --help)\n");
        return 2;
    } catch (const jllm::JllmError& e) {
        std::fprintf(stderr, "jetson-llm: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "jetson-llm: error: %s\n", e.what());
        return 1;
    }
}

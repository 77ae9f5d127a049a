// apps/bench/workload.cpp — jllm-bench --workload: speculative decoding on real conversations.
// One engine per --spec mode (the draft model loaded where the mode uses it), every prompt of
// the file generated greedily by each mode in turn (same run, alternating, the cache cleared
// before each: the model's and the draft model's), decode rate, TTFT and the drafters' counts
// summed per kind of prompt, then per group of kinds (a prompt's optional "group": the workloads
// issue 35 names, tool-call / home-assistant answers and free text); each mode's output compared
// token for token with `off`'s (greedy output must not change).
#include "workload.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace jllm::bench {

namespace {

struct Prompt {
    std::string name, kind, group, text;
};

struct Sum {
    int tokens = 0, forwards = 0, prompts = 0, differ = 0;
    double decode_ms = 0, draft_ms = 0, ttft_ms = 0, draft_prefill_ms = 0;
    int ngram_d = 0, ngram_a = 0, model_d = 0, model_a = 0;
    void add(const GenerateStats& s) {
        tokens += s.completion_tokens - 1;  // the rate counts the forwards after the first token
        forwards += s.decode_forwards;
        decode_ms += s.decode_ms;
        draft_ms += s.draft_ms;
        ttft_ms += s.ttft_ms;
        draft_prefill_ms += s.draft_prefill_ms;
        ngram_d += s.ngram_drafted;
        ngram_a += s.ngram_accepted;
        model_d += s.model_drafted;
        model_a += s.model_accepted;
        prompts++;
    }
    double tps() const { return decode_ms > 0 ? tokens * 1000.0 / decode_ms : 0; }
};

// A --modes entry: a --spec mode, for draft and auto optionally with the draft model's
// vocabulary after a colon ("draft:0" every token, "draft:16384") and its confidence floor after
// an at sign ("draft@0.75", "auto:16384@0"); without them, --draft-vocab and --draft-p-min.
SpecMode mode_of(const std::string& entry, int* draft_vocab, float* draft_p_min) {
    const size_t at = entry.find('@');
    const std::string head = entry.substr(0, at);
    const size_t colon = head.find(':');
    const std::string m = head.substr(0, colon);
    for (SpecMode x : {SpecMode::Off, SpecMode::Ngram, SpecMode::Draft, SpecMode::Auto}) {
        if (m != spec_mode_name(x)) continue;
        if (colon == std::string::npos && at == std::string::npos) return x;
        const bool model = x == SpecMode::Draft || x == SpecMode::Auto;
        if (colon != std::string::npos) {
            const std::string v = head.substr(colon + 1);
            if (!model || v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.size() > 9) {
                throw std::runtime_error("--modes: '" + entry + "': only draft and auto take a vocabulary, as draft:N");
            }
            *draft_vocab = std::stoi(v);
        }
        if (at != std::string::npos) {
            const std::string v = entry.substr(at + 1);
            char* end = nullptr;
            const float p = v.empty() ? -1.0f : std::strtof(v.c_str(), &end);
            if (!model || end == nullptr || *end != '\0' || !(p >= 0.0f && p <= 1.0f)) {
                throw std::runtime_error("--modes: '" + entry +
                                         "': only draft and auto take a confidence floor, as draft@P with P in [0, 1]");
            }
            *draft_p_min = p;
        }
        return x;
    }
    throw std::runtime_error("--modes: '" + entry + "' is not off, ngram, draft or auto (draft:N@P, auto:N@P)");
}

std::string pct(int a, int d) {
    if (d == 0) return "—";
    char b[32];
    std::snprintf(b, sizeof(b), "%d/%d (%.0f%%)", a, d, 100.0 * a / d);
    return b;
}

}  // namespace

int run_workload(const WorkloadOptions& o) {
    std::ifstream f(o.file);
    if (!f) throw std::runtime_error("cannot read " + o.file);
    const nlohmann::json j = nlohmann::json::parse(f);
    std::vector<std::string> modes;
    {
        std::stringstream ss(o.modes);
        std::string m;
        while (std::getline(ss, m, ',')) {
            if (!m.empty()) modes.push_back(m);
        }
    }
    if (modes.empty() || modes[0] != "off") modes.insert(modes.begin(), "off");  // the reference
    std::vector<std::unique_ptr<Engine>> engines;
    for (const std::string& m : modes) {
        EngineConfig c = o.config;
        c.spec = mode_of(m, &c.draft_vocab, &c.draft_p_min);
        c.draft_model_path = (c.spec == SpecMode::Draft || c.spec == SpecMode::Auto) ? o.draft : "";
        if (c.spec == SpecMode::Draft && o.draft.empty()) throw std::runtime_error("--modes draft needs --draft FILE");
        auto e = std::make_unique<Engine>();
        const Status s = e->load(c);
        if (!s.ok) throw std::runtime_error(m + ": " + s.message);
        engines.push_back(std::move(e));
    }
    std::vector<Prompt> prompts;
    for (const auto& p : j) {
        Prompt q;
        q.name = p.at("name").get<std::string>();
        q.kind = p.at("kind").get<std::string>();
        q.group = p.value("group", "");
        ChatRenderOptions ro;
        if (p.contains("tools")) ro.tools_json = p["tools"].dump();
        q.text = engines[0]->render_chat(chat_messages_from_json(p.at("messages").dump()), ro);
        prompts.push_back(std::move(q));
    }
    const ModelInfo mi = engines[0]->model_info();
    std::ofstream seq_out;
    if (!o.sequences.empty()) {
        seq_out.open(o.sequences);
        if (!seq_out) throw std::runtime_error("--sequences: cannot write " + o.sequences);
    }
    using Table = std::map<std::string, std::map<std::string, Sum>>;
    Table sums;    // kind -> mode -> sum ("all": every prompt)
    Table groups;  // group -> mode -> sum
    // The same per round: a round's modes ran side by side, so its ratios to `off` are each a
    // measurement, and their spread is the host's (a shared machine's rate drifts within a run).
    std::vector<Table> round_sums(static_cast<size_t>(o.reps)), round_groups(static_cast<size_t>(o.reps));
    for (int rep = 0; rep < o.reps; ++rep) {
        for (const Prompt& p : prompts) {
            std::vector<int32_t> reference;
            for (size_t i = 0; i < modes.size(); ++i) {
                Engine& e = *engines[i];
                e.clear_cache();
                GenerateRequest r;
                r.prompt = p.text;
                r.parse_special = true;
                r.sampling.temperature = 0;
                r.sampling.repeat_penalty = o.repeat_penalty;
                r.max_tokens = o.tokens;
                const GenerateResult res = e.generate(r, nullptr);
                if (res.finish == FinishReason::Error) throw std::runtime_error(p.name + ": " + res.error);
                Sum& s = sums[p.kind][modes[i]];
                s.add(res.stats);
                Sum& all = sums["all"][modes[i]];
                all.add(res.stats);
                Sum* grp = p.group.empty() ? nullptr : &groups[p.group][modes[i]];
                if (grp) grp->add(res.stats);
                Table& rs = round_sums[static_cast<size_t>(rep)];
                rs[p.kind][modes[i]].add(res.stats);
                rs["all"][modes[i]].add(res.stats);
                if (!p.group.empty()) round_groups[static_cast<size_t>(rep)][p.group][modes[i]].add(res.stats);
                const std::vector<int32_t>& t = e.resident_tokens();
                if (i == 0) {
                    reference = t;
                    if (seq_out.is_open() && rep == 0) {
                        const nlohmann::json line = {{"name", p.name},          {"kind", p.kind},
                                                     {"group", p.group},        {"prompt_tokens", res.stats.prompt_tokens},
                                                     {"tokens", t}};
                        seq_out << line.dump() << '\n';
                        if (!seq_out) throw std::runtime_error("--sequences: cannot write " + o.sequences);
                    }
                } else if (t != reference) {
                    s.differ++;
                    all.differ++;
                    if (grp) grp->differ++;
                    std::fprintf(stderr, "jllm-bench: %s: --spec %s output differs from --spec off\n", p.name.c_str(),
                                 modes[i].c_str());
                }
                std::fprintf(stderr, "[workload] %-18s %-6s %3d tokens %7.2f tok/s, %d forwards, drafted %d accepted %d\n",
                             p.name.c_str(), modes[i].c_str(), res.stats.completion_tokens, res.stats.decode_tps,
                             res.stats.decode_forwards, res.stats.drafted(), res.stats.accepted());
            }
        }
    }
    std::printf("jllm-bench --workload %s: %s (%s), %s, %d threads, draft %s, greedy, repeat penalty %.2f, "
                "%d tokens per prompt, %d repetition(s)\n\n",
                o.file.c_str(), mi.name.c_str(), mi.backend.c_str(), mi.device.c_str(), o.config.n_threads,
                o.draft.empty() ? "none" : o.draft.c_str(), o.repeat_penalty, o.tokens, o.reps);
    const bool per_round = o.reps > 1;
    std::printf("| kind | prompts | --spec | decode t/s | x off |%s tokens per forward | prompt lookup accepted | "
                "draft model accepted | draft model ms | mean TTFT ms (draft model's prompt) | output = off |\n",
                per_round ? " x off per round |" : "");
    std::printf("|---|---:|---|---:|---:|%s---:|---:|---:|---:|---:|---|\n", per_round ? "---|" : "");
    auto ratio = [](const std::map<std::string, Sum>& by_mode, const std::string& m) {
        const double base = by_mode.at("off").tps();
        return base > 0 ? by_mode.at(m).tps() / base : 0.0;
    };
    auto rows = [&](const Table& table, const std::vector<Table>& rounds, const char* prefix) {
        for (const auto& [kind, by_mode] : table) {
            for (const std::string& m : modes) {
                const Sum& s = by_mode.at(m);
                std::string each;
                for (const Table& r : rounds) {
                    char b[32];
                    std::snprintf(b, sizeof b, "%s%.2f", each.empty() ? " " : " / ", ratio(r.at(kind), m));
                    each += b;
                }
                std::printf("| %s%s | %d | %s | %.2f | %.2fx |%s %.2f | %s | %s | %.0f | %.0f (%.0f) | %s |\n", prefix,
                            kind.c_str(), s.prompts / static_cast<int>(o.reps), m.c_str(), s.tps(), ratio(by_mode, m),
                            per_round ? (each + " |").c_str() : "",
                            s.forwards > 0 ? static_cast<double>(s.tokens) / s.forwards : 0.0,
                            pct(s.ngram_a, s.ngram_d).c_str(), pct(s.model_a, s.model_d).c_str(), s.draft_ms,
                            s.prompts > 0 ? s.ttft_ms / s.prompts : 0.0,
                            s.prompts > 0 ? s.draft_prefill_ms / s.prompts : 0.0, s.differ == 0 ? "yes" : "NO");
            }
        }
    };
    rows(sums, round_sums, "");
    rows(groups, round_groups, "group: ");
    int differ = 0;
    for (const auto& [kind, by_mode] : sums) {
        for (const auto& [m, s] : by_mode) differ += kind == "all" ? 0 : s.differ;
    }
    return differ == 0 ? 0 : 1;
}

}  // namespace jllm::bench

// apps/perplexity/perplexity.cpp — chunking, scoring, the log-probability file and the
// statistics of jllm-perplexity (see perplexity.h).
#include "perplexity.h"

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

namespace jllm::ppl {

namespace {

constexpr char MAGIC[8] = {'J', 'L', 'L', 'M', 'K', 'L', 'D', '1'};

std::string num(size_t v) { return std::to_string(v); }

template <typename T>
void put(std::FILE* f, const T* p, size_t n, const std::string& path) {
    if (n != 0 && std::fwrite(p, sizeof(T), n, f) != n) throw std::runtime_error("cannot write " + path);
}

class Reader {
public:
    explicit Reader(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "rb")) {
        if (f_ == nullptr) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
    }
    ~Reader() { std::fclose(f_); }
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;
    template <typename T>
    void get(T* p, size_t n) {
        if (n != 0 && std::fread(p, sizeof(T), n, f_) != n) {
            throw std::runtime_error(path_ + ": truncated (not a complete jllm-perplexity log-probability file)");
        }
    }
    template <typename T>
    T get() {
        T v;
        get(&v, 1);
        return v;
    }
    bool at_end() { return std::fgetc(f_) == EOF; }
private:
    std::string path_;
    std::FILE* f_;
};

double mean(const std::vector<double>& v) {
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Standard error of the mean (sample standard deviation / sqrt(n)), 0 for fewer than 2 values.
double std_error(const std::vector<double>& v) {
    if (v.size() < 2) return 0.0;
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / static_cast<double>(v.size() - 1) / static_cast<double>(v.size()));
}

}  // namespace

std::vector<std::vector<int32_t>> make_chunks(const std::vector<int32_t>& text_tokens, int n_ctx, int n_chunks,
                                              int32_t bos, int min_chunks) {
    if (n_ctx < 8) throw std::runtime_error("-c must be at least 8 tokens");
    const size_t whole = text_tokens.size() / static_cast<size_t>(n_ctx);
    if (whole < static_cast<size_t>(std::max(1, min_chunks))) {
        throw std::runtime_error("the text has " + num(text_tokens.size()) + " tokens: fewer than " +
                                 num(static_cast<size_t>(std::max(1, min_chunks))) + " chunks of -c " +
                                 num(static_cast<size_t>(n_ctx)) + " (a longer text, or a smaller -c)");
    }
    size_t use = whole;
    if (n_chunks > 0) {
        if (static_cast<size_t>(n_chunks) > whole) {
            throw std::runtime_error("--chunks " + num(static_cast<size_t>(n_chunks)) + ": the text has " +
                                     num(whole) + " chunks of -c " + num(static_cast<size_t>(n_ctx)));
        }
        use = static_cast<size_t>(n_chunks);
    }
    std::vector<std::vector<int32_t>> chunks(use);
    for (size_t c = 0; c < use; c++) {
        chunks[c].assign(text_tokens.begin() + static_cast<long>(c * n_ctx),
                         text_tokens.begin() + static_cast<long>((c + 1) * n_ctx));
        if (bos >= 0) chunks[c][0] = bos;
    }
    return chunks;
}

std::vector<int32_t> sample_vocabulary(uint32_t n_vocab, uint32_t n, uint64_t seed) {
    n = std::min(n, n_vocab);
    std::mt19937_64 rng(seed);
    std::vector<int32_t> all(n_vocab);
    std::iota(all.begin(), all.end(), 0);
    for (uint32_t i = 0; i < n; i++) {  // partial Fisher-Yates
        std::uniform_int_distribution<uint32_t> pick(i, n_vocab - 1);
        std::swap(all[i], all[pick(rng)]);
    }
    all.resize(n);
    std::sort(all.begin(), all.end());
    return all;
}

Row make_row(const float* logits, int64_t n_vocab, int32_t next, uint32_t n_top,
             const std::vector<int32_t>& sample_ids, std::vector<double>& logsm) {
    const size_t V = static_cast<size_t>(n_vocab);
    logsm.resize(V);
    float mx = logits[0];
    size_t arg = 0;
    for (size_t i = 1; i < V; i++) {
        if (logits[i] > mx) {
            mx = logits[i];
            arg = i;
        }
    }
    double s = 0;
    for (size_t i = 0; i < V; i++) s += std::exp(static_cast<double>(logits[i]) - mx);
    const double lse = mx + std::log(s);
    for (size_t i = 0; i < V; i++) logsm[i] = static_cast<double>(logits[i]) - lse;

    Row r;
    r.argmax = static_cast<int32_t>(arg);
    r.logp_next = logsm[static_cast<size_t>(next)];
    const size_t k = std::min<size_t>(n_top, V);
    if (k == 1) {  // the argmax above (its first maximum: the lowest id among ties, as the sort's)
        r.ids.assign(1, r.argmax);
        r.logp.assign(1, static_cast<float>(logsm[arg]));
    } else {
        std::vector<int32_t> idx(V);
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(k), idx.end(), [&](int32_t a, int32_t b) {
            const double la = logsm[static_cast<size_t>(a)], lb = logsm[static_cast<size_t>(b)];
            return la > lb || (la == lb && a < b);
        });
        r.ids.assign(idx.begin(), idx.begin() + static_cast<long>(k));
        for (int32_t id : r.ids) r.logp.push_back(static_cast<float>(logsm[static_cast<size_t>(id)]));
    }
    for (int32_t id : sample_ids) r.sample_logp.push_back(static_cast<float>(logsm[static_cast<size_t>(id)]));
    return r;
}

Divergence divergence(const Row& base, const std::vector<int32_t>& sample_ids, const std::vector<double>& q,
                      int32_t argmax_q) {
    double sum_ps = 0, sum_qs = 0, kl_s = 0;
    for (size_t j = 0; j < base.ids.size(); j++) {
        const double lp = base.logp[j];
        const double lq = q[static_cast<size_t>(base.ids[j])];
        const double p = std::exp(lp);
        sum_ps += p;
        sum_qs += std::exp(lq);
        kl_s += p * (lp - lq);
    }
    double q_total = 0;
    for (double lq : q) q_total += std::exp(lq);
    Divergence d;
    d.same_top = !base.ids.empty() && base.ids[0] == argmax_q;
    if (!d.same_top && !base.ids.empty()) {
        double lp_q_top = base.logp.back();
        for (size_t j = 0; j < base.ids.size(); j++) {
            if (base.ids[j] == argmax_q) lp_q_top = base.logp[j];
        }
        d.top_gap = std::exp(static_cast<double>(base.logp[0])) - std::exp(lp_q_top);
    }
    const double p_t = 1.0 - sum_ps;
    const double q_t = q_total - sum_qs;
    d.bucket = kl_s;
    d.kl = kl_s;
    if (p_t > 1e-9 && q_t > 0) {
        d.tail_mass = p_t;
        const double bucket_t = p_t * std::log(p_t / q_t);
        d.bucket += bucket_t;
        // The tail's own KL from the sampled tokens outside the top: with r = log(P~ / Q~),
        // KL(P~ || Q~) = E_P~[r] = E_P~[r + exp(-r) - 1] (E_P~[exp(-r)] = 1): a non-negative
        // integrand of second order in r, whose P-weighted sample mean has far less variance
        // than E[r]'s.
        std::vector<int32_t> top = base.ids;
        std::sort(top.begin(), top.end());
        const double shift = std::log(p_t / q_t);
        double num = 0, den = 0;
        for (size_t j = 0; j < sample_ids.size(); j++) {
            if (std::binary_search(top.begin(), top.end(), sample_ids[j])) continue;
            const double lp = base.sample_logp[j];
            const double w = std::exp(lp);
            const double r = lp - q[static_cast<size_t>(sample_ids[j])] - shift;
            num += w * (r + std::expm1(-r));
            den += w;
        }
        const double within = den > 0 ? num / den : 0.0;
        d.kl = d.bucket + p_t * within;
    }
    d.bucket = std::max(d.bucket, 0.0);  // rounding of nearly equal distributions
    d.kl = std::max(d.kl, d.bucket);
    return d;
}

LogProbFile read_logprob_file(const std::string& path) {
    Reader r(path);
    char magic[8];
    r.get(magic, 8);
    if (std::memcmp(magic, MAGIC, 8) != 0) {
        throw std::runtime_error(path + ": not a jllm-perplexity log-probability file (written by --save-logits "
                                        "or scripts/golden/gen_kl_golden.py)");
    }
    LogProbFile f;
    LogProbHeader& h = f.header;
    uint32_t u[6];
    r.get(u, 6);
    h.n_vocab = u[0];
    h.n_ctx = u[1];
    h.n_chunks = u[2];
    h.first = u[3];
    h.n_top = u[4];
    h.n_sample = u[5];
    if (h.n_vocab == 0 || h.n_vocab > (1u << 24) || h.n_ctx < 8 || h.n_ctx > (1u << 20) || h.n_chunks == 0 ||
        h.n_chunks > (1u << 20) || h.first != h.n_ctx / 2 || h.n_top == 0 || h.n_top > h.n_vocab ||
        h.n_sample > h.n_vocab) {
        throw std::runtime_error(path + ": header out of range");
    }
    const uint32_t name_len = r.get<uint32_t>();
    if (name_len > 4096) throw std::runtime_error(path + ": header out of range");
    h.name.resize(name_len);
    r.get(h.name.data(), name_len);
    auto check_ids = [&](const std::vector<int32_t>& v) {
        for (int32_t t : v) {
            if (t < 0 || static_cast<uint32_t>(t) >= h.n_vocab) throw std::runtime_error(path + ": token id out of range");
        }
    };
    h.sample_ids.resize(h.n_sample);
    r.get(h.sample_ids.data(), h.n_sample);
    check_ids(h.sample_ids);
    h.tokens.resize(static_cast<size_t>(h.n_chunks) * h.n_ctx);
    r.get(h.tokens.data(), h.tokens.size());
    check_ids(h.tokens);
    const size_t n_rows = static_cast<size_t>(h.n_chunks) * h.scored_per_chunk();
    f.rows.resize(n_rows);
    for (Row& row : f.rows) {
        row.logp_next = r.get<float>();
        row.ids.resize(h.n_top);
        row.logp.resize(h.n_top);
        row.sample_logp.resize(h.n_sample);
        r.get(row.ids.data(), h.n_top);
        r.get(row.logp.data(), h.n_top);
        r.get(row.sample_logp.data(), h.n_sample);
        check_ids(row.ids);
        for (size_t j = 0; j < row.logp.size(); j++) {
            if (!(row.logp[j] <= 0.0f) || (j > 0 && row.logp[j] > row.logp[j - 1])) {
                throw std::runtime_error(path + ": record out of range (log-probabilities must be <= 0, descending)");
            }
        }
        row.argmax = row.ids[0];
    }
    if (!r.at_end()) throw std::runtime_error(path + ": bytes after the last record");
    return f;
}

LogProbWriter::LogProbWriter(const std::string& path, const LogProbHeader& h) : path_(path), n_top_(h.n_top), n_sample_(h.n_sample) {
    f_ = std::fopen(path.c_str(), "wb");
    if (f_ == nullptr) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    put(f_, MAGIC, 8, path_);
    const uint32_t u[6] = {h.n_vocab, h.n_ctx, h.n_chunks, h.first, h.n_top, h.n_sample};
    put(f_, u, 6, path_);
    const uint32_t name_len = static_cast<uint32_t>(std::min<size_t>(h.name.size(), 4096));
    put(f_, &name_len, 1, path_);
    put(f_, h.name.data(), name_len, path_);
    put(f_, h.sample_ids.data(), h.sample_ids.size(), path_);
    put(f_, h.tokens.data(), h.tokens.size(), path_);
}

LogProbWriter::~LogProbWriter() {
    if (f_ != nullptr) std::fclose(f_);
}

void LogProbWriter::add(const Row& row) {
    if (row.ids.size() != n_top_ || row.logp.size() != n_top_ || row.sample_logp.size() != n_sample_) {
        throw std::logic_error("LogProbWriter::add: the row does not match the header's n_top / n_sample");
    }
    const float lp = static_cast<float>(row.logp_next);
    put(f_, &lp, 1, path_);
    put(f_, row.ids.data(), row.ids.size(), path_);
    put(f_, row.logp.data(), row.logp.size(), path_);
    put(f_, row.sample_logp.data(), row.sample_logp.size(), path_);
}

void LogProbWriter::close() {
    std::FILE* f = f_;
    f_ = nullptr;
    if (f != nullptr && std::fclose(f) != 0) throw std::runtime_error("cannot write " + path_);
}

void Stats::add_pair(double nll_base, const Divergence& d) {
    nll_base_.push_back(nll_base);
    kl_.push_back(d.kl);
    kl_bucket_.push_back(d.bucket);
    tail_.push_back(d.tail_mass);
    same_top_ += d.same_top ? 1 : 0;
    if (!d.same_top) gaps_.push_back(d.top_gap);
}

double Stats::ppl() const { return std::exp(mean(nll_)); }

double Stats::ppl_error() const { return ppl() * std_error(nll_); }

double Stats::base_ppl() const { return std::exp(mean(nll_base_)); }

double Stats::ppl_ratio() const { return std::exp(mean(nll_) - mean(nll_base_)); }

double Stats::ppl_ratio_error() const {
    std::vector<double> d(nll_base_.size());
    for (size_t i = 0; i < d.size(); i++) d[i] = nll_[i] - nll_base_[i];
    return ppl_ratio() * std_error(d);
}

double Stats::kl_mean() const { return mean(kl_); }

double Stats::kl_mean_error() const { return std_error(kl_); }

double Stats::kl_bucket_mean() const { return mean(kl_bucket_); }

double Stats::tail_mass_mean() const { return mean(tail_); }

double Stats::kl_quantile(double q) const {
    if (kl_.empty()) return 0.0;
    std::vector<double> v = kl_;
    const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) -
                                                (q > 0 ? 1 : 0));
    std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
    return v[i];
}

double Stats::kl_max() const { return kl_.empty() ? 0.0 : *std::max_element(kl_.begin(), kl_.end()); }

double Stats::top1_gap_median() const {
    if (gaps_.empty()) return 0.0;
    std::vector<double> v = gaps_;
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
}

double Stats::top1_agreement() const {
    return kl_.empty() ? 0.0 : static_cast<double>(same_top_) / static_cast<double>(kl_.size());
}

}  // namespace jllm::ppl

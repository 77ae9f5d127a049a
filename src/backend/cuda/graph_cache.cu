// backend/cuda/graph_cache.cu — CUDA graphs. A single-token decode step is captured once per
// decode-attention split count (the splits the position needs, rounded up to a power of two) and
// per tail (logits, on-GPU argmax or top-k), then replayed with token and position in step_dev_.
// Every other forward is captured too, one graph per layer, each executable updated in place from
// one call to the next: on the H200 the replayed decode graphs ran slower for the rest of the
// process once kernels had been launched outside a graph (docs/gpu_speed_notes.md), so no kernel
// is launched outside one.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_backend_impl.cuh"
#include "core/error.h"
#include "core/log.h"

namespace jllm {

int CudaBackend::graph_splits(int pos) const {
    const int need = (pos + split_keys_) / split_keys_;  // the splits pos + 1 keys need (>= 1)
    int b = 1;
    while (b < need && b < max_split_) b *= 2;
    return std::min(b, max_split_);
}

int CudaBackend::topk_bucket(int k) const {
    int b = 1;
    while (b < k) b *= 2;
    return static_cast<int>(std::min<int64_t>({b, cuda::TOPK_MAX, c_.n_vocab}));
}

bool CudaBackend::graph_usable() const {
    return use_q8_ && embd_host_.empty() && !tap_ && !graph_failed_ && opt_.graphs && !opt_.profile &&
           !opt_.sync_check;
}

void CudaBackend::release_graphs() {
    for (auto& g : decode_graphs_) (void)cudaGraphExecDestroy(g.second);
    decode_graphs_.clear();
    for (auto& g : masked_tails_) (void)cudaGraphExecDestroy(g.second);
    masked_tails_.clear();
    for (auto& g : verify_graphs_) (void)cudaGraphExecDestroy(g.second);
    verify_graphs_.clear();
    for (auto& g : fwd_graphs_) (void)cudaGraphExecDestroy(g.second.exec);
    fwd_graphs_.clear();
}

bool CudaBackend::decode_graph(int32_t token, int pos, StepTail tail, int k) {
    const int splits = graph_splits(pos);
    const auto key = std::make_tuple(splits, tail, tail == StepTail::TopK ? k : 0);
    if (decode_graphs_.count(key) == 0 && decode_graphs_.size() >= MAX_DECODE_GRAPHS) {
        // Bounded memory whatever mix of positions and sampling a long-lived server sees.
        for (auto& g : decode_graphs_) (void)cudaGraphExecDestroy(g.second);
        decode_graphs_.clear();
    }
    auto it = decode_graphs_.find(key);
    if (it == decode_graphs_.end()) {
        capture_splits_ = splits;
        cudaGraphExec_t exec = capture_exec("decode", [&] {
            JLLM_CUDA_CHECK(cudaMemcpyAsync(step_dev_, step_host_, 2 * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
            run_layers(nullptr, step_dev_, 1, 0, step_dev_ + 1);
            final_norm(0, 1);
            if (tail == StepTail::Logits) logits_split();
            else logits_rows(0, 1);
            step_tail(tail, k, false);
        });
        capture_splits_ = 0;
        if (exec == nullptr) return false;
        it = decode_graphs_.emplace(key, exec).first;
    }
    // The previous step has completed (forward() synchronizes), so the pinned words are free.
    step_host_[0] = token;
    step_host_[1] = pos;
    JLLM_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
    return true;
}

bool CudaBackend::verify_graph(const int32_t* tokens, int n_tokens, int pos) {
    JLLM_ASSERT(n_tokens >= 2 && n_tokens <= cuda::GEMV_MAX_TOKENS);
    const int splits = graph_splits(pos + n_tokens - 1);  // the last query's; the others skip what they do not need
    const auto key = std::make_pair(n_tokens, splits);
    if (verify_graphs_.count(key) == 0 && verify_graphs_.size() >= MAX_DECODE_GRAPHS) {
        for (auto& g : verify_graphs_) (void)cudaGraphExecDestroy(g.second);
        verify_graphs_.clear();
    }
    int32_t* tok_dev = step_dev_ + 2;
    int32_t* pos_dev = step_dev_ + 2 + cuda::GEMV_MAX_TOKENS;
    auto it = verify_graphs_.find(key);
    if (it == verify_graphs_.end()) {
        capture_splits_ = splits;
        cudaGraphExec_t exec = capture_exec("verify", [&] {
            JLLM_CUDA_CHECK(cudaMemcpyAsync(tok_dev, step_host_ + 2, 2 * cuda::GEMV_MAX_TOKENS * sizeof(int32_t),
                                            cudaMemcpyHostToDevice, stream_));
            run_layers(nullptr, tok_dev, n_tokens, 0, pos_dev, 0);
            final_norm(0, n_tokens);
            logits_rows(0, n_tokens);
        });
        capture_splits_ = 0;
        if (exec == nullptr) return false;
        it = verify_graphs_.emplace(key, exec).first;
    }
    for (int t = 0; t < n_tokens; ++t) {
        step_host_[2 + t] = tokens[t];
        step_host_[2 + cuda::GEMV_MAX_TOKENS + t] = pos + t;
    }
    JLLM_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
    return true;
}

cudaGraph_t CudaBackend::capture(const char* what, const std::function<void()>& enqueue) {
    cudaGraph_t graph = nullptr;
    JLLM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
        enqueue();
    } catch (const std::exception& e) {
        (void)cudaStreamEndCapture(stream_, &graph);
        if (graph) (void)cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        log_msg(LogLevel::Warn, "cuda: %s graph capture failed (%s); running without graphs", what, e.what());
        graph_failed_ = true;
        return nullptr;
    }
    JLLM_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    return graph;
}

cudaGraphExec_t CudaBackend::instantiate(cudaGraph_t graph, const char* what) {
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    if (e == cudaSuccess) return exec;
    (void)cudaGetLastError();
    log_msg(LogLevel::Warn, "cuda: %s graph instantiation failed (%s); running without graphs", what,
            cudaGetErrorName(e));
    graph_failed_ = true;
    return nullptr;
}

cudaGraphExec_t CudaBackend::capture_exec(const char* what, const std::function<void()>& enqueue) {
    cudaGraph_t graph = capture(what, enqueue);
    if (graph == nullptr) return nullptr;
    cudaGraphExec_t exec = instantiate(graph, what);
    (void)cudaGraphDestroy(graph);
    return exec;
}

void CudaBackend::run_as_graph(int64_t key, const std::function<void()>& enqueue) {
    if (!graph_usable()) {
        enqueue();
        return;
    }
    cudaGraph_t graph = capture("forward", enqueue);
    if (graph == nullptr) {
        enqueue();
        return;
    }
    const uint64_t shape = graph_shape(graph);
    auto it = fwd_graphs_.find(key);
    bool ready = false;
    if (it != fwd_graphs_.end()) {
        cudaGraphExecUpdateResultInfo info{};
        ready = shape != 0 && it->second.shape == shape && cudaGraphExecUpdate(it->second.exec, graph, &info) == cudaSuccess;
        if (!ready) {
            (void)cudaGetLastError();
            (void)cudaGraphExecDestroy(it->second.exec);
            fwd_graphs_.erase(it);
        }
    }
    if (!ready) {
        cudaGraphExec_t exec = instantiate(graph, "forward");
        if (exec == nullptr) {
            (void)cudaGraphDestroy(graph);
            enqueue();
            return;
        }
        it = fwd_graphs_.emplace(key, FwdGraph{exec, shape}).first;
    }
    (void)cudaGraphDestroy(graph);
    JLLM_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream_));
}

uint64_t CudaBackend::graph_shape(cudaGraph_t graph) {
    // 0 (never a computed shape in practice) when the graph cannot be read: no update is tried.
    size_t n = 0;
    if (cudaGraphGetNodes(graph, nullptr, &n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    std::vector<cudaGraphNode_t> nodes(n);
    if (n > 0 && cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) {
        h ^= v;
        h *= 1099511628211ull;
    };
    mix(n);
    for (cudaGraphNode_t node : nodes) {
        cudaGraphNodeType t{};
        if (cudaGraphNodeGetType(node, &t) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        mix(static_cast<uint64_t>(t));
    }
    return h;
}

bool CudaBackend::masked_tail_graph(StepTail tail, int k) {
    const auto key = std::make_pair(tail, tail == StepTail::TopK ? k : 0);
    auto it = masked_tails_.find(key);
    if (it == masked_tails_.end()) {
        cudaGraphExec_t exec = capture_exec("masked tail", [&] { step_tail(tail, k, true); });
        if (exec == nullptr) return false;
        it = masked_tails_.emplace(key, exec).first;
    }
    JLLM_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
    return true;
}

void CudaBackend::decode_on_device(int32_t token, int pos, StepTail tail, int k, const TokenSelection& sel) {
    const bool maybe_masked = sel.allowed != nullptr || sel.mask_fn != nullptr;
    if (!maybe_masked && graph_usable() && decode_graph(token, pos, tail, k)) return;
    // The decode through the logits (one graph when it may be masked, so the GPU runs while the
    // host computes the mask), then the tail.
    if (!(maybe_masked && graph_usable() && decode_graph(token, pos, StepTail::None, 0))) {
        step("start");
        JLLM_CUDA_CHECK(cudaMemcpyAsync(tokens_dev_, &token, sizeof token, cudaMemcpyHostToDevice, stream_));
        run_layers(&token, tokens_dev_, 1, pos, nullptr);
        final_norm(0, 1);
        logits_rows(0, 1);
    }
    // The previous step has completed (forward_select synchronizes), so the pinned words are free.
    const uint32_t* mask = maybe_masked ? sel.mask_now() : nullptr;
    if (mask != nullptr) std::memcpy(mask_host_, mask, mask_words_ * sizeof(uint32_t));
    if (mask != nullptr && graph_usable() && masked_tail_graph(tail, k)) return;
    step_tail(tail, k, mask != nullptr);
}

}  // namespace jllm

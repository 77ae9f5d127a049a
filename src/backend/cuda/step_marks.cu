// backend/cuda/step_marks.cu — what runs after each step of the forward pass: the per-step
// profile (CudaOptions::profile: GPU time between consecutive events, summed per step name and
// printed when the backend is destroyed; shows where the time goes at a few microseconds per
// step) and the synchronizing error check (CudaOptions::sync_check). Both need graphs off.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend_impl.cuh"

namespace jllm {

void CudaBackend::step(const char* name) {
    if (opt_.sync_check) {
        // Reported at the step that faulted (a kernel's launch errors are caught at the launch).
        const cudaError_t e = cudaStreamSynchronize(stream_);
        if (e != cudaSuccess) cuda::throw_cuda_error(e, name, __FILE__, __LINE__);
    }
    if (!opt_.profile) return;
    if (prof_marks_.size() == prof_pool_.size()) {
        cudaEvent_t e = nullptr;
        JLLM_CUDA_CHECK(cudaEventCreate(&e));
        prof_pool_.push_back(e);
    }
    cudaEvent_t e = prof_pool_[prof_marks_.size()];
    JLLM_CUDA_CHECK(cudaEventRecord(e, stream_));
    prof_marks_.push_back({name, e});
}

void CudaBackend::prof_collect() {
    if (!opt_.profile) return;
    for (size_t i = 1; i < prof_marks_.size(); ++i) {
        float ms = 0.0f;
        JLLM_CUDA_CHECK(cudaEventElapsedTime(&ms, prof_marks_[i - 1].ev, prof_marks_[i].ev));
        auto& a = prof_sum_[prof_marks_[i].name];
        a.first += ms;
        a.second += 1;
    }
    prof_marks_.clear();
}

void CudaBackend::prof_report() const {
    if (!opt_.profile || prof_sum_.empty()) return;
    std::vector<std::pair<std::string, std::pair<double, long>>> v(prof_sum_.begin(), prof_sum_.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    double total = 0.0;
    for (const auto& e : v) total += e.second.first;
    std::fprintf(stderr, "[cuda profile] %-22s %10s %8s %10s %6s\n", "step", "total ms", "count", "avg us", "share");
    for (const auto& e : v) {
        std::fprintf(stderr, "[cuda profile] %-22s %10.3f %8ld %10.2f %5.1f%%\n", e.first.c_str(), e.second.first,
                     e.second.second, 1e3 * e.second.first / static_cast<double>(e.second.second),
                     100.0 * e.second.first / total);
    }
}

}  // namespace jllm

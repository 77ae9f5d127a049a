// tests/support/cuda_test_seams.cu — see cuda_test_seams.h.
#include "cuda_test_seams.h"

#include "backend/cuda/cuda_backend_impl.cuh"
#include "core/error.h"

namespace jllm {

namespace {
const CudaBackend& as_cuda(const Backend& backend) {
    const CudaBackend* b = dynamic_cast<const CudaBackend*>(&backend);
    JLLM_ASSERT_MSG(b != nullptr, "not a CUDA backend");
    return *b;
}
}  // namespace

int cuda_backend_graph_count(const Backend& backend) { return as_cuda(backend).graph_count(); }

int64_t cuda_backend_logits_head(const Backend& backend) { return as_cuda(backend).logits_head(); }

}  // namespace jllm

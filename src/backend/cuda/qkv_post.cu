// backend/cuda/qkv_post.cu — the step after the Q/K/V projections: bias, Qwen3's per-head
// Q/K-norm, RoPE and the KV-cache store, a warp per (token, head). The per-head code is
// qkv_post.cuh's, which the group-shared decode attention also folds in.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/qkv_post.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

// One warp per (token, head); heads [0, n_head) are Q, then n_head_kv K heads, then n_head_kv
// V heads. The head vector sits in shared memory because RoPE pairs cross lanes. E: values per
// lane (head_dim / 32 rounded up to 2, 4 or 8: no reads or arithmetic for lanes past the head).
template <int E>
__global__ void __launch_bounds__(WARP) kernel_qkv_post(QkvPostParams p) {
    __shared__ float buf[QKV_MAX_HEAD_DIM];
    const int t = blockIdx.x;
    const int hh = blockIdx.y;
    const int lane = threadIdx.x;
    const int hd = p.head_dim;
    int kind;  // 0 q, 1 k, 2 v
    int h;
    if (hh < p.n_head) {
        kind = 0;
        h = hh;
    } else if (hh < p.n_head + p.n_head_kv) {
        kind = 1;
        h = hh - p.n_head;
    } else {
        kind = 2;
        h = hh - p.n_head - p.n_head_kv;
    }
    const QkvHeadSrc src = qkv_head_src(p, kind, h, t, hd);
    const int pos = (p.pos_dev ? *p.pos_dev : p.pos0) + t;
    qkv_post_head<E>(p, src.vec, src.bias, src.nw, kind != 2, pos, lane, buf);
    for (int i = lane; i < hd; i += WARP) src.vec[i] = buf[i];
    if (kind != 0) kv_store_head(p, kind, h, pos, lane, buf);
}

}  // namespace

void launch_qkv_post(const QkvPostParams& p, void* stream) {
    JLLM_ASSERT(p.n_tok >= 1 && p.head_dim >= 2 && p.head_dim <= QKV_MAX_HEAD_DIM && p.head_dim % 2 == 0);
    JLLM_ASSERT(p.n_rot >= 0 && p.n_rot <= p.head_dim && p.n_rot % 2 == 0);
    JLLM_ASSERT(p.n_head_kv >= 1 && p.n_head % p.n_head_kv == 0);
    const dim3 grid(static_cast<unsigned>(p.n_tok), static_cast<unsigned>(p.n_head + 2 * p.n_head_kv));
    if (p.head_dim <= 2 * WARP) kernel_qkv_post<2><<<grid, WARP, 0, as_stream(stream)>>>(p);
    else if (p.head_dim <= 4 * WARP) kernel_qkv_post<4><<<grid, WARP, 0, as_stream(stream)>>>(p);
    else kernel_qkv_post<QKV_MAX_HEAD_DIM / WARP><<<grid, WARP, 0, as_stream(stream)>>>(p);
    JLLM_CUDA_LAUNCH_CHECK("kernel_qkv_post");
}

}  // namespace cuda
}  // namespace jllm

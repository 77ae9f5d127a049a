// backend/cuda/cuda_ops.h — the CUDA kernels' host entry points (`launch_<op>`) and their
// scalar CPU twins (`<op>_ref`), plus the few device-memory helpers tests need. No CUDA type
// appears here, so g++-compiled code (tests, the backend's host side) can include it.
//
// Conventions: every pointer passed to a launch_ function is device memory (or a mapped host
// pointer readable by the device); `stream` is a cudaStream_t passed as void* (nullptr = the
// legacy default stream). Launches are asynchronous; errors are checked at launch and, with
// after a synchronization (see cuda_check.h).
// Activations are fp32, row-major [n_tokens][width]. The _ref twins (tests/support: the test
// programs' library, not the engine's) take host memory and use the same formulas in scalar code
// (quant/quant_ref.h dequantizers, fp64 or fp32 sums).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/fp16.h"
#include "jllm_types.h"
#include "quant/quant_types.h"

namespace jllm {
namespace cuda {

// ---- device memory helpers (throw JllmError on failure) ----
int device_count();  // 0 when no device or no driver
int device_sm_count();  // SMs of the current device (cached per device)
// Blocks of `kernel` (a __global__ function's address) at `threads` threads and `smem` bytes of
// dynamic shared memory per block that the current device holds at once, all SMs together (cached).
int resident_blocks(const void* kernel, int threads, size_t smem = 0);
// Per-thread stack the engine's kernels fit in (the deepest, ptxas's "stack frame", is 104 bytes
// on sm_90). The driver reserves this much local memory for every thread an SM can hold, on every
// SM, from context creation: at its default of 1,024 bytes that is half of an H200's context (264
// of 527 MiB; 12 MiB on an 8-SM Orin). A kernel that needs more still runs: the driver raises the
// limit at its launch.
constexpr size_t THREAD_STACK_BYTES = 256;
// Lowers the current device's per-thread stack limit to THREAD_STACK_BYTES where it is still the
// driver's default (nobody in the process has chosen one); returns the limit it leaves.
size_t fit_thread_stack();
size_t thread_stack_limit();  // the current device's per-thread stack limit (bytes)
// The current device's used memory, every process's and the driver's (total - free), creating the
// context if there is none yet.
int64_t device_used_bytes();
void* dev_alloc(size_t bytes);
void dev_free(void* p) noexcept;
void dev_memset(void* p, int byte, size_t bytes);
void upload(void* dst, const void* src, size_t bytes);
void download(void* dst, const void* src, size_t bytes);
void synchronize();

// ---- device layout of a weight matrix ----
// Rows: the file's rows (cols elements, row_size(type, cols) bytes each). Tiles (Q4_K and Q6_K
// whose rows are a multiple of 8; the backend's copied weights): tiles of 8 rows x 1 block that
// gather the rows' parts by kind (weight_tiles.cuh), so every part is 16-byte aligned and the
// decode GEMV's loads are aligned and contiguous across a warp. Same size; every kernel that
// reads weights takes both. A GgmlType alone means the file's rows.
enum class WeightLayout : uint8_t { Rows, Tiles };
struct WeightFormat {
    GgmlType type;
    WeightLayout layout;
    WeightFormat(GgmlType t, WeightLayout l = WeightLayout::Rows) : type(t), layout(l) {}  // implicit on purpose
    bool tiled() const { return layout == WeightLayout::Tiles; }
};
// Whether a rows x cols matrix of `type` can take the tiled layout.
bool tiles_fit(GgmlType type, int64_t rows, int64_t cols);
// src (the file's rows x cols) -> dst in the tiled layout (same size, not overlapping), and back.
void to_tiles(GgmlType type, const void* src, void* dst, int64_t rows, int64_t cols);
void from_tiles(GgmlType type, const void* src, void* dst, int64_t rows, int64_t cols);
// The kernels' decoder of the tiled layout on the host (tests; tests/support defines the _host
// decoders): elements [32c, 32c + 32) of row r.
void dequant_chunk_tiled_host(GgmlType type, const void* base, int64_t cols, int64_t r, int64_t c, float* out);
// The GEMM's staging of one tile (its 16-byte units permuted over the banks) and the decoder of
// chunk j of row i from the staged copy, on the host (tests).
void stage_tile_host(GgmlType type, const void* tile, void* staged);
// The register-decoding GEMMs' staging of the same tile by its 16 copying threads (tile_copy_unit);
// throws unless every unit is copied once.
void stage_tile_by_threads_host(GgmlType type, const void* tile, void* staged);
void dequant_chunk_staged_host(GgmlType type, const void* staged, int i, int j, float* out);

// ---- matrix products: y[n_tok][rows] = W[rows][cols] x[n_tok][cols] ----
// W in either layout (above); cols is a multiple of 32 (every block size divides it or equals
// 256 for k-quants, then cols % 256 == 0).
enum class MatOut {
    Store,   // y = W x
    Add,     // y += W x (residual add fused)
    SwiGLU,  // y = silu(W x) * (W2 x): W is the gate, W2 the up projection (same type and shape;
             // otherwise two Store products and launch_swiglu)
};
bool matmul_type_supported(GgmlType type);
// The kernels' own chunk dequantizer (chunk_dequant.cuh) run on the host: elements
// [32c, 32c + 32) of `row` into out[32]. `row` 16-byte aligned. For tests without a GPU
// (tests/support defines it).
void dequant_chunk_host(GgmlType type, const void* row, int64_t c, float* out);
// Decode GEMV: n_tok <= GEMV_MAX_TOKENS; a warp per row, the weight read once for all tokens.
constexpr int GEMV_MAX_TOKENS = 4;
void launch_gemv(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                 int n_tok, float* y, MatOut out, void* stream);
// Prefill GEMM on tensor cores (mma.sync m16n8k16): any n_tok; weight tiles dequantized to
// fp16 in shared memory, activations rounded to fp16 (saturated at +-65504), fp32 sums.
// With a work buffer (gemm_work_floats(n_tok, rows) floats), a grid too small to fill the GPU
// is split over the columns (up to GEMM_MAX_SPLIT parts, as many as the buffer holds; a SwiGLU
// part keeps gate and up sums, twice a plain one) and the partial sums are added in a fixed order
// by a second kernel (deterministic), which also applies the SwiGLU.
constexpr int GEMM_MAX_SPLIT = 16;
size_t gemm_work_floats(int n_tok, int64_t rows);
// The split-K work kept for batches of up to n_batch tokens over products of up to `rows` rows:
// GEMM_BATCH_SPLIT parts for up to 64 tokens (more for products of fewer rows), two parts for a
// full batch (launch_gemm lowers the split to what fits).
constexpr int GEMM_BATCH_SPLIT = 8;
size_t gemm_work_floats_for_batch(int n_batch, int64_t rows);
// How launch_gemm runs a product: its token tile (64, or 128 for grids that fill the GPU without a
// split) and split-K parts (1: none; the fewest that minimize waves x steps per block, within
// GEMM_MAX_SPLIT and the work buffer's work_floats, 0 without one).
struct GemmPlan {
    int bn = 64;
    int split = 1;
};
GemmPlan gemm_plan(int64_t rows, int64_t cols, int n_tok, MatOut out, size_t work_floats);
// Up to GEMM_MAX_SEG matrices of one format and width sharing the input (Q, K, V): y_i = W_i x
// (Store). Tiled Q4_K/Q6_K run as one grid of kernel_gemm_small (the segments' row blocks
// side by side; split parts reduced per segment); other formats a launch_gemm per matrix.
constexpr int GEMM_MAX_SEG = 3;
void launch_gemm_multi(WeightFormat fmt, int n_seg, const void* const* w, const int64_t* rows, int64_t cols,
                       const uint16_t* x, int n_tok, float* const* y, void* stream, float* work = nullptr,
                       size_t work_floats = 0, const void* xq8 = nullptr);
// On tiled Q4_K/Q6_K (gemm_takes_small: every batch but a Q6_K SwiGLU product of more than
// GEMM_SMALL_CHUNK tokens), launch_gemm(_multi) takes a kernel that decodes the weights into
// the mma fragments in registers, in chunks of up to GEMM_SMALL_CHUNK tokens (grid y), with
// half2 arithmetic: each weight is
// fp16(q * fp16(d * sc) - fp16(dmin * m)) (Q6_K: fp16((q - 32) * fp16(d * sc))), one rounding of
// the exact value, where gemm_f16_ref has fp16(d * sc * q - dmin * m); its twin is
// gemm_small_ref. (A warp whose weights could leave fp16's range, which no quantizer produces from
// a real model, takes gemm_f16_ref's saturated values.)
constexpr int GEMM_SMALL_CHUNK = 64;
bool gemm_takes_small(WeightFormat fmt, int n_tok, MatOut out);
// x: the activations as fp16 ([n_tok][cols], 16-byte aligned), from launch_to_f16. xq8 (optional):
// the same activations in the act_q8k layout (launch_quantize_q8k of x); where given and
// gemm_takes_s8(fmt), the product runs on int8 tensor cores from it instead (below).
void launch_gemm(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const uint16_t* x,
                 int n_tok, float* y, MatOut out, void* stream, float* work = nullptr, size_t work_floats = 0,
                 const void* xq8 = nullptr);
// The GEMM's input: n floats (a multiple of 4; x 16-byte, xh 8-byte aligned) as fp16, rounded to
// nearest and saturated at +-65504 (round_f16_sat), so an outlier cannot become inf.
void launch_to_f16(const float* x, int64_t n, uint16_t* xh, void* stream);
// Picks GEMV (on x) or GEMM (on xh, x as fp16 by launch_to_f16; may be null up to
// GEMV_MAX_TOKENS tokens) by n_tok.
void launch_matmul(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                   const uint16_t* xh, int n_tok, float* y, MatOut out, void* stream, float* work = nullptr,
                   size_t work_floats = 0, const void* xq8 = nullptr);
void matmul_ref(GgmlType type, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                int n_tok, float* y, MatOut out);
// Twin of the register-decoding GEMM (gemm_takes_small): its weights, activations rounded to fp16,
// fp64 sums.
void gemm_small_ref(GgmlType type, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                    int n_tok, float* y, MatOut out);
// Twin of launch_gemm: dequantized weights and activations rounded to fp16 as the kernel does,
// fp64 sums.
void gemm_f16_ref(GgmlType type, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                  int n_tok, float* y, MatOut out);
// Twin of launch_gemm(fmt, ...) as it runs n_tok tokens: gemm_small_ref where gemm_takes_small,
// else gemm_f16_ref (w, w2: the file's rows; fmt only picks the kernel).
void gemm_ref(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x, int n_tok,
              float* y, MatOut out);
float round_f16_sat(float v);  // the GEMM's input rounding: fp16, saturated at +-65504

// ---- the int8 prefill GEMM (tiled Q4_K) and its input ----
// act_q8k: `n_tok` rows of `cols` (a multiple of 256) fp16 activations (launch_to_f16's) as 8-bit
// integers by 256: int8 q [n_tok][cols], then at the next 16-byte boundary (act_q8k_records_at)
// one 48-byte record per 256 values [n_tok][cols / 256]: for c = 0..3 the fp16 quartet (hi_2c,
// hi_2c+1, lo_2c, lo_2c+1), where S_j, the sum of q over values [32j, 32j + 32), is 64 hi_j + lo_j
// with 0 <= lo_j < 64; then d as fp32; then 12 zero bytes. d = amax / 127 (fp32) of the 256 values,
// q = round-half-even(x * (1 / d)) clamped to +-127 (all zero when amax = 0): Q8_K's block and scale.
size_t act_q8k_records_at(int n_tok, int64_t cols);
size_t act_q8k_bytes(int n_tok, int64_t cols);
// xh (fp16, 16-byte aligned) -> xq (act_q8k, 16-byte aligned).
void launch_quantize_q8k(const uint16_t* xh, int n_tok, int64_t cols, void* xq, void* stream);
// launch_to_f16 and launch_quantize_q8k of its output in one launch: x (fp32) -> xh and xq.
void launch_to_f16_q8k(const float* x, int n_tok, int64_t cols, uint16_t* xh, void* xq, void* stream);
// Host twin of launch_to_f16 followed by launch_quantize_q8k (a host buffer of act_q8k_bytes).
void quantize_q8k_ref(const float* x, int n_tok, int64_t cols, void* xq);
// The int8 GEMM takes tiled Q4_K: every 32-value sub-block's integer dot product of the 4-bit codes
// and q exact, scaled by the 6-bit sub-block scale into an exact integer per 256 columns, the
// minima's sum_j m_j S_j exact; per 256 columns acc = fma(d_x, fma(-dmin, msum, d * float(isum)),
// acc) in fp32. Its twin, gemm_s8_ref, repeats that order (bit for bit without split-K).
bool gemm_takes_s8(WeightFormat fmt);
// The engine gives a product the int8 GEMM from this many tokens (CudaOptions::gemm_int8 and
// gemm_int8_min_tokens): every batch past the GEMV, since the kernels that write the fp16 input
// write the act_q8k copy too (pp5-pp512 4-17% faster than the fp16 GEMM's, docs/gpu_speed_notes.md).
constexpr int GEMM_S8_MIN_TOKENS = GEMV_MAX_TOKENS + 1;
// w, w2: the file's Q4_K rows; xq: a host act_q8k buffer. abs_sum (optional, [n_tok][rows]; SwiGLU:
// the gate's): sum over the 256-column blocks of |d_x * fma(...)|, the scale of the fp32 rounding.
void gemm_s8_ref(const void* w, const void* w2, int64_t rows, int64_t cols, const void* xq, int n_tok, float* y,
                 MatOut out, float* abs_sum = nullptr);

// ---- the int8 tensor-core GEMV (tiled Q4_K on act_q8k, 1..GEMV_S8_MAX_TOKENS tokens) ----
// The int8 GEMM's arithmetic per 256 columns in a GEMV's grid (gemv_s8.cu): every token count up
// to 8 runs the same instructions (the tokens are the mma's columns). A matrix's columns are split
// over k_split warps per 16 rows, each adding its blocks kp, kp + k_split, .. in order from zero,
// the parts then added in kp order; with the split fixed per matrix (gemv_s8_split), row t of an
// n-token product is the one-token product of token t bit for bit. Its twin is gemv_s8_ref. It
// takes the matrices the int8 GEMM takes (gemm_takes_s8: tiled Q4_K).
constexpr int GEMV_S8_MAX_TOKENS = 8;
constexpr int GEMV_S8_MAX_SPLIT = 16;
constexpr int GEMV_S8_MAX_SEG = 3;
// The split of a matrix of cols columns: about blocks_per_warp 256-column blocks a warp, at most
// GEMV_S8_MAX_SPLIT warps per 16 rows.
int gemv_s8_split(int64_t cols, int blocks_per_warp = 2);
// y [n_tok][rows] from tiled Q4_K w (SwiGLU: gate w, up w2) and xq (act_q8k of n_tok tokens).
// yq (SwiGLU only, rows a multiple of 32; not xq): y's act_q8 copy too, quantized by halves (each
// warp's 16 rows are a half), bit for bit as quantize_act_ref(y, .., true): the input of the tiled
// dp4a GEMV (launch_gemv_q8), as launch_gemv_q8's yq_halves.
void launch_gemv_s8(const void* w, const void* w2, int64_t rows, int64_t cols, const void* xq, int n_tok,
                    int k_split, float* y, MatOut out, void* stream, void* yq = nullptr);
// Up to GEMV_S8_MAX_SEG matrices of one width sharing the input (Q, K, V) in one grid, each
// segment's rows as launch_gemv_s8 forms them (SwiGLU: one segment, w2 its up projection).
void launch_gemv_s8_multi(int n_seg, const void* const* w, const void* w2, const int64_t* rows, int64_t cols,
                          const void* xq, int n_tok, int k_split, float* const* y, MatOut out, void* stream,
                          void* yq = nullptr);
// Twin of launch_gemv_s8 on the file's Q4_K rows and a host act_q8k buffer, bit for bit (SwiGLU:
// up to the device's exponential); with k_split 1 it is gemm_s8_ref.
void gemv_s8_ref(const void* w, const void* w2, int64_t rows, int64_t cols, const void* xq, int n_tok, int k_split,
                 float* y, MatOut out);

// ---- 8-bit activations: the input of the dp4a GEMV ----
// `n_tok` rows of `cols` (a multiple of 32) values in blocks of 32, in one buffer: int8 q
// [n_tok][cols], then (at the next 16-byte boundary, act_q8_scale_offset) one float4 per block
// [n_tok][cols / 32] = (d0, d0 * sum(q[0..15]), d1, d1 * sum(q[16..31])): each half's scale, where
// d = amax / 127 (fp32), q = round-half-even(x * (1 / d)) clamped to +-127 (all zero when amax =
// 0). A block is quantized as one (d0 = d1, amax of its 32 values) except by halves (each half's
// own amax: the one-token SwiGLU product's 8-bit copy, launch_gemv_q8's yq_halves), which only
// the tiled GEMV reads (the others take d0 for the whole block).
size_t act_q8_scale_offset(int n_tok, int64_t cols);
size_t act_q8_bytes(int n_tok, int64_t cols);
void launch_quantize_act(const float* x, int n_tok, int64_t cols, void* xq, void* stream);
// Host twin (a host buffer of act_q8_bytes); halves: each 16-value half quantized on its own.
void quantize_act_ref(const float* x, int n_tok, int64_t cols, void* xq, bool halves = false);
// RMSNorm whose output (also written to y as fp32 when y is not null) is quantized into xq (act_q8)
// and, where xq8k is not null (n a multiple of 256, 16-byte aligned), into xq8k (act_q8k: the output
// rounded to fp16 as launch_to_f16 rounds it, then quantized as launch_quantize_q8k quantizes; the
// int8 GEMV's input); either may be null, not both.
void launch_rmsnorm_q8(const float* x, const float* w, float* y, void* xq, int n_rows, int64_t n, float eps,
                       void* stream, void* xq8k = nullptr);

// ---- decode GEMV on 8-bit activations (dp4a): the quantized weight types ----
// y[n_tok][rows] (= / += / SwiGLU as MatOut) from W [rows][cols] and xq (act_q8 layout, n_tok
// rows of cols). Weights are decoded per 32-element chunk to small integers with a scale and an
// offset per 16 (w = a * q + b, the dequantized value), so y = sum a * d * (q . xq) + b * d * sum(xq).
bool gemv_q8_type_supported(GgmlType type);  // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K .. Q6_K
// yq (not null; rows a multiple of 32; not xq): y also quantized there (act_q8 layout, n_tok rows
// of `rows`), bit for bit as launch_quantize_act would — by the product itself for a SwiGLU on
// tiled weights, else by launch_quantize_act after it. yq_halves (yq read only by the tiled
// GEMV): the product may quantize by halves instead (gemv_q8_yq_by_halves: where its one-token
// blocks of four groups would not fit one wave), bit for bit as quantize_act_ref(.., true). On
// tiled weights each token's row of y and yq is the same for every n_tok (one token's launch
// decides the warps per group and the copy's mode), so a verification's rows are one-token steps'.
void launch_gemv_q8(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const void* xq,
                    int n_tok, float* y, MatOut out, void* stream, void* yq = nullptr, bool yq_halves = false);
// Whether the SwiGLU product of this shape with yq_halves quantizes y by halves, at every token
// count (the device's answer: it depends on resident blocks; false without a device, where no
// product runs).
bool gemv_q8_yq_by_halves(WeightFormat fmt, int64_t rows, int64_t cols);
// Rows r (a multiple of 256, near `want`) such that launch_gemv_q8 (one token, Store) of rows
// [0, r) and then of [r, rows) gives each row the bits one launch of all rows would; 0 where
// the kernel would differ (only the tiled layout is split).
int64_t gemv_q8_split_rows(WeightFormat fmt, int64_t rows, int64_t cols, int64_t want);
// Up to GEMV_Q8_MAX_SEG matrices of one width sharing the input (Q, K, V) in one launch:
// y_i = W_i x (Store). fmt: each matrix's format, all one (gemv_q8_multi_takes), or on the tiled
// layout Q4_K matrices and a last one of Q6_K (Q4_K_M's Q, K and V where V has more bits).
constexpr int GEMV_Q8_MAX_SEG = 3;
bool gemv_q8_multi_takes(const WeightFormat* fmt, int n_seg);
void launch_gemv_q8_multi(const WeightFormat* fmt, int n_seg, const void* const* w, const int64_t* rows,
                          float* const* y, int64_t cols, const void* xq, int n_tok, void* stream);
// Twin: dequantized weights (quant_ref) times the dequantized activations (d * q), fp64 sums.
void gemv_q8_ref(GgmlType type, const void* w, const void* w2, int64_t rows, int64_t cols, const void* xq,
                 int n_tok, float* y, MatOut out);
// The tiled GEMV's per-lane arithmetic (load, dot) run on the host over every lane of every row
// (tests; tests/support defines it and chunk_q8_host): y[n_tok][rows] (Store) from tiles (rows a
// multiple of 8) and xq (act_q8, 16-byte aligned).
void gemv_q8_tiled_host(GgmlType type, const void* tiles, int64_t rows, int64_t cols, const void* xq, int n_tok,
                        float* y);
// The int8 GEMV's per-lane pieces (gemv_s8.cuh) run on the host over every lane of every warp, the
// mma emulated from its fragment layout (tests; tests/support defines it): y[n_tok][rows] (Store)
// from tiled Q4_K (rows a multiple of 8) and xq (act_q8k), k_split as launch_gemv_s8's.
void gemv_s8_lanes_host(const void* tiles, int64_t rows, int64_t cols, const void* xq, int n_tok, int k_split,
                        float* y);
// The kernels' int8 chunk decoder run on the host (tests): q[32] as integers, a[2], b[2].
void chunk_q8_host(GgmlType type, const void* row, int64_t c, int8_t* q, float* a, float* b);

// ---- SwiGLU when gate and up differ in type: y[i] = silu(g[i]) * u[i]; y may alias g ----
void launch_swiglu(const float* g, const float* u, float* y, int64_t n, void* stream);
void swiglu_ref(const float* g, const float* u, float* y, int64_t n);

// ---- embedding: out[n_tok][n_embd] = dequantized rows tokens[t] of table [n_vocab][n_embd] ----
// tokens: device int32 [n_tok]. Ids outside [0, n_vocab) give rows of NaN (the host checks ids).
bool embed_type_supported(GgmlType type);
void launch_embed(WeightFormat fmt, const void* table, int64_t n_vocab, int64_t n_embd, const int32_t* tokens,
                  int n_tok, float* out, void* stream);
void embed_ref(GgmlType type, const void* table, int64_t n_vocab, int64_t n_embd, const int32_t* tokens, int n_tok,
               float* out);

// ---- RMSNorm: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, rows of n; y may alias x ----
// yh (optional): y as fp16 too, rounded as launch_to_f16 rounds (the GEMM's input). xq8 (optional,
// with yh; n a multiple of 256, every pointer 16-byte aligned): yh's act_q8k copy too, the bytes
// launch_quantize_q8k writes from it.
void launch_rmsnorm(const float* x, const float* w, float* y, uint16_t* yh, int n_rows, int64_t n, float eps,
                    void* stream, void* xq8 = nullptr);
void rmsnorm_ref(const float* x, const float* w, float* y, int n_rows, int64_t n, float eps);

// ---- after the Q/K/V projections: bias, Qwen3 Q/K-norm, RoPE, KV store ----
struct QkvPostParams {
    float* q = nullptr;        // [n_tok][n_head * head_dim], rotated in place
    float* k = nullptr;        // [n_tok][n_head_kv * head_dim], rotated in place
    float* v = nullptr;        // [n_tok][n_head_kv * head_dim]
    const float* bq = nullptr; // [n_head * head_dim] or null (qwen2 biases)
    const float* bk = nullptr; // [n_head_kv * head_dim] or null
    const float* bv = nullptr; // [n_head_kv * head_dim] or null
    const float* q_norm = nullptr;  // [head_dim] or null (qwen3 per-head RMSNorm)
    const float* k_norm = nullptr;  // [head_dim] or null
    const float* inv_freq = nullptr;  // [n_rot / 2] (backend/cpu/rope.h rope_inv_freq)
    int n_rot = 0;
    bool neox = false;         // pairs (i, i + n_rot/2) instead of (2i, 2i+1)
    int n_tok = 0, pos0 = 0;
    int n_head = 0, n_head_kv = 0, head_dim = 0;  // head_dim <= 256, even
    float eps = 1e-6f;
    KvType kv_type = KvType::Int8;
    // Q and K rotated after RoPE by the normalized Walsh-Hadamard transform when > 0 (INT8
    // caches of a power-of-two head: backend/kv_quant.h kv_k_rotated), this being the transform's
    // scale, kv_rotation_scale(head_dim); 0: no rotation.
    float k_rot_scale = 0.0f;
    const int* pos_dev = nullptr;  // if set, pos0 is read from device memory (graph replay)
    // Layer cache, [n_ctx][n_head_kv][head_dim] int8 (or fp16); scales [n_ctx][n_head_kv] fp16
    // (INT8 only): d = amax/127 rounded to fp16, q = round-half-even(x/d) clamped to +-127.
    void* k_cache = nullptr;
    void* v_cache = nullptr;
    Half* k_scale = nullptr;
    Half* v_scale = nullptr;
};
void launch_qkv_post(const QkvPostParams& p, void* stream);
void qkv_post_ref(const QkvPostParams& p);  // host pointers throughout

// ---- causal grouped-query attention over the layer cache ----
// Which kernels launch_attention may choose (CudaOptions: measurement knobs; the defaults are
// what the engine runs). Simt: the fp32 SIMT kernels only (no tensor-core prefill, no group-shared
// decode kernel), for comparisons. decode_warps: warps per block of the group-shared decode kernel
// (1, 2 or 4; 32 x warps keys per chunk and at least per split).
enum class AttnKernel { Auto, Simt };
constexpr int ATTN_DECODE_WARPS_DEFAULT = 4;
struct AttnChoice {
    AttnKernel kernel = AttnKernel::Auto;
    int decode_warps = ATTN_DECODE_WARPS_DEFAULT;
};

// Token t (position pos0 + t) attends to positions 0..pos0+t. q [n_tok][n_head * head_dim],
// out [n_tok][n_head * head_dim]; head h reads kv head h / (n_head / n_head_kv).
// head_dim a multiple of 32 and <= 256.
struct AttentionParams {
    const float* q = nullptr;
    float* out = nullptr;
    const void* k_cache = nullptr;  // as QkvPostParams
    const void* v_cache = nullptr;
    const Half* k_scale = nullptr;
    const Half* v_scale = nullptr;
    KvType kv_type = KvType::Int8;
    int n_tok = 0, pos0 = 0;
    int n_head = 0, n_head_kv = 0, head_dim = 0;
    // Decode (n_tok = 1) split over the KV length: the partial results go to `work`
    // ([n_tok][n_head][max_split][head_dim + 2] floats), then a combine kernel merges them.
    // Keys per split: max(ATTN_MIN_SPLIT_KEYS, the KV length / max_split rounded up to 32).
    // The prefill attention on tensor cores splits the keys the same way where its grid is small
    // (attention_mma_split), into at most work_floats floats of `work`, at most max_split splits.
    float* work = nullptr;
    int max_split = 0;  // 0 or 1: no split
    size_t work_floats = 0;  // floats at `work`, read by the prefill split and decode_rows (0: no prefill split)
    // Graph mode: pos0 is read from device memory at run time (CUDA-graph replay of a decode
    // step); the grid is then sized for max_split and unused splits exit at once.
    const int* pos_dev = nullptr;
    // Also write `out` as 8-bit activations (act_q8 layout, n_tok rows of n_head * head_dim)
    // when this is not null (by the combine kernel with a split, by the group-shared decode
    // kernel without one, else by launch_quantize_act).
    void* out_q8 = nullptr;
    // The Q/K/V post of these tokens (host struct, read at launch; its q, n_tok, caches and
    // pos_dev those above) when not null: the group-shared decode kernel folds it in where a
    // block's heads (its query heads, then K and V) take one round of its warps (each block
    // computes its query heads, the block holding the new position also stores its K/V head),
    // otherwise launch_qkv_post runs first. q then holds the projections, which stay unchanged
    // when folded.
    const QkvPostParams* post = nullptr;
    // A few queries as decode steps (speculative decoding's verification, n_tok <= GEMV_MAX_TOKENS):
    // query t at position pos0 + t (pos_dev[t] in graph mode, pos_dev holding n_tok consecutive
    // positions) over keys 0..pos0+t, each with the split plan and heads per block a decode step
    // at that position has, all in one launch of the group-shared decode kernel (grid y: the
    // query) and one combine; `work` then holds n_tok rows (attention_work_floats(n_tok, ..),
    // checked against work_floats). The post (n_tok tokens) folds in where a step's would and a
    // block's query heads plus K and V at each new position among its keys (which it also
    // stores) take at most two rounds of its warps; else its own kernel first. Heads the
    // group-shared kernel does not serve: the post, then one decode launch per query. The same
    // bits as a step per query.
    bool decode_rows = false;
    AttnChoice choice;
};
// Decode attention splits of the generic kernel: one 32-key tile at least. The group-shared
// decode kernel (INT8 cache with head_dim 64/128/256, FP16 cache with 128/256; 1, 2, 3, 4, 6 or 8
// query heads per KV head) takes one chunk of 32 x AttnChoice::decode_warps keys at least.
constexpr int ATTN_MIN_SPLIT_KEYS = 32;
constexpr int ATTN_MAX_SPLIT = 256;
// Fewest keys per decode split of the kernel launch_attention picks for these heads (sizes the
// engine's max_split: the KV capacity over this).
int attention_split_keys(KvType kv, int n_head, int n_head_kv, int head_dim, const AttnChoice& choice);
// Query heads per block of the group-shared decode kernel, and whether it folds in the Q/K/V
// post: the group (one block per KV head and split) where the post folds in that way (group + 2 <=
// its warps); else halved until a block's heads, K and V take one round of its warps (the post
// folds in: several blocks per KV head, each scoring fewer heads over the same keys). Then, where
// that grid (query heads / heads per block x splits) exceeds two blocks per SM, twice the heads
// (up to 4; the post in two rounds, each K/V chunk copied by half as many blocks); else halved
// further while the grid stays within two blocks per SM (the post folded where the block's heads,
// K and V still take one round). qwen3-4b on the H200 (group 4, 132 SMs): one query head per
// block up to 8 splits (1,024 keys), two up to 16, four beyond. warps: AttnChoice::decode_warps.
struct DecodeHeads {
    int per_block;
    bool folds_post;
};
DecodeHeads attention_decode_heads(int group, int n_head, int n_split, int sms, int warps);
size_t attention_work_floats(int n_tok, int n_head, int head_dim, int max_split);
void launch_attention(const AttentionParams& p, void* stream);
// Prefill (n_tok > 1, position on the host, not decode_rows) with head_dim 64 or 128 runs on tensor cores
// (attention_mma.cu: Q rounded to fp16, or to int8 per row over the INT8 cache, P to fp16, sums in
// fp32) unless AttnChoice::kernel is Simt.
bool attention_mma_supported(const AttentionParams& p);
// Whether that prefill scores K in int8 (the INT8 cache): each query row (one token's head)
// quantized to int8 at max |q| / 127, round to nearest even, m16n8k32 int8 products.
bool attention_mma_int8_queries(const AttentionParams& p);
// Decode over the INT8 or FP16 cache with head_dim 128 or 256 scores and sums V on tensor cores (Q
// and the probabilities rounded to fp16, sums in fp32), unless AttnChoice::kernel is Simt.
bool attention_decode_tensor_cores(const AttentionParams& p);
// The tensor-core prefill's split of the keys (flash-decoding for query tiles), where its grid of
// 128-row blocks leaves SMs idle: as many splits as fill one wave of blocks on `sms` SMs, of at
// least 4 key tiles each, at most max_split and what work_floats holds; n_split 1: none. Each split
// leaves its rows unnormalized in `work` and the decode attention's combine merges them.
struct MmaSplit {
    int n_split = 1;
    int per_split = 0;  // keys per split, a multiple of the kernel's 64-key tile
};
MmaSplit attention_mma_split(const AttentionParams& p, int sms);
// Work floats the prefill split needs at most on `sms` SMs (one wave of blocks of 128 rows).
size_t attention_mma_work_floats(int head_dim, int sms);
void launch_attention_mma(const AttentionParams& p, const MmaSplit& sp, void* stream);
void attention_ref(const AttentionParams& p);  // host pointers

// ---- greedy sampling: out[0] = index of the first maximum of x[n] ----
// work: argmax_work_bytes() of device memory, zeroed once before the first call (every call
// leaves it zero again).
size_t argmax_work_bytes();
void launch_argmax(const float* x, int64_t n, void* work, int32_t* out, void* stream);
int32_t argmax_ref(const float* x, int64_t n);

// ---- token mask: x[i] = -inf for every i whose bit (bit i % 32 of word i / 32) is clear ----
// Before argmax / top-k, a grammar's mask makes them select among the allowed tokens.
void launch_apply_token_mask(float* x, int64_t n, const uint32_t* mask, void* stream);
void apply_token_mask_ref(float* x, int64_t n, const uint32_t* mask);

// ---- top-k: the k largest of x[n], best first (ties to the lower index; NaN counts as -inf) ----
// Rounds over slices of 8,192 values, a block each, keeping each slice's k best, until one block
// holds every candidate (two rounds for 151,936 values): a block finds its k-th largest value by
// radix selection over the values' 32-bit order keys in shared memory (three counting passes of
// 11, 11 and 10 bits), keeps the k in index order, and the last round sorts them. `work` holds
// topk_work_floats(n, k) floats. Sampling from these k is exact for top-k sampling.
constexpr int TOPK_MAX = 128;
size_t topk_work_floats(int64_t n, int k);
void launch_topk(const float* x, int64_t n, int k, float* work, float* vals, int32_t* ids, void* stream);
void topk_ref(const float* x, int64_t n, int k, float* vals, int32_t* ids);

}  // namespace cuda
}  // namespace jllm

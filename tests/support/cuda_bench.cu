// tests/support/cuda_bench.cu — the timing helpers of cuda_bench.h: device description, stream,
// events, device-to-device copy and the launch gate (a one-thread kernel polling a flag in
// mapped host memory).
#include <string>

#include "cuda_bench.h"
#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }

// Nanoseconds of the GPU's global timer (the same clock on every SM).
__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// flags: [0] set to non-zero by the host to open, [1] incremented here when the wait timed out.
__global__ void kernel_gate(volatile int* flags, unsigned long long timeout_ns) {
    const unsigned long long t0 = global_ns();
    while (flags[0] == 0) {
        if (global_ns() - t0 > timeout_ns) {
            flags[1] = flags[1] + 1;
            __threadfence_system();
            return;
        }
        __nanosleep(256);
    }
}

}  // namespace

DeviceInfo device_info(int device) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        throw JllmError(strfmt("no CUDA device: cudaGetDeviceCount failed: %s (%s)", cudaGetErrorName(e),
                               cudaGetErrorString(e)));
    }
    if (device < 0 || device >= n) throw JllmError(strfmt("CUDA device %d requested, %d present", device, n));
    JLLM_CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop;
    JLLM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    DeviceInfo d;
    d.index = device;
    d.name = prop.name;
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    d.sm_count = prop.multiProcessorCount;
    d.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
    JLLM_CUDA_CHECK(cudaDeviceGetAttribute(&d.sm_clock_khz, cudaDevAttrClockRate, device));
    JLLM_CUDA_CHECK(cudaDeviceGetAttribute(&d.mem_clock_khz, cudaDevAttrMemoryClockRate, device));
    JLLM_CUDA_CHECK(cudaDeviceGetAttribute(&d.bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, device));
    JLLM_CUDA_CHECK(cudaMemGetInfo(&d.free_bytes, &d.total_bytes));
    JLLM_CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
    JLLM_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
    return d;
}

std::string cuda_version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

BenchStream::BenchStream() {
    cudaStream_t s = nullptr;
    JLLM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    stream_ = s;
}
BenchStream::~BenchStream() {
    if (stream_) (void)cudaStreamDestroy(as_stream(stream_));
}
void BenchStream::sync() { JLLM_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream_))); }

EventTimer::EventTimer() {
    cudaEvent_t a = nullptr, b = nullptr;
    JLLM_CUDA_CHECK(cudaEventCreate(&a));
    start_ = a;
    JLLM_CUDA_CHECK(cudaEventCreate(&b));
    stop_ = b;
}
EventTimer::~EventTimer() {
    if (start_) (void)cudaEventDestroy(as_event(start_));
    if (stop_) (void)cudaEventDestroy(as_event(stop_));
}
void EventTimer::start(void* stream) { JLLM_CUDA_CHECK(cudaEventRecord(as_event(start_), as_stream(stream))); }
void EventTimer::stop(void* stream) { JLLM_CUDA_CHECK(cudaEventRecord(as_event(stop_), as_stream(stream))); }
double EventTimer::elapsed_ms() {
    JLLM_CUDA_CHECK(cudaEventSynchronize(as_event(stop_)));
    float ms = 0;
    JLLM_CUDA_CHECK(cudaEventElapsedTime(&ms, as_event(start_), as_event(stop_)));
    return ms;
}

LaunchGate::LaunchGate() {
    void* h = nullptr;
    JLLM_CUDA_CHECK(cudaHostAlloc(&h, 2 * sizeof(int), cudaHostAllocMapped));
    host_flags_ = static_cast<int*>(h);
    host_flags_[0] = 1;
    host_flags_[1] = 0;
    void* d = nullptr;
    JLLM_CUDA_CHECK(cudaHostGetDevicePointer(&d, h, 0));
    dev_flags_ = static_cast<int*>(d);
}
LaunchGate::~LaunchGate() {
    if (host_flags_) (void)cudaFreeHost(host_flags_);
}
void LaunchGate::hold(void* stream, double timeout_ms) {
    static_cast<volatile int*>(host_flags_)[0] = 0;
    const auto timeout_ns = static_cast<unsigned long long>(timeout_ms * 1e6);
    kernel_gate<<<1, 1, 0, as_stream(stream)>>>(dev_flags_, timeout_ns);
    // Not JLLM_CUDA_LAUNCH_CHECK: its optional synchronization would wait for release().
    JLLM_CUDA_CHECK(cudaGetLastError());
}
void LaunchGate::release() { static_cast<volatile int*>(host_flags_)[0] = 1; }
int LaunchGate::timeouts() const { return static_cast<volatile const int*>(host_flags_)[1]; }

BenchGraph::~BenchGraph() { reset(); }
void BenchGraph::reset() {
    if (exec_) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    if (graph_) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
    exec_ = graph_ = nullptr;
}
void BenchGraph::begin(void* stream) {
    reset();
    JLLM_CUDA_CHECK(cudaStreamBeginCapture(as_stream(stream), cudaStreamCaptureModeThreadLocal));
}
void BenchGraph::end(void* stream) {
    cudaGraph_t g = nullptr;
    JLLM_CUDA_CHECK(cudaStreamEndCapture(as_stream(stream), &g));
    graph_ = g;
    cudaGraphExec_t e = nullptr;
    JLLM_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
    exec_ = e;
}
void BenchGraph::launch(void* stream) {
    JLLM_ASSERT(exec_ != nullptr);
    JLLM_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), as_stream(stream)));
}

void memcpy_d2d(void* dst, const void* src, size_t bytes, void* stream) {
    JLLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream)));
}

}  // namespace cuda
}  // namespace jllm

// tests/support/cuda_bench.h — timing helpers for the GPU benchmarks (bench/cuda_kernels): the
// device's description, a stream, event timing, device-to-device copies and a launch gate. No
// CUDA type appears here (streams are void*), so g++-compiled benchmark code can include it.
// Every failure throws JllmError naming the failing CUDA call (cuda_check.h).
//
// The launch gate exists because a decode GEMV on a small matrix runs for a few microseconds,
// about as long as the host needs to enqueue it: timing back-to-back launches as they are
// issued would measure the host. The gate is a one-thread kernel that holds the stream until
// the host releases it, so everything enqueued behind it runs back to back on the GPU and the
// events around it time the GPU alone.
#pragma once

#include <cstddef>
#include <string>

namespace jllm {
namespace cuda {

struct DeviceInfo {
    int index = 0;
    std::string name;
    int cc_major = 0, cc_minor = 0;
    int sm_count = 0;
    int sm_clock_khz = 0;    // peak SM clock (cudaDevAttrClockRate)
    int mem_clock_khz = 0;   // peak memory clock (cudaDevAttrMemoryClockRate)
    int bus_width_bits = 0;  // memory bus width
    size_t l2_bytes = 0;     // cudaDeviceProp::l2CacheSize
    size_t total_bytes = 0, free_bytes = 0;
    int driver_version = 0, runtime_version = 0;  // CUDA versions, 1000 * major + 10 * minor
    // 2 transfers per memory clock x bus width: the datasheet figure, never reached by a copy.
    double theoretical_gbps() const { return 2.0 * mem_clock_khz * 1e3 * (bus_width_bits / 8.0) / 1e9; }
};

// Throws JllmError when the device does not exist or no driver is loaded.
DeviceInfo device_info(int device = 0);
// "13.0" from 13000.
std::string cuda_version_string(int v);

// A non-blocking stream, destroyed with the object.
class BenchStream {
public:
    BenchStream();
    ~BenchStream();
    BenchStream(const BenchStream&) = delete;
    BenchStream& operator=(const BenchStream&) = delete;
    void* get() const { return stream_; }
    void sync();

private:
    void* stream_ = nullptr;
};

// A pair of CUDA events: start() and stop() record on a stream, elapsed_ms() waits for the stop
// event and returns the GPU time between the two.
class EventTimer {
public:
    EventTimer();
    ~EventTimer();
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;
    void start(void* stream);
    void stop(void* stream);
    double elapsed_ms();

private:
    void* start_ = nullptr;
    void* stop_ = nullptr;
};

// Holds a stream until release(): hold() enqueues the gate kernel (call it with nothing of this
// gate in flight), the host enqueues the work to time, release() lets it all run. A gate that
// waited longer than `timeout_ms` opens by itself and is counted in timeouts() (then the work
// behind it was enqueued too slowly and the timing may include host time).
class LaunchGate {
public:
    LaunchGate();
    ~LaunchGate();
    LaunchGate(const LaunchGate&) = delete;
    LaunchGate& operator=(const LaunchGate&) = delete;
    void hold(void* stream, double timeout_ms = 2000.0);
    void release();
    int timeouts() const;  // read after the stream was synchronized

private:
    int* host_flags_ = nullptr;  // mapped pinned memory: [0] open, [1] timeouts
    int* dev_flags_ = nullptr;   // the same memory seen from the device
};

// A CUDA graph captured from the work enqueued on a stream between begin() and end(), launched
// as one unit: successive kernels of a graph start ~1 us apart on an H200, where launches from the
// host through a stream are ~3.3 us apart (the engine's decode step runs as a graph).
class BenchGraph {
public:
    BenchGraph() = default;
    ~BenchGraph();
    BenchGraph(const BenchGraph&) = delete;
    BenchGraph& operator=(const BenchGraph&) = delete;
    void begin(void* stream);  // start capturing; a previous graph is destroyed
    void end(void* stream);    // stop capturing and instantiate
    void launch(void* stream);

private:
    void reset();
    void* graph_ = nullptr;
    void* exec_ = nullptr;
};

// Asynchronous device-to-device copy on `stream`.
void memcpy_d2d(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace cuda
}  // namespace jllm

// core/memory_pool.h — pools allocated once per model (the KV cache and the scratch of a
// backend): no allocation in the decode loop. The memory budget (memory/) sizes them; backends
// carve their buffers from them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace jllm {

// One allocation for the whole life of a model: 64-byte aligned, zero-filled (so every page is
// touched at load, not during the first decode). The KV pool is carved into fixed per-layer
// slices; the scratch pool is a bump allocator with mark/rewind for per-forward temporaries.
class MemoryPool {
public:
    MemoryPool() = default;
    ~MemoryPool();
    MemoryPool(const MemoryPool&) = delete;
    MemoryPool& operator=(const MemoryPool&) = delete;

    void reserve(size_t bytes);          // frees any previous block; allocates once; throws JllmError on failure
    void release();
    size_t capacity() const { return size_; }
    size_t used() const { return used_; }
    uint8_t* base() const { return base_; }

    // Bump allocation, 64-byte aligned. Running out is an invariant failure (the size was planned).
    void* take(size_t bytes);
    template <class T> T* take_array(size_t n) { return static_cast<T*>(take(n * sizeof(T))); }
    size_t mark() const { return used_; }
    void rewind(size_t mark);            // frees everything taken after `mark`

    static size_t aligned(size_t bytes) { return (bytes + 63) & ~static_cast<size_t>(63); }

private:
    uint8_t* base_ = nullptr;
    size_t size_ = 0;
    size_t used_ = 0;
};

class KVCachePool : public MemoryPool {};  // K/V for every layer and position, carved at load
class ScratchPool : public MemoryPool {};  // activations and temporaries, mark/rewind

// A typed view of a slice of a pool: data()/size()/operator[] like the vector it replaces.
template <class T>
struct PoolArray {
    T* ptr = nullptr;
    size_t n = 0;
    T* data() { return ptr; }
    const T* data() const { return ptr; }
    size_t size() const { return n; }
    T& operator[](size_t i) { return ptr[i]; }
    const T& operator[](size_t i) const { return ptr[i]; }
    void bind(MemoryPool& pool, size_t count) {
        ptr = pool.take_array<T>(count);
        n = count;
    }
};

}  // namespace jllm

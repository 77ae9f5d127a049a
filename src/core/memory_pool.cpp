// core/memory_pool.cpp — MemoryPool: one aligned, zero-filled block per pool, bump allocation
// with mark/rewind. Zero-filling touches every page at load so the first decode step neither
// page-faults nor finds out late that the memory was never there.
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"
#include "core/memory_pool.h"

namespace jllm {

MemoryPool::~MemoryPool() { release(); }

void MemoryPool::reserve(size_t bytes) {
    release();
    if (bytes == 0) return;
    const size_t n = aligned(bytes);
    void* p = std::aligned_alloc(64, n);
    if (p == nullptr) throw JllmError(strfmt("cannot allocate a %zu-byte memory pool", n));
    std::memset(p, 0, n);
    base_ = static_cast<uint8_t*>(p);
    size_ = n;
    used_ = 0;
}

void MemoryPool::release() {
    std::free(base_);
    base_ = nullptr;
    size_ = 0;
    used_ = 0;
}

void* MemoryPool::take(size_t bytes) {
    const size_t n = aligned(bytes);
    JLLM_ASSERT_MSG(used_ + n <= size_, "memory pool exhausted: the plan that sized it is wrong");
    void* p = base_ + used_;
    used_ += n;
    return p;
}

void MemoryPool::rewind(size_t mark) {
    JLLM_ASSERT(mark <= used_);
    used_ = mark;
}

}  // namespace jllm

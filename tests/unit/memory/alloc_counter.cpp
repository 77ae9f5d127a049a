// tests/unit/memory/alloc_counter.cpp — see alloc_counter.h. Interposing malloc works because the
// executable's definition wins symbol resolution over libc's for every shared object (glibc).
#include "alloc_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define JLLM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JLLM_TEST_ASAN 1
#endif
#endif

#ifndef JLLM_TEST_ASAN

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {
std::atomic<int64_t> g_allocs{0};
}

namespace jllm::test {
int64_t allocation_count() { return g_allocs.load(std::memory_order_relaxed); }
bool allocation_counting() { return true; }
}  // namespace jllm::test

extern "C" void* malloc(size_t n) {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    return __libc_malloc(n);
}
extern "C" void* calloc(size_t a, size_t b) {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    return __libc_calloc(a, b);
}
extern "C" void* realloc(void* p, size_t n) {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    return __libc_realloc(p, n);
}

namespace {
void* counted_new(size_t n) {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    void* p = __libc_malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    return p;
}
void* counted_new_aligned(size_t n, std::align_val_t al) {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    void* p = __libc_memalign(static_cast<size_t>(al), n ? n : 1);
    if (!p) throw std::bad_alloc();
    return p;
}
}  // namespace

void* operator new(size_t n) { return counted_new(n); }
void* operator new[](size_t n) { return counted_new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    return __libc_malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    return __libc_malloc(n ? n : 1);
}
void* operator new(size_t n, std::align_val_t al) { return counted_new_aligned(n, al); }
void* operator new[](size_t n, std::align_val_t al) { return counted_new_aligned(n, al); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }

#else  // AddressSanitizer replaces malloc and operator new itself: no counting.

namespace jllm::test {
int64_t allocation_count() { return 0; }
bool allocation_counting() { return false; }
}  // namespace jllm::test

#endif

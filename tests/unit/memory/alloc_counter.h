// tests/unit/memory/alloc_counter.h — counts heap allocations in this test binary: operator new
// (every form) and malloc/calloc/realloc are replaced with counting versions (glibc's
// __libc_malloc does the work), across all threads.
#pragma once

#include <cstdint>

namespace jllm::test {

int64_t allocation_count();  // allocations since the process started
bool allocation_counting();  // false under AddressSanitizer, which owns malloc

}  // namespace jllm::test

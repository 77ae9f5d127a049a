// core/mmap_file.cpp — POSIX mmap of a whole file, read-only, private.
#include "core/mmap_file.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

namespace jllm {

MmapFile::MmapFile(const std::string& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw JllmError(strfmt("cannot open '%s': %s", path.c_str(), std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        throw JllmError(strfmt("cannot stat '%s': %s", path.c_str(), std::strerror(e)));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw JllmError(strfmt("'%s' is not a regular file", path.c_str()));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            ::close(fd);
            throw JllmError(strfmt("cannot map '%s': %s", path.c_str(), std::strerror(e)));
        }
        data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
}

MmapFile::~MmapFile() { release(); }

MmapFile::MmapFile(MmapFile&& other) noexcept { *this = std::move(other); }

MmapFile& MmapFile::operator=(MmapFile&& other) noexcept {
    if (this != &other) {
        release();
        path_ = std::move(other.path_);
        data_ = other.data_;
        size_ = other.size_;
        other.data_ = nullptr;
        other.size_ = 0;
    }
    return *this;
}

size_t MmapFile::drop_pages(const void* p, size_t n) const {
    const uintptr_t base = reinterpret_cast<uintptr_t>(data_);
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    JLLM_ASSERT(data_ != nullptr && a >= base && n <= size_ && a - base <= size_ - n);
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t lo = (a + page - 1) & ~(page - 1);
    const uintptr_t hi = (a + n) & ~(page - 1);
    if (hi <= lo) return 0;
    if (::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) != 0) return 0;  // a hint
    return hi - lo;
}

void MmapFile::release() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
}

}  // namespace jllm

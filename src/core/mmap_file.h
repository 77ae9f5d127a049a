// core/mmap_file.h — a read-only memory map of a whole file (weights stay in the page cache and
// are read in place; on the Jetson the GPU reads the same pages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace jllm {

class MmapFile {
public:
    MmapFile() = default;
    // Throws JllmError naming the path and the OS error when the file cannot be opened or mapped.
    explicit MmapFile(const std::string& path);
    ~MmapFile();
    MmapFile(const MmapFile&) = delete;
    MmapFile& operator=(const MmapFile&) = delete;
    MmapFile(MmapFile&& other) noexcept;
    MmapFile& operator=(MmapFile&& other) noexcept;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }

    // Drops this process's pages of [p, p + n) (whole pages only; p inside the mapping) once their
    // bytes have been copied elsewhere: the mapping is private and never written, so a later read
    // faults them in again from the page cache or the file. The page cache may keep them (clean
    // and reclaimable, counted in MemAvailable); this process no longer holds them (RssFile).
    // Returns the bytes dropped.
    size_t drop_pages(const void* p, size_t n) const;

private:
    void release();
    std::string path_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace jllm

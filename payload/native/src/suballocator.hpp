// The offset suballocator behind gpulab_suballoc.h: a two-level segregated fit (TLSF)
// allocator with out-of-band block records, because the memory it manages (a GPU heap)
// is not addressable by the CPU. Internal to the library: callers use the C API.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "gpulab_suballoc.h"

namespace gpulab {

// A failure the caller caused or must handle; carries the C status it maps to.
class SuballocError : public std::runtime_error {
public:
    SuballocError(gpulab_suballoc_status status, const std::string &message)
        : std::runtime_error(message), status_(status) {}
    gpulab_suballoc_status status() const noexcept { return status_; }

private:
    gpulab_suballoc_status status_;
};

class Suballocator {
public:
    static constexpr uint64_t kMaxCapacity = uint64_t{1} << 62;

    explicit Suballocator(uint64_t capacity);
    Suballocator(const Suballocator &) = delete;
    Suballocator &operator=(const Suballocator &) = delete;

    // Strong guarantee: on any exception the allocator is unchanged.
    uint64_t allocate(uint64_t size, uint64_t alignment);
    void free(uint64_t offset);
    void reset() noexcept;
    gpulab_suballoc_stats stats() const noexcept;
    // Walks every record and throws std::logic_error on the first inconsistency (tests).
    void check_invariants() const;

private:
    struct Block {
        uint64_t offset = 0;
        uint64_t size = 0;
        bool free = false;
        Block *prev_phys = nullptr;  // neighbours in address order
        Block *next_phys = nullptr;
        Block *prev_free = nullptr;  // neighbours in the block's size bin (free blocks only);
        Block *next_free = nullptr;  // next_free also chains the spare records
    };
    struct Bin {
        unsigned fl;  // first level: power of two of the size
        unsigned sl;  // second level: one of kSlCount linear steps within it
    };

    static constexpr unsigned kSlBits = 4;
    static constexpr unsigned kSlCount = 1u << kSlBits;
    static constexpr unsigned kFlCount = 64;

    static Bin bin_of(uint64_t size) noexcept;
    static Bin bin_at_least(uint64_t size) noexcept;
    Block *find_good_fit(uint64_t need) const noexcept;
    Block *find_any_fit(uint64_t size, uint64_t alignment) const noexcept;
    void insert_free(Block *block) noexcept;
    void remove_free(Block *block) noexcept;
    void reserve_spares(unsigned count);
    Block *take_spare() noexcept;
    void recycle(Block *block) noexcept;
    void start_over() noexcept;

    uint64_t capacity_;
    uint64_t used_ = 0;
    uint64_t free_regions_ = 0;
    Block *first_ = nullptr;
    uint64_t fl_bitmap_ = 0;
    std::array<uint32_t, kFlCount> sl_bitmap_{};
    std::array<std::array<Block *, kSlCount>, kFlCount> heads_{};
    std::deque<Block> records_;  // stable addresses; records are reused, never erased
    Block *spares_ = nullptr;
    unsigned spare_count_ = 0;
    std::unordered_map<uint64_t, Block *> live_;  // allocation offset -> its block
};

}  // namespace gpulab

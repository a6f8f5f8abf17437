#include "suballocator.hpp"

#include <algorithm>

namespace gpulab {

namespace {

unsigned highest_bit(uint64_t v) { return 63u - static_cast<unsigned>(__builtin_clzll(v)); }
unsigned lowest_bit(uint64_t v) { return static_cast<unsigned>(__builtin_ctzll(v)); }
uint64_t align_up(uint64_t v, uint64_t alignment) { return (v + alignment - 1) & ~(alignment - 1); }

std::string describe_request(uint64_t size, uint64_t alignment) {
    return std::to_string(size) + " bytes aligned to " + std::to_string(alignment);
}

}  // namespace

Suballocator::Suballocator(uint64_t capacity) : capacity_(capacity) {
    if (capacity == 0 || capacity > kMaxCapacity)
        throw SuballocError(GPULAB_SUBALLOC_INVALID_ARGUMENT,
                            "capacity must be 1 to 2^62 bytes, got " + std::to_string(capacity));
    reserve_spares(1);
    start_over();
}

// Sizes below kSlCount get one bin each; above, each power of two is cut into kSlCount bins.
Suballocator::Bin Suballocator::bin_of(uint64_t size) noexcept {
    if (size < kSlCount) return {0, static_cast<unsigned>(size)};
    unsigned msb = highest_bit(size);
    return {msb - kSlBits + 1, static_cast<unsigned>(size >> (msb - kSlBits)) - kSlCount};
}

// The first bin whose every block holds at least `size` bytes.
Suballocator::Bin Suballocator::bin_at_least(uint64_t size) noexcept {
    if (size >= kSlCount) size += (uint64_t{1} << (highest_bit(size) - kSlBits)) - 1;
    return bin_of(size);
}

// TLSF search: constant time, but it skips the bin that holds `need` itself.
Suballocator::Block *Suballocator::find_good_fit(uint64_t need) const noexcept {
    Bin bin = bin_at_least(need);
    uint32_t sl_map = sl_bitmap_[bin.fl] & (~0u << bin.sl);
    if (sl_map == 0) {
        uint64_t fl_map = bin.fl + 1 < kFlCount ? fl_bitmap_ & (~uint64_t{0} << (bin.fl + 1)) : 0;
        if (fl_map == 0) return nullptr;
        bin.fl = lowest_bit(fl_map);
        sl_map = sl_bitmap_[bin.fl];
    }
    return heads_[bin.fl][lowest_bit(sl_map)];
}

// Exhaustive search from the bin of `size` upward, so that a request fails only when no
// free block can hold it. Runs only after find_good_fit failed: near exhaustion.
Suballocator::Block *Suballocator::find_any_fit(uint64_t size, uint64_t alignment) const noexcept {
    Bin start = bin_of(size);
    for (unsigned fl = start.fl; fl < kFlCount; fl++) {
        uint32_t sl_map = sl_bitmap_[fl] & (fl == start.fl ? ~0u << start.sl : ~0u);
        for (; sl_map != 0; sl_map &= sl_map - 1) {
            for (Block *b = heads_[fl][lowest_bit(sl_map)]; b != nullptr; b = b->next_free) {
                uint64_t padding = align_up(b->offset, alignment) - b->offset;
                if (b->size >= padding && b->size - padding >= size) return b;
            }
        }
    }
    return nullptr;
}

void Suballocator::insert_free(Block *block) noexcept {
    Bin bin = bin_of(block->size);
    Block *&head = heads_[bin.fl][bin.sl];
    block->free = true;
    block->prev_free = nullptr;
    block->next_free = head;
    if (head != nullptr) head->prev_free = block;
    head = block;
    sl_bitmap_[bin.fl] |= 1u << bin.sl;
    fl_bitmap_ |= uint64_t{1} << bin.fl;
    free_regions_++;
}

void Suballocator::remove_free(Block *block) noexcept {
    Bin bin = bin_of(block->size);
    if (block->prev_free != nullptr) block->prev_free->next_free = block->next_free;
    else heads_[bin.fl][bin.sl] = block->next_free;
    if (block->next_free != nullptr) block->next_free->prev_free = block->prev_free;
    if (heads_[bin.fl][bin.sl] == nullptr) {
        sl_bitmap_[bin.fl] &= ~(1u << bin.sl);
        if (sl_bitmap_[bin.fl] == 0) fl_bitmap_ &= ~(uint64_t{1} << bin.fl);
    }
    block->free = false;
    block->prev_free = block->next_free = nullptr;
    free_regions_--;
}

// Records are obtained before any state changes, so that running out of host memory
// leaves the allocator as it was.
void Suballocator::reserve_spares(unsigned count) {
    while (spare_count_ < count) {
        records_.emplace_back();
        recycle(&records_.back());
    }
}

Suballocator::Block *Suballocator::take_spare() noexcept {
    Block *block = spares_;
    spares_ = block->next_free;
    spare_count_--;
    *block = Block{};
    return block;
}

void Suballocator::recycle(Block *block) noexcept {
    block->next_free = spares_;
    spares_ = block;
    spare_count_++;
}

void Suballocator::start_over() noexcept {
    spares_ = nullptr;
    spare_count_ = 0;
    for (Block &record : records_) recycle(&record);
    live_.clear();
    fl_bitmap_ = 0;
    sl_bitmap_.fill(0);
    for (auto &row : heads_) row.fill(nullptr);
    used_ = 0;
    free_regions_ = 0;
    first_ = take_spare();
    first_->size = capacity_;
    insert_free(first_);
}

uint64_t Suballocator::allocate(uint64_t size, uint64_t alignment) {
    if (size == 0)
        throw SuballocError(GPULAB_SUBALLOC_INVALID_ARGUMENT, "size must be at least 1 byte");
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMaxCapacity)
        throw SuballocError(GPULAB_SUBALLOC_INVALID_ARGUMENT,
                            "alignment must be a power of two up to 2^62, got " +
                                std::to_string(alignment));
    Block *block = size <= capacity_ ? find_good_fit(size + alignment - 1) : nullptr;
    if (block == nullptr && size <= capacity_) block = find_any_fit(size, alignment);
    if (block == nullptr) {
        gpulab_suballoc_stats s = stats();
        throw SuballocError(GPULAB_SUBALLOC_OUT_OF_SPACE,
                            "no free region fits " + describe_request(size, alignment) + " (" +
                                std::to_string(s.free) + " of " + std::to_string(s.capacity) +
                                " bytes free, largest free region " +
                                std::to_string(s.largest_free_region) + ")");
    }

    const uint64_t offset = align_up(block->offset, alignment);
    const uint64_t front = offset - block->offset;
    const uint64_t back = block->size - front - size;
    reserve_spares(2);
    live_.emplace(offset, block);  // the last step that can throw

    remove_free(block);
    if (front != 0) {  // the alignment gap stays free, in front of the allocation
        Block *gap = take_spare();
        gap->offset = block->offset;
        gap->size = front;
        gap->prev_phys = block->prev_phys;
        gap->next_phys = block;
        if (block->prev_phys != nullptr) block->prev_phys->next_phys = gap;
        else first_ = gap;
        block->prev_phys = gap;
        block->offset = offset;
        block->size -= front;
        insert_free(gap);
    }
    if (back != 0) {  // the rest stays free, behind it
        Block *rest = take_spare();
        rest->offset = offset + size;
        rest->size = back;
        rest->prev_phys = block;
        rest->next_phys = block->next_phys;
        if (block->next_phys != nullptr) block->next_phys->prev_phys = rest;
        block->next_phys = rest;
        block->size = size;
        insert_free(rest);
    }
    used_ += size;
    return offset;
}

void Suballocator::free(uint64_t offset) {
    auto it = live_.find(offset);
    if (it == live_.end())
        throw SuballocError(GPULAB_SUBALLOC_UNKNOWN_OFFSET,
                            "offset " + std::to_string(offset) +
                                " is not a live allocation (never allocated, or already freed)");
    Block *block = it->second;
    live_.erase(it);
    used_ -= block->size;

    if (Block *prev = block->prev_phys; prev != nullptr && prev->free) {
        remove_free(prev);
        prev->size += block->size;
        prev->next_phys = block->next_phys;
        if (block->next_phys != nullptr) block->next_phys->prev_phys = prev;
        recycle(block);
        block = prev;
    }
    if (Block *next = block->next_phys; next != nullptr && next->free) {
        remove_free(next);
        block->size += next->size;
        block->next_phys = next->next_phys;
        if (next->next_phys != nullptr) next->next_phys->prev_phys = block;
        recycle(next);
    }
    insert_free(block);
}

void Suballocator::reset() noexcept { start_over(); }

gpulab_suballoc_stats Suballocator::stats() const noexcept {
    uint64_t largest = 0;
    if (fl_bitmap_ != 0) {  // the largest free block sits in the highest non-empty bin
        unsigned fl = highest_bit(fl_bitmap_);
        unsigned sl = highest_bit(sl_bitmap_[fl]);
        for (const Block *b = heads_[fl][sl]; b != nullptr; b = b->next_free)
            largest = std::max(largest, b->size);
    }
    return {capacity_, used_, capacity_ - used_, largest, live_.size(), free_regions_};
}

void Suballocator::check_invariants() const {
    auto require = [](bool ok, const char *what) {
        if (!ok) throw std::logic_error(std::string("suballocator invariant broken: ") + what);
    };
    uint64_t expected_offset = 0, used = 0, free_blocks = 0, live_blocks = 0;
    const Block *prev = nullptr;
    for (const Block *b = first_; b != nullptr; prev = b, b = b->next_phys) {
        require(b->prev_phys == prev, "address links");
        require(b->offset == expected_offset, "blocks tile the range");
        require(b->size != 0, "no empty blocks");
        require(!(b->free && prev != nullptr && prev->free), "free neighbours are merged");
        expected_offset += b->size;
        if (b->free) {
            Bin bin = bin_of(b->size);
            const Block *it = heads_[bin.fl][bin.sl];
            while (it != nullptr && it != b) it = it->next_free;
            require(it == b, "free block is in its size bin");
            free_blocks++;
        } else {
            auto found = live_.find(b->offset);
            require(found != live_.end() && found->second == b, "used block is live");
            used += b->size;
            live_blocks++;
        }
    }
    require(expected_offset == capacity_, "blocks cover the capacity");
    require(used == used_ && live_blocks == live_.size(), "usage counters");
    require(free_blocks == free_regions_, "free region counter");
    for (unsigned fl = 0; fl < kFlCount; fl++) {
        for (unsigned sl = 0; sl < kSlCount; sl++) {
            bool listed = heads_[fl][sl] != nullptr;
            require(listed == (((sl_bitmap_[fl] >> sl) & 1u) != 0), "second-level bitmap");
        }
        require((sl_bitmap_[fl] != 0) == (((fl_bitmap_ >> fl) & 1u) != 0), "first-level bitmap");
    }
}

}  // namespace gpulab

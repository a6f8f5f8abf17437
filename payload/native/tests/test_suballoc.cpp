// Unit tests of the suballocator: the C++ class with its invariants checked after every
// step of a random workload, and the C API with its error codes and messages.
#include <cstring>
#include <map>
#include <random>
#include <string>

#include "check.h"
#include "gpulab_suballoc.h"
#include "suballocator.hpp"

namespace {

bool message_has(const char *needle) {
    return std::strstr(gpulab_suballoc_last_error(), needle) != nullptr;
}

void test_split_and_merge() {
    gpulab::Suballocator a(1000);
    uint64_t x = a.allocate(100, 1), y = a.allocate(200, 1), z = a.allocate(300, 1);
    CHECK(x == 0 && y == 100 && z == 300);
    a.free(y);
    CHECK(a.stats().free_region_count == 2);  // the hole at 100 and the tail at 600
    a.free(x);                                // merges with the hole behind it
    CHECK(a.stats().free_region_count == 2 && a.stats().largest_free_region == 400);
    a.free(z);                                // merges with both neighbours
    gpulab_suballoc_stats s = a.stats();
    CHECK(s.free_region_count == 1 && s.largest_free_region == 1000 && s.used == 0);
    a.check_invariants();
}

void test_alignment_gap_stays_free() {
    gpulab::Suballocator a(4096);
    uint64_t small = a.allocate(3, 1);
    uint64_t aligned = a.allocate(100, 256);
    CHECK(small == 0 && aligned == 256);
    CHECK(a.stats().free_region_count == 2 && a.stats().used == 103);
    a.check_invariants();
}

void test_exact_fit_when_full() {
    // TLSF's constant-time search rounds the request up a bin; the fallback must still find
    // the one block that fits exactly.
    gpulab::Suballocator a(1000);
    uint64_t first = a.allocate(1000 - 77, 1);
    uint64_t last = a.allocate(77, 1);
    CHECK(first == 0 && last == 923);
    a.free(last);
    CHECK(a.allocate(77, 1) == 923);
    bool threw = false;
    try {
        a.allocate(1, 1);
    } catch (const gpulab::SuballocError &e) {
        threw = e.status() == GPULAB_SUBALLOC_OUT_OF_SPACE;
    }
    CHECK(threw);
}

void test_random_workload() {
    std::mt19937_64 rng(2024);
    gpulab::Suballocator a(1 << 20);
    std::map<uint64_t, uint64_t> live;  // offset -> size
    bool consistent = true;
    for (int step = 0; step < 20000; step++) {
        if (live.empty() || rng() % 3 != 0) {
            uint64_t size = 1 + rng() % 5000, alignment = uint64_t{1} << (rng() % 10);
            try {
                uint64_t offset = a.allocate(size, alignment);
                consistent &= offset % alignment == 0 && offset + size <= (1u << 20);
                auto next = live.lower_bound(offset);
                consistent &= next == live.end() || offset + size <= next->first;
                if (next != live.begin()) {
                    auto prev = std::prev(next);
                    consistent &= prev->first + prev->second <= offset;
                }
                live[offset] = size;
            } catch (const gpulab::SuballocError &e) {
                consistent &= e.status() == GPULAB_SUBALLOC_OUT_OF_SPACE;
            }
        } else {
            auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
            a.free(it->first);
            live.erase(it);
        }
        if (step % 97 == 0) a.check_invariants();
    }
    CHECK(consistent);
    a.check_invariants();
    for (auto [offset, size] : live) a.free(offset);
    gpulab_suballoc_stats s = a.stats();
    CHECK(s.used == 0 && s.free_region_count == 1 && s.largest_free_region == (1u << 20));
    a.check_invariants();
}

void test_c_api() {
    gpulab_suballoc *h = nullptr;
    uint64_t before = gpulab_suballoc_live_handles();
    CHECK(gpulab_suballoc_abi_version() == GPULAB_SUBALLOC_ABI_VERSION);
    CHECK(gpulab_suballoc_create(0, &h) == GPULAB_SUBALLOC_INVALID_ARGUMENT);
    CHECK(message_has("capacity"));
    CHECK(gpulab_suballoc_create(1 << 16, &h) == GPULAB_SUBALLOC_OK && h != nullptr);
    CHECK(gpulab_suballoc_live_handles() == before + 1);

    uint64_t offset = 0;
    CHECK(gpulab_suballoc_allocate(h, 0, 1, &offset) == GPULAB_SUBALLOC_INVALID_ARGUMENT);
    CHECK(message_has("size"));
    CHECK(gpulab_suballoc_allocate(h, 8, 3, &offset) == GPULAB_SUBALLOC_INVALID_ARGUMENT);
    CHECK(message_has("power of two"));
    CHECK(gpulab_suballoc_allocate(h, 1 << 17, 1, &offset) == GPULAB_SUBALLOC_OUT_OF_SPACE);
    CHECK(message_has("no free region fits 131072 bytes"));
    CHECK(gpulab_suballoc_allocate(h, 64, 64, &offset) == GPULAB_SUBALLOC_OK && offset == 0);
    CHECK(gpulab_suballoc_free(h, 8) == GPULAB_SUBALLOC_UNKNOWN_OFFSET);
    CHECK(gpulab_suballoc_free(h, 0) == GPULAB_SUBALLOC_OK);
    CHECK(gpulab_suballoc_free(h, 0) == GPULAB_SUBALLOC_UNKNOWN_OFFSET);  // double free
    CHECK(message_has("already freed"));
    CHECK(gpulab_suballoc_allocate(nullptr, 1, 1, &offset) == GPULAB_SUBALLOC_INVALID_ARGUMENT);
    CHECK(gpulab_suballoc_allocate(h, 1, 1, nullptr) == GPULAB_SUBALLOC_INVALID_ARGUMENT);

    CHECK(gpulab_suballoc_allocate(h, 100, 1, &offset) == GPULAB_SUBALLOC_OK);
    CHECK(gpulab_suballoc_reset(h) == GPULAB_SUBALLOC_OK);
    gpulab_suballoc_stats s{};
    CHECK(gpulab_suballoc_get_stats(h, &s) == GPULAB_SUBALLOC_OK);
    CHECK(s.capacity == (1 << 16) && s.used == 0 && s.allocation_count == 0);
    CHECK(s.free_region_count == 1 && s.largest_free_region == (1 << 16));

    CHECK(gpulab_suballoc_debug_throw(0) == GPULAB_SUBALLOC_INTERNAL);
    CHECK(message_has("on purpose"));
    CHECK(gpulab_suballoc_debug_throw(1) == GPULAB_SUBALLOC_NO_MEMORY);
    CHECK(message_has("bad_alloc"));
    CHECK(gpulab_suballoc_debug_throw(2) == GPULAB_SUBALLOC_INTERNAL);
    CHECK(message_has("unknown C++ exception"));

    gpulab_suballoc_destroy(h);
    gpulab_suballoc_destroy(nullptr);
    CHECK(gpulab_suballoc_live_handles() == before);
}

}  // namespace

int main() {
    test_split_and_merge();
    test_alignment_gap_stays_free();
    test_exact_fit_when_full();
    test_random_workload();
    test_c_api();
    return report_and_exit_status("test_suballoc", checks_run, checks_failed);
}

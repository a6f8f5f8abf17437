// The extern "C" face of the suballocator: opaque handles, status codes, and a per-thread
// last-error message. No exception leaves this file.
#include <atomic>
#include <cstdio>
#include <new>

#include "gpulab_suballoc.h"
#include "suballocator.hpp"

struct gpulab_suballoc {
    explicit gpulab_suballoc(uint64_t capacity) : impl(capacity) {}
    gpulab::Suballocator impl;
};

namespace {

// A fixed buffer: recording an error must not allocate (it may be reporting bad_alloc).
thread_local char last_error[512] = "";
std::atomic<uint64_t> live_handles{0};

void remember(const char *message) noexcept {
    std::snprintf(last_error, sizeof last_error, "%s", message);
}

template <class Body>
gpulab_suballoc_status guarded(Body &&body) noexcept {
    try {
        body();
        return GPULAB_SUBALLOC_OK;
    } catch (const gpulab::SuballocError &e) {
        remember(e.what());
        return e.status();
    } catch (const std::bad_alloc &) {
        remember("out of host memory (std::bad_alloc)");
        return GPULAB_SUBALLOC_NO_MEMORY;
    } catch (const std::exception &e) {
        remember(e.what());
        return GPULAB_SUBALLOC_INTERNAL;
    } catch (...) {
        remember("unknown C++ exception (not derived from std::exception)");
        return GPULAB_SUBALLOC_INTERNAL;
    }
}

void require_non_null(const void *pointer, const char *name) {
    if (pointer == nullptr)
        throw gpulab::SuballocError(GPULAB_SUBALLOC_INVALID_ARGUMENT,
                                    std::string(name) + " is NULL");
}

}  // namespace

extern "C" {

uint32_t gpulab_suballoc_abi_version(void) { return GPULAB_SUBALLOC_ABI_VERSION; }

gpulab_suballoc_status gpulab_suballoc_create(uint64_t capacity, gpulab_suballoc **out) {
    return guarded([&] {
        require_non_null(out, "out");
        *out = new gpulab_suballoc(capacity);
        live_handles++;
    });
}

void gpulab_suballoc_destroy(gpulab_suballoc *allocator) {
    if (allocator == nullptr) return;
    delete allocator;
    live_handles--;
}

gpulab_suballoc_status gpulab_suballoc_allocate(gpulab_suballoc *allocator, uint64_t size,
                                                uint64_t alignment, uint64_t *offset) {
    return guarded([&] {
        require_non_null(allocator, "allocator");
        require_non_null(offset, "offset");
        *offset = allocator->impl.allocate(size, alignment);
    });
}

gpulab_suballoc_status gpulab_suballoc_free(gpulab_suballoc *allocator, uint64_t offset) {
    return guarded([&] {
        require_non_null(allocator, "allocator");
        allocator->impl.free(offset);
    });
}

gpulab_suballoc_status gpulab_suballoc_reset(gpulab_suballoc *allocator) {
    return guarded([&] {
        require_non_null(allocator, "allocator");
        allocator->impl.reset();
    });
}

gpulab_suballoc_status gpulab_suballoc_get_stats(const gpulab_suballoc *allocator,
                                                 gpulab_suballoc_stats *out) {
    return guarded([&] {
        require_non_null(allocator, "allocator");
        require_non_null(out, "out");
        *out = allocator->impl.stats();
    });
}

const char *gpulab_suballoc_last_error(void) { return last_error; }

uint64_t gpulab_suballoc_live_handles(void) { return live_handles.load(); }

gpulab_suballoc_status gpulab_suballoc_debug_throw(int kind) {
    return guarded([&] {
        switch (kind) {
        case 0: throw std::runtime_error("debug_throw: a std::runtime_error thrown on purpose");
        case 1: throw std::bad_alloc();
        case 2: throw 42;
        default:
            throw gpulab::SuballocError(GPULAB_SUBALLOC_INVALID_ARGUMENT,
                                        "debug_throw: kind must be 0, 1 or 2, got " +
                                            std::to_string(kind));
        }
    });
}

}  // extern "C"

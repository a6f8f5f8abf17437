/* gpulab_suballoc: an offset suballocator (TLSF) for carving one large GPU allocation into
 * many buffers. It hands out offsets into a range [0, capacity); it never touches memory.
 *
 * This header is the single source of the library's ABI. The Python bindings read the
 * declarations between the cdef markers at load time and hand them to cffi, so that part
 * must stay plain C that cffi can parse.
 *
 * Errors: every function that can fail returns a gpulab_suballoc_status. No C++ exception
 * crosses this boundary; after a status other than GPULAB_SUBALLOC_OK,
 * gpulab_suballoc_last_error() describes it (per thread, valid until the next failure on
 * that thread). A handle is not thread-safe: callers serialize calls on one handle.
 */
#ifndef GPULAB_SUBALLOC_H
#define GPULAB_SUBALLOC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* gpulab:cdef-begin */
#define GPULAB_SUBALLOC_ABI_VERSION 1

typedef enum gpulab_suballoc_status {
    GPULAB_SUBALLOC_OK = 0,
    GPULAB_SUBALLOC_INVALID_ARGUMENT = 1, /* size 0, alignment not a power of two, null */
    GPULAB_SUBALLOC_OUT_OF_SPACE = 2,     /* no free region fits the request */
    GPULAB_SUBALLOC_UNKNOWN_OFFSET = 3,   /* not an allocation: never allocated, or freed */
    GPULAB_SUBALLOC_NO_MEMORY = 4,        /* the host ran out of memory (std::bad_alloc) */
    GPULAB_SUBALLOC_INTERNAL = 5          /* any other exception */
} gpulab_suballoc_status;

typedef struct gpulab_suballoc gpulab_suballoc; /* opaque */

typedef struct gpulab_suballoc_stats {
    uint64_t capacity;
    uint64_t used;                /* bytes in live allocations */
    uint64_t free;                /* capacity - used */
    uint64_t largest_free_region; /* bytes */
    uint64_t allocation_count;
    uint64_t free_region_count;   /* adjacent free regions are always merged */
} gpulab_suballoc_stats;

/* The ABI version the library was built with; compare with GPULAB_SUBALLOC_ABI_VERSION. */
uint32_t gpulab_suballoc_abi_version(void);

/* Creates an allocator over [0, capacity). capacity: 1 to 2^62. */
gpulab_suballoc_status gpulab_suballoc_create(uint64_t capacity, gpulab_suballoc **out);
/* Destroys the allocator; NULL is ignored. */
void gpulab_suballoc_destroy(gpulab_suballoc *allocator);

/* Finds `size` bytes at an offset that is a multiple of `alignment` (a power of two,
 * at most 2^62). Allocations are exact: no rounding of the size. */
gpulab_suballoc_status gpulab_suballoc_allocate(gpulab_suballoc *allocator, uint64_t size,
                                                uint64_t alignment, uint64_t *offset);
/* Frees the allocation that starts at `offset`, merging it with free neighbours. */
gpulab_suballoc_status gpulab_suballoc_free(gpulab_suballoc *allocator, uint64_t offset);
/* Frees every allocation at once. */
gpulab_suballoc_status gpulab_suballoc_reset(gpulab_suballoc *allocator);
gpulab_suballoc_status gpulab_suballoc_get_stats(const gpulab_suballoc *allocator,
                                                 gpulab_suballoc_stats *out);

/* The message for the last failure on the calling thread ("" if none). */
const char *gpulab_suballoc_last_error(void);

/* Number of allocators created and not yet destroyed in this process (leak checks). */
uint64_t gpulab_suballoc_live_handles(void);

/* Test hook: throws inside the boundary and returns what the boundary made of it.
 * kind 0: std::runtime_error, 1: std::bad_alloc, 2: an int (not a std::exception). */
gpulab_suballoc_status gpulab_suballoc_debug_throw(int kind);
/* gpulab:cdef-end */

#ifdef __cplusplus
}
#endif

#endif /* GPULAB_SUBALLOC_H */

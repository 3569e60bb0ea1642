// Memory for tensors: host (64-byte aligned), pinned host, and CUDA device.
//
// Device memory comes from a stream-ordered caching allocator built on the
// device's cudaMallocAsync memory pool with its release threshold raised to
// "never": memory freed by a step returns to the pool and is handed out again
// by the next step, so a steady-state training loop makes no cudaMalloc or
// cudaFree calls. A block is freed on the stream it was allocated on, after
// every other stream that used it (Storage::record_stream) has caught up.
// An allocation the pool cannot serve first gives every cached, unused block
// back (after the device has caught up) and tries once more; only then is it
// an out-of-memory Error.
//
// Every allocator keeps bytes in use and the peak since the last reset.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem {

struct MemoryStats {
  size_t in_use = 0;       // bytes currently handed out to tensors
  size_t peak_in_use = 0;  // high-water mark of in_use since the last reset
  size_t reserved = 0;     // bytes the allocator holds from the system, cached blocks included
  uint64_t allocations = 0;  // number of allocate calls that returned memory
  // Device memory that CUDA graphs hold for the allocations they captured (a captured
  // training step's activations): the graph owns it, not the pool, so it is not in
  // in_use and a replay moves neither counter. 0 for host memory.
  size_t graphs = 0;
  // The peak to report: tensors' high-water mark plus what graphs hold.
  size_t peak_with_graphs() const { return peak_in_use + graphs; }
};

namespace host_memory {
// 64-byte aligned, so rows of f32 start on cache-line and AVX-512 boundaries;
// blocks of 2 MiB and more start on a 2 MiB boundary and are advised for
// transparent huge pages where large_blocks_on_huge_pages() (allocator.cc says why).
// Freed blocks of 128 KiB and more are kept and handed out again to requests
// of the same size class (except under AddressSanitizer), up to the largest
// number of bytes in use so far; an allocation the system refuses first
// gives the cached blocks back and tries once more.
void* allocate(size_t nbytes);
void deallocate(void* p, size_t nbytes);
// Whether freed large blocks are kept for reuse (false under AddressSanitizer).
bool caches_freed_blocks();
// Gives every cached, unused block back to the system.
void release_cached();
// Whether huge pages are asked for: not TANDEM_HOST_HUGE_PAGES=0 (the
// default; any value but 0 or 1 is an Error naming the variable).
bool huge_pages_requested();
// Whether blocks of 2 MiB and more are advised for huge pages:
// huge_pages_requested() and kernel_has_transparent_huge_pages().
bool large_blocks_on_huge_pages();
// Whether this kernel has transparent huge pages and they are not "never"
// (/sys/kernel/mm/transparent_hugepage/enabled; gVisor, for one, has none).
bool kernel_has_transparent_huge_pages();
// Page-locked memory for fast, asynchronous host<->device copies. Falls back to
// ordinary aligned memory (and returns pinned=false) when no GPU is present.
void* allocate_pinned(size_t nbytes, bool* pinned);
void deallocate_pinned(void* p, size_t nbytes, bool pinned);
MemoryStats stats();
MemoryStats pinned_stats();
void reset_peak();
// Host memory that tensors use but another allocator made (the ring's shared
// buffers, comm/shared_buffers.h): counted in stats() from its allocation
// (in use and reserved) to its free, so a peak covers it.
void count_foreign(size_t nbytes);
void uncount_foreign(size_t nbytes);
}  // namespace host_memory

namespace cuda_memory {
// Stream-ordered allocation on `device`; `stream` is a cudaStream_t.
void* allocate(int device, size_t nbytes, void* stream);
void deallocate(int device, void* p, size_t nbytes, void* stream);
MemoryStats stats(int device);
void reset_peak(int device);
// Returns cached, unused pool memory to the system (for tests and out-of-memory retries).
void release_cached(int device);
}  // namespace cuda_memory

}  // namespace tandem

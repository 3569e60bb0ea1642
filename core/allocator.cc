#include "core/allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <new>

#include "core/allocation_ledger.h"
#include "core/check.h"
#include "core/host_block_cache.h"
#include "core/stream.h"

#if TANDEM_WITH_CUDA
#include "core/cuda_check.h"
#endif

namespace tandem {

namespace {

constexpr size_t kHostAlignment = 64;

// Counters of one memory kind. Atomics: tensors are freed from loader and comm threads too.
struct Counters {
  std::atomic<size_t> in_use{0};
  std::atomic<size_t> peak{0};
  std::atomic<size_t> reserved{0};
  std::atomic<uint64_t> allocations{0};

  void on_alloc(size_t n, bool counts_as_reserved) {
    size_t now = in_use.fetch_add(n) + n;
    size_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    if (counts_as_reserved) reserved.fetch_add(n);
    allocations.fetch_add(1);
  }
  void on_free(size_t n, bool counts_as_reserved) {
    in_use.fetch_sub(n);
    if (counts_as_reserved) reserved.fetch_sub(n);
  }
  MemoryStats snapshot() const { return {in_use.load(), peak.load(), reserved.load(), allocations.load()}; }
  void reset_peak() { peak.store(in_use.load()); }
};

Counters host_counters;
Counters pinned_counters;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Blocks of 2 MiB and more start on a 2 MiB boundary and ask for
// transparent huge pages (MADV_HUGEPAGE), which kernels in "madvise" mode
// (Debian's default) give only when asked; TANDEM_HOST_HUGE_PAGES=0 turns
// this off. What it buys: fewer TLB misses, and process_vm_readv from such
// a block (the ring's single-copy all_reduce, comm/single_copy.h) pins one
// huge page instead of 512 small ones (95 % of memcpy instead of 55 %,
// docs/results/allreduce_shm_cpu.md). What it costs: blocks rounded up to
// 2 MiB, so more resident memory (+5-14 % peak RSS in the training benches,
// docs/results/cpu_speed.md). It needs the block cache below: without it a
// step faults its huge pages in afresh, each zeroed and, under the kernel's
// "madvise" defrag mode, compacted for, which made the bag recipe's backward
// 1.8x slower; with it huge pages are level or faster on every config.
// PyTorch leaves huge pages off by default (THP_MEM_ALLOC_ENABLE) and has no
// CPU block cache.
constexpr size_t kHugePage = 2 << 20;
bool huge_pages_asked() {
  static const bool asked = [] {
    const char* v = std::getenv("TANDEM_HOST_HUGE_PAGES");
    if (v == nullptr || *v == 0) return true;
    TANDEM_CHECK(std::strcmp(v, "0") == 0 || std::strcmp(v, "1") == 0,
                 "TANDEM_HOST_HUGE_PAGES='{}' must be 0 or 1", v);
    return std::strcmp(v, "1") == 0;
  }();
  return asked;
}

// Blocks from 128 KiB up are kept when freed and handed out again
// (core/host_block_cache.h), as the CUDA pool does on the device. Without
// it, glibc gives such blocks back to the kernel (munmap above its mmap
// threshold, a trim of the heap's top below it), and the next step faults
// every page in again: the demo's step was 1.41x slower without the cache
// (189 K page faults in 23 steps against 58 K, docs/results/cpu_speed.md).
// Below 128 KiB glibc's arenas already reuse memory without system calls.
// Sizes are rounded up to one of 8 classes per power of two (at most 1/8
// more), so that batches of nearby shapes (sequence-length buckets, a last
// short batch) share blocks. The cached bytes never exceed the largest
// number of bytes in use so far: a steady training loop frees nothing, and
// a change of shapes can at most double the footprint. Off under
// AddressSanitizer, whose use-after-free checks need every free to reach it.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheBlocks = false;
#else
constexpr bool kCacheBlocks = true;
#endif
constexpr size_t kCachedMinBytes = 128 << 10;
constexpr size_t kPage = 4096;

bool on_huge_pages(size_t block) { return block >= kHugePage && host_memory::large_blocks_on_huge_pages(); }
size_t block_bytes(size_t nbytes) {
  if (nbytes < kCachedMinBytes) return round_up(nbytes, kHostAlignment);
  const size_t b = round_up(nbytes, std::max(kPage, std::bit_floor(nbytes) / 8));
  return on_huge_pages(b) ? round_up(b, kHugePage) : b;
}
bool cached(size_t block) { return kCacheBlocks && block >= kCachedMinBytes; }

struct HostCache {
  std::mutex mutex;  // tensors are freed from loader and comm threads too
  HostBlockCache blocks;
  size_t most_in_use = 0;  // the cache's limit; not peak_in_use, which reset_peak() lowers
};
// Never destroyed: tensors in static objects may be freed after main returns.
HostCache& host_cache() {
  static HostCache* cache = new HostCache;
  return *cache;
}

void free_blocks(const std::vector<HostBlockCache::Block>& blocks) {
  for (const auto& b : blocks) {
    std::free(b.p);
    host_counters.reserved.fetch_sub(b.bytes);
  }
}

}  // namespace

namespace host_memory {

void* allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  // No allocation can be this large, and rounding it up to a block would wrap around to a small one.
  if (nbytes > static_cast<size_t>(PTRDIFF_MAX)) TANDEM_FAIL("out of host memory allocating {} bytes", nbytes);
  const size_t bytes = block_bytes(nbytes);
  void* p = nullptr;
  if (cached(bytes)) {
    HostCache& c = host_cache();
    std::lock_guard lock(c.mutex);
    p = c.blocks.take(bytes);
    c.most_in_use = std::max(c.most_in_use, host_counters.in_use.load() + nbytes);
  }
  if (!p) {
    const size_t align = on_huge_pages(bytes) ? kHugePage : kHostAlignment;
    p = std::aligned_alloc(align, bytes);
    if (!p) {
      release_cached();
      p = std::aligned_alloc(align, bytes);
    }
    if (!p) TANDEM_FAIL("out of host memory allocating {} bytes", nbytes);
    if (align == kHugePage) ::madvise(p, bytes, MADV_HUGEPAGE);  // advice: failing it only costs speed
    host_counters.reserved.fetch_add(bytes);
  }
  host_counters.on_alloc(nbytes, false);
  return p;
}

bool kernel_has_transparent_huge_pages() {
  static const bool has = [] {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes;
    return std::getline(f, modes) && modes.find("[never]") == std::string::npos;
  }();
  return has;
}

bool huge_pages_requested() { return huge_pages_asked(); }

bool large_blocks_on_huge_pages() {
  static const bool on = huge_pages_asked() && kernel_has_transparent_huge_pages();
  return on;
}

bool caches_freed_blocks() { return kCacheBlocks; }

void deallocate(void* p, size_t nbytes) {
  if (!p) return;
  host_counters.on_free(nbytes, false);
  const size_t bytes = block_bytes(nbytes);
  if (!cached(bytes)) return free_blocks({{p, bytes}});
  std::vector<HostBlockCache::Block> evicted;
  {
    HostCache& c = host_cache();
    std::lock_guard lock(c.mutex);
    evicted = c.blocks.put(p, bytes, c.most_in_use);
  }
  free_blocks(evicted);
}

void release_cached() {
  std::vector<HostBlockCache::Block> all;
  {
    HostCache& c = host_cache();
    std::lock_guard lock(c.mutex);
    all = c.blocks.drain();
  }
  free_blocks(all);
}

void* allocate_pinned(size_t nbytes, bool* pinned) {
  *pinned = false;
  if (nbytes == 0) return nullptr;
#if TANDEM_WITH_CUDA
  if (cuda::available()) {
    void* p = nullptr;
    TANDEM_CUDA_CHECK(cudaHostAlloc(&p, nbytes, cudaHostAllocPortable));
    *pinned = true;
    pinned_counters.on_alloc(nbytes, true);
    return p;
  }
#endif
  return allocate(nbytes);
}

void deallocate_pinned(void* p, size_t nbytes, bool pinned) {
  if (!p) return;
  if (!pinned) return deallocate(p, nbytes);
#if TANDEM_WITH_CUDA
  cudaFreeHost(p);
  pinned_counters.on_free(nbytes, true);
#endif
}

MemoryStats stats() { return host_counters.snapshot(); }
void count_foreign(size_t nbytes) { host_counters.on_alloc(nbytes, true); }
void uncount_foreign(size_t nbytes) { host_counters.on_free(nbytes, true); }
MemoryStats pinned_stats() { return pinned_counters.snapshot(); }
void reset_peak() {
  host_counters.reset_peak();
  pinned_counters.reset_peak();
}

}  // namespace host_memory

namespace cuda_memory {

namespace {
thread_local AllocationLedger* tls_ledger = nullptr;
}  // namespace

AllocationLedger::AllocationLedger() {
  TANDEM_CHECK(tls_ledger == nullptr, "AllocationLedger: this thread already has one open");
  tls_ledger = this;
}

AllocationLedger::~AllocationLedger() { tls_ledger = nullptr; }

size_t AllocationLedger::live_bytes() const {
  size_t n = 0;
  for (const auto& [p, bytes] : live_) n += bytes;
  return n;
}

void AllocationLedger::on_allocate(void* p, size_t nbytes) {
  if (tls_ledger) tls_ledger->live_[p] = nbytes;
}

void AllocationLedger::on_free(void* p, size_t nbytes) {
  if (!tls_ledger) return;
  if (tls_ledger->live_.erase(p) == 0) tls_ledger->foreign_frees_ += nbytes;
}

#if TANDEM_WITH_CUDA

namespace {
constexpr int kMaxDevices = 64;
Counters device_counters[kMaxDevices];
std::once_flag pool_once[kMaxDevices];

cudaMemPool_t pool_for(int device) {
  TANDEM_CHECK(device >= 0 && device < cuda::device_count(), "no CUDA device cuda:{} ({} present)", device,
               cuda::device_count());
  cudaMemPool_t pool = nullptr;
  TANDEM_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  std::call_once(pool_once[device], [&] {
    // Keep freed memory in the pool instead of returning it at every synchronisation:
    // this is what makes the pool a caching allocator.
    uint64_t threshold = UINT64_MAX;
    TANDEM_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  });
  return pool;
}
}  // namespace

void* allocate(int device, size_t nbytes, void* stream) {
  if (nbytes == 0) return nullptr;
  cudaMemPool_t pool = pool_for(device);
  void* p = nullptr;
  cudaError_t e = cudaMallocFromPoolAsync(&p, nbytes, pool, static_cast<cudaStream_t>(stream));
  if (e == cudaErrorMemoryAllocation) {
    // The pool may hold freed blocks that do not fit this request (or that other
    // streams still use until they catch up): wait for the device, give every
    // unused block back and try once more, as PyTorch's caching allocator frees
    // its cache and retries before reporting out of memory.
    (void)cudaGetLastError();
    TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
    TANDEM_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
    e = cudaMallocFromPoolAsync(&p, nbytes, pool, static_cast<cudaStream_t>(stream));
  }
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    MemoryStats s = stats(device);
    TANDEM_FAIL("CUDA out of memory on cuda:{} allocating {} bytes ({} bytes in use, {} reserved after giving "
                "cached memory back)",
                device, nbytes, s.in_use, s.reserved);
  }
  TANDEM_CUDA_CHECK(e);
  device_counters[device].on_alloc(nbytes, false);
  AllocationLedger::on_allocate(p, nbytes);
  return p;
}

void deallocate(int device, void* p, size_t nbytes, void* stream) {
  if (!p) return;
  // Destructors must not throw: a failed free here means the context is already broken,
  // and the next checked call reports it.
  (void)cudaFreeAsync(p, static_cast<cudaStream_t>(stream));
  device_counters[device].on_free(nbytes, false);
  AllocationLedger::on_free(p, nbytes);
}

MemoryStats stats(int device) {
  MemoryStats s = device_counters[device].snapshot();
  uint64_t reserved = 0;
  TANDEM_CUDA_CHECK(cudaMemPoolGetAttribute(pool_for(device), cudaMemPoolAttrReservedMemCurrent, &reserved));
  s.reserved = reserved;
  uint64_t graphs = 0;  // every graph's on this device: a process that holds graphs is charged for them
  TANDEM_CUDA_CHECK(cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrUsedMemCurrent, &graphs));
  s.graphs = graphs;
  return s;
}

void reset_peak(int device) { device_counters[device].reset_peak(); }

void release_cached(int device) {
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  TANDEM_CUDA_CHECK(cudaMemPoolTrimTo(pool_for(device), 0));
}

#else

void* allocate(int device, size_t, void*) { TANDEM_FAIL("cannot allocate on cuda:{}: built without CUDA", device); }
void deallocate(int, void*, size_t, void*) {}
MemoryStats stats(int) { return {}; }
void reset_peak(int) {}
void release_cached(int) {}

#endif

}  // namespace cuda_memory

}  // namespace tandem

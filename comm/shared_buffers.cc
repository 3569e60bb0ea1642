#include "comm/shared_buffers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

#include "comm/host_reduce.h"
#include "comm/memfd.h"
#include "comm/ring_split.h"
#include "core/allocator.h"
#include "core/check.h"

namespace tandem::comm {

namespace {

// This process's live segments by base address (a tensor's storage frees its own).
struct Segment {
  int fd;
  uint64_t inode;
  size_t bytes;
};
std::mutex registry_mutex;
std::map<uintptr_t, Segment>& registry() {
  static auto* segments = new std::map<uintptr_t, Segment>();  // outlives static tensors' destructors
  return *segments;
}

size_t page_rounded(size_t bytes) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return std::max(page, (bytes + page - 1) / page * page);
}

// Cap on mapped peer segments: DDP's buckets are a few per rank; a freed
// segment stays mapped (its memory alive) until its fd number comes back with
// another segment or it falls out of this window.
constexpr size_t kMaxPeerSegments = 64;

}  // namespace

Tensor shared_zeros(const std::vector<int64_t>& shape, DType dtype) {
  const size_t nbytes = shape_bytes(shape, dtype);
  const size_t bytes = page_rounded(nbytes);
  const MappedMemfd m =
      create_mapped_memfd("tandem-shared-buffer", bytes, false, fmt::format("shared buffer of {} bytes", nbytes));
  void* p = m.data;
  const int fd = m.fd;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry()[reinterpret_cast<uintptr_t>(p)] = Segment{fd, m.inode, bytes};
  }
  host_memory::count_foreign(bytes);
  auto release = [p, fd, bytes] {
    host_memory::uncount_foreign(bytes);
    {
      std::lock_guard<std::mutex> lock(registry_mutex);
      registry().erase(reinterpret_cast<uintptr_t>(p));
    }
    ::munmap(p, bytes);
    ::close(fd);
  };
  auto storage = Storage::wrap(p, nbytes, Device::cpu(), release);
  return Tensor::from_storage(std::move(storage), 0, shape, dtype);
}

std::optional<SharedLocation> find_shared(const void* p, size_t bytes) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry().upper_bound(at);
  if (it == registry().begin()) return std::nullopt;
  --it;
  const Segment& s = it->second;
  if (at + bytes > it->first + s.bytes) return std::nullopt;
  return SharedLocation{s.fd, s.inode, s.bytes, at - it->first};
}

PeerSegments::~PeerSegments() {
  while (!entries_.empty()) unmap(entries_.size() - 1);
}

void PeerSegments::unmap(size_t i) {
  ::munmap(entries_[i].base, entries_[i].bytes);
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
}

char* PeerSegments::map(int rank, int pid, const SharedLocation& loc, const std::string& what) {
  ++clock_;
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.rank != rank) continue;
    if (e.inode == loc.inode) {
      e.last_use = clock_;
      return e.base + loc.offset;
    }
  }
  // The peer's fd number now names another segment: it closed (freed) the one
  // mapped under that number, so this mapping only keeps dead memory alive.
  for (size_t i = entries_.size(); i-- > 0;)
    if (entries_[i].rank == rank && entries_[i].fd == loc.fd) unmap(i);
  if (entries_.size() >= kMaxPeerSegments) {
    size_t oldest = 0;
    for (size_t i = 1; i < entries_.size(); ++i)
      if (entries_[i].last_use < entries_[oldest].last_use) oldest = i;
    unmap(oldest);
  }
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(loc.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  TANDEM_CHECK(fd >= 0, "{}: rank {} (pid {}) {}: cannot open its shared buffer {}: {}", what, rank, pid,
               errno == ENOENT ? "is gone, or freed the buffer" : "cannot be reached", path, std::strerror(errno));
  struct stat st {};
  const bool same = ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_ino) == loc.inode &&
                    static_cast<uint64_t>(st.st_size) == loc.bytes;
  void* p = same ? ::mmap(nullptr, loc.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int e = errno;
  ::close(fd);
  TANDEM_CHECK(same, "{}: rank {} (pid {}) freed its shared buffer: {} is not the one it published (inode {}, {} bytes)",
               what, rank, pid, path, loc.inode, loc.bytes);
  TANDEM_CHECK(p != MAP_FAILED, "{}: rank {} (pid {}): mapping its shared buffer ({} bytes) failed: {}", what, rank,
               pid, loc.bytes, std::strerror(e));
  entries_.push_back(Entry{rank, loc.fd, loc.inode, static_cast<char*>(p), loc.bytes, clock_});
  return static_cast<char*>(p) + loc.offset;
}

void shared_reduce_own_segment(const std::vector<const char*>& ins, const std::vector<char*>& outs, int rank,
                               DType dtype, int64_t count, ReduceOp op, std::vector<char>& scratch) {
  const int n = static_cast<int>(ins.size());
  const size_t esz = dtype_size(dtype);
  const auto [off, len] = ring_segment(count, n, rank, esz);
  const size_t piece = kSharedPieceBytes / esz * esz;
  if (scratch.size() < std::min(piece, len)) scratch.resize(std::min(piece, len));
  for (size_t at = off; at < off + len; at += piece) {
    const size_t bytes = std::min(piece, off + len - at);
    const auto elems = static_cast<int64_t>(bytes / esz);
    char* acc = scratch.data();
    // The ring's order for this segment: its owner's input first, then each next rank's.
    if (n == 1) std::memcpy(acc, ins[0] + at, bytes);
    for (int k = 1; k < n; ++k) {
      const int j = (rank + k) % n;
      host_reduce(acc, k == 1 ? ins[static_cast<size_t>(rank)] + at : acc, ins[static_cast<size_t>(j)] + at, dtype,
                  elems, op);
    }
    if (op == ReduceOp::Avg) host_divide(acc, dtype, elems, n);
    for (int k = 0; k < n; ++k) std::memcpy(outs[static_cast<size_t>((rank + k) % n)] + at, acc, bytes);
  }
}

}  // namespace tandem::comm

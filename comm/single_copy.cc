#include "comm/single_copy.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "comm/host_reduce.h"
#include "comm/ring_split.h"
#include "core/check.h"

namespace tandem::comm {

namespace {

long system_read(int pid, void* local, uint64_t remote, size_t bytes) {
  iovec l{local, bytes}, r{reinterpret_cast<void*>(remote), bytes};
  return ::process_vm_readv(pid, &l, 1, &r, 1, 0);
}

std::string errno_text(int e) {
  const char* name = e == EPERM ? "EPERM" : e == ENOSYS ? "ENOSYS" : e == ESRCH ? "ESRCH" : e == EFAULT ? "EFAULT"
                                                                                        : nullptr;
  return name ? fmt::format("{} ({})", std::strerror(e), name) : std::string(std::strerror(e));
}

}  // namespace

SingleCopy::SingleCopy(int rank, int size, CrossMemoryRead read)
    : rank_(rank), size_(size), read_(read ? std::move(read) : CrossMemoryRead(system_read)) {}

std::string SingleCopy::probe(int pid, uint64_t address, uint64_t expected) const {
  uint64_t got = 0;
  errno = 0;
  const long n = read_(pid, &got, address, sizeof got);
  if (n != static_cast<long>(sizeof got))
    return fmt::format("process_vm_readv from pid {}: {}", pid, n < 0 ? errno_text(errno) : "a short read");
  if (got != expected) return fmt::format("process_vm_readv from pid {} read {:#x} instead of {:#x}", pid, got, expected);
  return "";
}

void SingleCopy::read(const SingleCopyPeer& p, int peer, void* local, uint64_t remote, size_t bytes,
                      const std::string& what) const {
  auto* out = static_cast<char*>(local);
  while (bytes > 0) {
    errno = 0;
    const long n = read_(p.pid, out, remote, bytes);
    if (n <= 0) {
      const int e = errno;
      const char* why = e == ESRCH    ? "is gone (the process exited or was killed)"
                        : e == EFAULT ? "no longer maps its buffer (it left the collective)"
                                      : "cannot be read";
      TANDEM_FAIL("{}: rank {} (pid {}) {}: process_vm_readv of {} bytes at {:#x}: {}", what, peer, p.pid, why, bytes,
                  remote, n == 0 ? "nothing read" : errno_text(e));
    }
    out += n;
    remote += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

void SingleCopy::reduce_own_segment(const std::vector<SingleCopyPeer>& peers, const char* src, char* buf, DType dtype,
                                    int64_t count, ReduceOp op, const std::string& what) {
  const size_t esz = dtype_size(dtype);
  const auto [off, len] = ring_segment(count, size_, rank_, esz);
  const size_t piece = kSingleCopyPieceBytes / esz * esz;
  if (scratch_.size() < std::min(piece, len)) scratch_.resize(std::min(piece, len));
  for (size_t at = off; at < off + len; at += piece) {
    const size_t bytes = std::min(piece, off + len - at);
    const auto elems = static_cast<int64_t>(bytes / esz);
    // The ring's order for this segment: its owner's input first, then each next rank's.
    for (int k = 1; k < size_; ++k) {
      const int j = (rank_ + k) % size_;
      read(peers[static_cast<size_t>(j)], j, scratch_.data(), peers[static_cast<size_t>(j)].src + at, bytes, what);
      host_reduce(buf + at, k == 1 ? src + at : buf + at, scratch_.data(), dtype, elems, op);
    }
    if (op == ReduceOp::Avg) host_divide(buf + at, dtype, elems, size_);
  }
}

void SingleCopy::gather_other_segments(const std::vector<SingleCopyPeer>& peers, char* buf, DType dtype,
                                       int64_t count, const std::string& what) const {
  const size_t esz = dtype_size(dtype);
  // Starting from the next rank spreads the readers over the owners.
  for (int k = 1; k < size_; ++k) {
    const int j = (rank_ + k) % size_;
    const auto [off, len] = ring_segment(count, size_, j, esz);
    read(peers[static_cast<size_t>(j)], j, buf + off, peers[static_cast<size_t>(j)].dst + off, len, what);
  }
}

}  // namespace tandem::comm

// Host buffers that every rank on one host can map, and the all_reduce that
// reads and writes them in place (PyTorch calls such buffers symmetric
// memory; NCCL registers user buffers for the same reason).
//
// A shared buffer is a tensor whose storage is a memfd segment of its own
// (MAP_SHARED, zero-filled, freed with its last view). A peer process maps it
// by opening /proc/<pid>/fd/<fd> of the owner: the same permission check as
// process_vm_readv (same uid, no ptrace restriction), so where single copy
// works this does too; the ring probes it once at setup.
//
// The all_reduce on shared buffers (shared_reduce_own_segment): rank r owns
// segment r (the ring's split). It reads segment r of every rank's input,
// piece by piece into a scratch piece that stays in L1/L2, reducing in the
// ring's order (its own input, then ranks r+1, r+2, ...) so the bits equal
// the ring's, and writes the finished piece into every rank's output. Per
// rank for S bytes: S read, S written, one pass, no kernel copy and no
// second (all-gather) pass: single copy (comm/single_copy.h) reads 2S - S/n
// through process_vm_readv, which pins pages and on the 2-core VM of
// docs/results moves 52-82 % of memcpy's rate.
//
// The caller provides the synchronisation: every rank has entered the op
// (its input is final, and no rank still reads or writes its output from an
// earlier op) before any rank starts, and no rank returns before every rank
// has finished writing. Each mapping keeps the segment alive, so a peer that
// dies mid-op leaves memory behind only until this rank unmaps it; the
// caller's barrier reports the death.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "core/tensor.h"

namespace tandem::comm {

// A zero-filled CPU tensor on a segment of its own that peers can map. Throws Error when memfd is refused.
Tensor shared_zeros(const std::vector<int64_t>& shape, DType dtype);

// Where a byte range of this process lies in one of its live shared segments.
struct SharedLocation {
  int fd = -1;
  uint64_t inode = 0;   // tells a reused fd number from the segment published before
  uint64_t bytes = 0;   // the segment's
  uint64_t offset = 0;  // of the range in it
};

// The segment holding [p, p + bytes) entirely; nullopt if none does.
std::optional<SharedLocation> find_shared(const void* p, size_t bytes);

// One rank's mappings of its peers' segments, reused across ops.
class PeerSegments {
 public:
  PeerSegments() = default;
  ~PeerSegments();
  PeerSegments(const PeerSegments&) = delete;
  PeerSegments& operator=(const PeerSegments&) = delete;

  // The address here of `loc`'s range in rank `rank`'s (process `pid`'s) segment,
  // mapping it on first use; throws Error naming the rank and `what`.
  char* map(int rank, int pid, const SharedLocation& loc, const std::string& what);
  size_t mapped() const { return entries_.size(); }

 private:
  struct Entry {
    int rank;
    int fd;
    uint64_t inode;
    char* base;
    size_t bytes;
    uint64_t last_use;
  };
  void unmap(size_t i);

  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

inline constexpr size_t kSharedPieceBytes = 64 << 10;

// outs[q]'s segment `rank` = op over q of ins[q]'s segment `rank`, for every
// rank q (ins and outs indexed by rank, this process's addresses of them).
// `scratch` holds one piece.
void shared_reduce_own_segment(const std::vector<const char*>& ins, const std::vector<char*>& outs, int rank,
                               DType dtype, int64_t count, ReduceOp op, std::vector<char>& scratch);

}  // namespace tandem::comm

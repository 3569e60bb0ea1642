// The ring backend's single-copy all_reduce between ranks on one host: each
// rank reads its peers' buffers directly with Linux cross-memory attach
// (process_vm_readv), so every byte crosses memory once instead of being
// copied into a shared-memory ring and reduced out of it.
//
// Rank r owns segment r (the ring's split: segments differ by at most one
// element). Reduce-scatter: r reads segment r of each peer's input, piece by
// piece (kSingleCopyPieceBytes, so the piece and the accumulating output stay
// in L2), and reduces it into its own output in the order the ring would
// (its own input, then ranks r+1, r+2, ...), so the result is bitwise the
// ring's. All-gather: r reads segment j of rank j's output straight into its
// own output. Memory traffic per rank for S bytes: S read from peers + S/n
// own input + S written (the ring: 2(n-1)/n S through the shared ring, each
// byte copied in and reduced or copied out).
//
// The caller provides the synchronisation (comm/ring_process_group.cc: small
// passes over the ring links, whose liveness wakes every wait when a peer
// dies): the peers' addresses before the reduce-scatter, a barrier between
// the halves, and one after the all-gather (a peer may still be reading this
// rank's output; the caller may write it once the op returns).
//
// A read from a dead peer fails with ESRCH, from a buffer that is no longer
// mapped with EFAULT: both throw Error naming the peer's rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/process_group.h"

namespace tandem::comm {

inline constexpr size_t kSingleCopyPieceBytes = 256 << 10;

// One rank's view of the others in one op.
struct SingleCopyPeer {
  int pid = 0;
  uint64_t src = 0;  // its input's address in its own process
  uint64_t dst = 0;  // its output's
};

class SingleCopy {
 public:
  // `read` empty: process_vm_readv.
  SingleCopy(int rank, int size, CrossMemoryRead read);

  // Reads the word at `address` in process `pid`; "" when it reads `expected`,
  // else why not ("process_vm_readv from pid 42: Operation not permitted (EPERM)").
  std::string probe(int pid, uint64_t address, uint64_t expected) const;

  // buf's segment rank = op over ranks of their src's segment rank (buf may be src).
  void reduce_own_segment(const std::vector<SingleCopyPeer>& peers, const char* src, char* buf, DType dtype,
                          int64_t count, ReduceOp op, const std::string& what);
  // buf's segment j = rank j's output segment j, for every j != rank.
  void gather_other_segments(const std::vector<SingleCopyPeer>& peers, char* buf, DType dtype, int64_t count,
                             const std::string& what) const;

 private:
  // Reads all `bytes` or throws naming rank `peer`.
  void read(const SingleCopyPeer& p, int peer, void* local, uint64_t remote, size_t bytes,
            const std::string& what) const;

  int rank_, size_;
  CrossMemoryRead read_;
  std::vector<char> scratch_;
};

}  // namespace tandem::comm

// One pipelined pass of a ring collective between this rank and its two
// neighbours: bytes go to the right neighbour and come from the left one,
// both directions at once (non-blocking sockets and poll(), one thread).
//
// A pass is two ordered lists. Sends are byte ranges to stream to the right;
// a send may be gated by a receive: it only goes out as far as that receive
// has been processed, which is what chains the steps of a ring (what rank r
// receives and reduces at step s is what it forwards at step s+1) and lets
// them overlap chunk by chunk instead of step by step. Receives either land
// directly in their destination or, when `reduce` is set, land in a
// chunk-sized scratch buffer and are handed to the reduce callback one chunk
// at a time (whole elements), while the kernel's socket buffers keep
// receiving the next chunk.
//
// Every wait is bounded: if no byte moves in either direction for
// `idle_timeout`, or a connection closes, it throws Error naming the
// neighbour rank at fault; the caller then tears the ring down so the
// failure propagates to every rank. (A slow but moving transfer of a large
// buffer is not an error.)
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "comm/socket.h"
#include "core/check.h"

namespace tandem::comm {

// Thrown when nothing moved for the idle timeout (as opposed to a closed connection).
class PeerTimeout : public Error {
 public:
  using Error::Error;
};

struct RingSend {
  const char* data;
  size_t bytes;
  int gate = -1;  // index of the RingRecv whose processed bytes bound this send; -1: all ready
};

struct RingRecv {
  char* dst;
  size_t bytes;
  bool reduce = false;
};

struct RingLink {
  int send_fd = -1;  // to the right neighbour; -1 when this pass sends nothing
  int recv_fd = -1;  // from the left neighbour; -1 when this pass receives nothing
  std::string right_name;  // "rank 3 (right neighbour, 10.0.0.4:4711)"
  std::string left_name;
};

// reduce(recv_index, dst, src, bytes): combine `bytes` of received data at src into dst.
using RingReduceFn = std::function<void(size_t recv_index, char* dst, const char* src, size_t bytes)>;

struct RingTransferOptions {
  size_t chunk_bytes = 256 << 10;  // reduce granularity; a multiple of every element size
  size_t max_send_bytes = 1 << 20; // per send() call, so receiving gets its turn
};

void ring_transfer(const RingLink& link, const std::vector<RingSend>& sends, const std::vector<RingRecv>& recvs,
                   const RingReduceFn& reduce, std::vector<char>& scratch, const RingTransferOptions& options,
                   std::chrono::milliseconds idle_timeout, const std::string& what);

}  // namespace tandem::comm

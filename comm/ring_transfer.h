// One pipelined pass of a ring collective between this rank and its two
// neighbours: bytes go to the right neighbour and come from the left one,
// both directions at once (non-blocking link ends and poll(), one thread).
// The ends (comm/ring_link.h) are TCP connections or, between ranks on one
// host, shared-memory rings (comm/shm_ring.h); the pass is the same for both.
//
// A pass is two ordered lists. Sends are byte ranges to stream to the right;
// a send may be gated by a receive: it only goes out as far as that receive
// has been processed, which is what chains the steps of a ring (what rank r
// receives and reduces at step s is what it forwards at step s+1) and lets
// them overlap chunk by chunk instead of step by step. Receives either land
// directly in their destination or, when `reduce` is set, land in a
// chunk-sized scratch buffer and are handed to the reduce callback one chunk
// at a time (whole elements), while the kernel's socket buffers keep
// receiving the next chunk. An end with zero copy (shared memory) is reduced
// from where the bytes lie instead, a chunk or what is there at a time, with
// no copy into scratch. Send i of a rank is receive i of its right
// neighbour: both sides derive their lists from the same op.
//
// Every message is framed: a 32-byte header (RingFrame: the op's sequence
// number, which collective, its dtype and root, the message's index in the
// pass and its length) goes before the payload, in the same segment as its
// first bytes. The receiver checks the header against the message it expects
// as soon as it has it, before any payload byte is reduced or counted. TCP
// carries bare bytes, so without this a rank that issued a different
// collective, or the same one with a different size, would be read as
// payload: wrong sums, or a wait for bytes that never come until the idle
// timeout. With it, the first frame of the first op where the ranks differ
// fails with an Error naming the neighbour and both (sequence, bytes).
//
// Waiting on shared memory first spins for `options.spin` (a neighbour on
// another core usually answers within microseconds), then sleeps in poll()
// like TCP.
//
// Every wait is bounded: if no byte moves in either direction for
// `idle_timeout`, or a connection closes, it throws Error naming the
// neighbour rank at fault; the caller then tears the ring down so the
// failure propagates to every rank. (A slow but moving transfer of a large
// buffer is not an error.)
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "comm/ring_link.h"
#include "comm/socket.h"
#include "core/check.h"
#include "core/dtype.h"

namespace tandem::comm {

// Thrown when nothing moved for the idle timeout (as opposed to a closed connection).
class PeerTimeout : public Error {
 public:
  using Error::Error;
};

// DirectAllReduce: the small passes of an all_reduce that single copy or
// shared buffers carry (comm/ring_process_group.h), so a rank on that path
// and one on the ring fail at the first frame instead of misreading it.
enum class RingOp : uint8_t { AllReduce = 1, Broadcast, AllGather, ReduceScatter, Barrier, DirectAllReduce };
std::string_view ring_op_name(RingOp op);

// What one message of a pass is, as its header says on the wire.
struct RingFrame {
  uint64_t seq = 0;  // the op's position in the group's sequence (the same on every rank)
  RingOp op = RingOp::AllReduce;
  DType dtype = DType::F32;
  int32_t root = -1;  // broadcast: the root; -1 otherwise
  uint32_t step = 0;  // the message's index in its pass
  uint64_t bytes = 0;
  bool operator==(const RingFrame&) const = default;
};
constexpr size_t kRingFrameHeaderBytes = 32;
void encode_ring_frame(const RingFrame& f, unsigned char* out);  // kRingFrameHeaderBytes
// False when the bytes are not a frame header at all (the streams are out of step).
bool decode_ring_frame(const unsigned char* in, RingFrame* f);
// "sequence 5, 400 bytes (all_reduce f32, message 0)"
std::string describe_ring_frame(const RingFrame& f);

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
  RingSendEnd* send = nullptr;  // to the right neighbour; may be null when the pass sends nothing
  RingRecvEnd* recv = nullptr;  // from the left neighbour; may be null when the pass receives nothing
  std::string right_name;  // "rank 3 (right neighbour, 10.0.0.4:4711)"
  std::string left_name;
};

// reduce(recv_index, dst, src, bytes): combine `bytes` of received data at src into dst.
using RingReduceFn = std::function<void(size_t recv_index, char* dst, const char* src, size_t bytes)>;

struct RingTransferOptions {
  size_t chunk_bytes = 256 << 10;  // reduce granularity; a multiple of every element size
  size_t max_send_bytes = 1 << 20; // per send() call, so receiving gets its turn
  std::chrono::microseconds spin{0};  // shared memory: how long to retry before sleeping
};

// `op` says which op the pass belongs to (seq, op, dtype, root); the frames'
// step and bytes come from the lists.
void ring_transfer(const RingLink& link, const RingFrame& op, const std::vector<RingSend>& sends,
                   const std::vector<RingRecv>& recvs, const RingReduceFn& reduce, std::vector<char>& scratch,
                   const RingTransferOptions& options, std::chrono::milliseconds idle_timeout, const std::string& what);

}  // namespace tandem::comm

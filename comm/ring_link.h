// The two ends of a ring rank's links as a pass (comm/ring_transfer.h) sees
// them: a byte stream out to the right neighbour and one in from the left,
// whatever carries the bytes (TCP here, shared memory in comm/shm_ring.h).
//
// Both ends are non-blocking: write_some / read_some move what they can now
// and return 0 when they cannot. To wait, the pass asks each end for the
// descriptors to poll() (arm), sleeps, and hands the results back (disarm),
// where an end whose peer hung up throws RingPeerLost. A pass is framed
// (RingFrame headers); begin_message() marks where a frame starts in the
// stream, which both ends of a link see at the same byte, so a transport may
// align frames (shared memory does, so payloads are element-aligned in place).
// A receive end may offer zero copy: peek() shows readable bytes where they
// lie and consume() releases them, so the reduce reads them in place.
#pragma once

#include <poll.h>
#include <sys/uio.h>

#include <cstddef>
#include <string>
#include <utility>

namespace tandem::comm {

// The peer closed its end or the connection broke; `why` completes "<peer> ...".
struct RingPeerLost {
  std::string why;
};

// At most this many pollfds per end.
constexpr int kRingEndMaxPollFds = 2;

class RingSendEnd {
 public:
  virtual ~RingSendEnd() = default;
  virtual void begin_message() {}
  // Takes a prefix of the iovecs' bytes without blocking; returns how many (0: no room now).
  virtual size_t write_some(const iovec* iov, int n) = 0;
  // Fills fds for a wait (`for_room`: this end waits for room to write, else only for a hang-up); returns the count.
  virtual int arm(pollfd* fds, bool for_room) = 0;
  // After poll(): throws RingPeerLost when the peer is gone.
  virtual void disarm(const pollfd* fds, int n) = 0;
  // True when waiting on memory, so that a short spin is cheaper than a sleep.
  virtual bool spins() const { return false; }
};

class RingRecvEnd {
 public:
  virtual ~RingRecvEnd() = default;
  virtual void begin_message() {}
  // Fills a prefix of the iovecs without blocking; returns how many bytes (0: none yet).
  // Throws RingPeerLost when the peer closed.
  virtual size_t read_some(const iovec* iov, int n) = 0;
  // Zero copy: readable bytes in place, contiguous (perhaps fewer than are readable).
  virtual bool zero_copy() const { return false; }
  virtual std::pair<const char*, size_t> peek() { return {nullptr, 0}; }
  virtual void consume(size_t bytes) { (void)bytes; }
  virtual int arm(pollfd* fds, bool for_data) = 0;
  virtual void disarm(const pollfd* fds, int n) = 0;
  virtual bool spins() const { return false; }
};

// TCP: the descriptor is owned elsewhere (comm/socket.h) and must be non-blocking.
class TcpSendEnd final : public RingSendEnd {
 public:
  explicit TcpSendEnd(int fd) : fd_(fd) {}
  size_t write_some(const iovec* iov, int n) override;
  int arm(pollfd* fds, bool for_room) override;
  void disarm(const pollfd* fds, int n) override;

 private:
  int fd_;
};

class TcpRecvEnd final : public RingRecvEnd {
 public:
  explicit TcpRecvEnd(int fd) : fd_(fd) {}
  size_t read_some(const iovec* iov, int n) override;
  int arm(pollfd* fds, bool for_data) override;
  void disarm(const pollfd*, int) override {}  // a hang-up shows as end-of-stream in the next read

 private:
  int fd_;
};

}  // namespace tandem::comm

// The ring backend's same-host link: one direction (rank r -> r+1) as a
// single-producer / single-consumer byte ring in shared memory.
//
// ShmRing::create makes the ring in an anonymous memfd (never a name in
// /dev/shm or on any file system) with two eventfds: `data`, which the
// producer signals when it added bytes while the consumer sleeps, and `room`,
// which the consumer signals when it freed bytes while the producer sleeps.
// The three descriptors go to the peer over a Unix socket (comm/shm_handoff.h)
// and ShmRing::attach maps them there. The memory lives exactly as long as a
// process maps it: a rank killed by SIGKILL leaves nothing behind.
//
// The stream is the same bytes TCP would carry (RingFrame headers and
// payloads), except that every message starts at a multiple of 8 bytes in the
// stream (begin_message skips up to 7 bytes on both sides), and the capacity
// is a multiple of 8: a payload of any dtype lies element-aligned in the ring
// and never splits an element across its end, so the reduce reads it in place.
//
// Counters: head (bytes ever written) and tail (bytes ever consumed) are
// 64-bit and never wrap in practice; each side's waiting flag and the other
// side's counter are ordered by seq_cst fences (Dekker), so a wake-up is
// never lost: either the sleeper sees the new counter, or the waker sees the
// flag and writes the eventfd.
//
// Liveness is not in shared memory: each end also watches the link's TCP
// connection (kept from the rendezvous, carrying no data), which the kernel
// closes when a process dies and the ring's failure path shuts down, so a
// dead or failed peer wakes every wait at once (RingPeerLost).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "comm/ring_link.h"

namespace tandem::comm {

class ShmRing {
 public:
  struct Fds {
    int memory = -1, data = -1, room = -1;
  };
  // A new ring of `capacity` bytes (a multiple of 8, at least 64); owns its descriptors.
  static std::shared_ptr<ShmRing> create(size_t capacity);
  // Maps a ring received from its creator; takes ownership of the descriptors. Throws
  // Error when they are not a ring of this build (`peer` names the sender).
  static std::shared_ptr<ShmRing> attach(Fds fds, const std::string& peer);
  ~ShmRing();
  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;

  const Fds& fds() const { return fds_; }
  size_t capacity() const { return capacity_; }

  struct Control;  // the shared header (shm_ring.cc)

 private:
  ShmRing() = default;
  friend class ShmSendEnd;
  friend class ShmRecvEnd;
  Fds fds_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  Control* control_ = nullptr;
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

// Producer end; `liveness_fd` is the TCP connection to the same neighbour.
class ShmSendEnd final : public RingSendEnd {
 public:
  ShmSendEnd(std::shared_ptr<ShmRing> ring, int liveness_fd) : ring_(std::move(ring)), liveness_fd_(liveness_fd) {}
  void begin_message() override { align_ = true; }
  size_t write_some(const iovec* iov, int n) override;
  int arm(pollfd* fds, bool for_room) override;
  void disarm(const pollfd* fds, int n) override;
  bool spins() const override { return true; }

 private:
  std::shared_ptr<ShmRing> ring_;
  int liveness_fd_;
  bool align_ = false;
  bool waiting_ = false;
  uint64_t seen_tail_ = 0;  // the consumer's counter when this end last looked for room
};

// Consumer end, with zero copy.
class ShmRecvEnd final : public RingRecvEnd {
 public:
  ShmRecvEnd(std::shared_ptr<ShmRing> ring, int liveness_fd) : ring_(std::move(ring)), liveness_fd_(liveness_fd) {}
  void begin_message() override { align_ = true; }
  size_t read_some(const iovec* iov, int n) override;
  bool zero_copy() const override { return true; }
  std::pair<const char*, size_t> peek() override;
  void consume(size_t bytes) override;
  int arm(pollfd* fds, bool for_data) override;
  void disarm(const pollfd* fds, int n) override;
  bool spins() const override { return true; }

 private:
  // Applies a pending alignment once the producer's padding is there; false if not yet.
  bool aligned(uint64_t head, uint64_t& tail);
  std::shared_ptr<ShmRing> ring_;
  int liveness_fd_;
  bool align_ = false;
  bool waiting_ = false;
  uint64_t seen_head_ = 0;  // the producer's counter when this end last looked for bytes
};

}  // namespace tandem::comm

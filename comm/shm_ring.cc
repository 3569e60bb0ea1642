#include "comm/shm_ring.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "comm/memfd.h"
#include "core/check.h"

namespace tandem::comm {

namespace {

constexpr uint64_t kRingMagic = 0x474e4952444e54ull;  // "TNDRING"
constexpr size_t kDataOffset = 4096;                  // the data starts on its own page
constexpr size_t kPublishBytes = 64 << 10;            // the producer's head moves at least this often

size_t page_round(size_t n) { return (n + 4095) / 4096 * 4096; }

void signal(int efd) {
  // A full counter (EAGAIN) already wakes the sleeper; nothing else can fail on a valid eventfd.
  uint64_t one = 1;
  [[maybe_unused]] ssize_t k = ::write(efd, &one, sizeof one);
}

void drain(int efd) {
  uint64_t v;
  [[maybe_unused]] ssize_t k = ::read(efd, &v, sizeof v);
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Copies between the stream position `pos` of a ring and flat memory, across its end.
void copy_in(char* ring, size_t cap, uint64_t pos, const char* src, size_t n) {
  size_t at = pos % cap, first = std::min(n, cap - at);
  std::memcpy(ring + at, src, first);
  if (n > first) std::memcpy(ring, src + first, n - first);
}
void copy_out(const char* ring, size_t cap, uint64_t pos, char* dst, size_t n) {
  size_t at = pos % cap, first = std::min(n, cap - at);
  std::memcpy(dst, ring + at, first);
  if (n > first) std::memcpy(dst + first, ring, n - first);
}

size_t pad_to_8(uint64_t pos) { return static_cast<size_t>((8 - pos % 8) % 8); }

}  // namespace

// The shared header. The counters sit on their own cache lines so the two
// processes do not bounce one line between them on every update.
struct ShmRing::Control {
  uint64_t magic;
  uint64_t capacity;
  alignas(64) std::atomic<uint64_t> head;  // bytes written, by the producer
  alignas(64) std::atomic<uint64_t> tail;  // bytes consumed, by the consumer
  alignas(64) std::atomic<uint32_t> consumer_waiting;
  alignas(64) std::atomic<uint32_t> producer_waiting;
};
static_assert(sizeof(ShmRing::Control) <= kDataOffset);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "shared-memory counters must be lock-free (address-free) atomics");

std::shared_ptr<ShmRing> ShmRing::create(size_t capacity) {
  TANDEM_CHECK(capacity >= 64 && capacity % 8 == 0, "shared-memory ring capacity {} must be a multiple of 8, >= 64",
               capacity);
  std::shared_ptr<ShmRing> ring(new ShmRing());
  ring->map_bytes_ = kDataOffset + page_round(capacity);
  const MappedMemfd m = create_mapped_memfd("tandem-ring", ring->map_bytes_, true,
                                            fmt::format("a {}-byte shared-memory ring", ring->map_bytes_));
  ring->fds_.memory = m.fd;
  ring->map_ = m.data;
  ring->fds_.data = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ring->fds_.room = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  TANDEM_CHECK(ring->fds_.data >= 0 && ring->fds_.room >= 0, "eventfd: {}", std::strerror(errno));
  ring->control_ = new (ring->map_) Control{kRingMagic, capacity, {0}, {0}, {0}, {0}};
  ring->data_ = static_cast<char*>(ring->map_) + kDataOffset;
  ring->capacity_ = capacity;
  return ring;
}

std::shared_ptr<ShmRing> ShmRing::attach(Fds fds, const std::string& peer) {
  std::shared_ptr<ShmRing> ring(new ShmRing());
  ring->fds_ = fds;
  struct stat st {};
  TANDEM_CHECK(::fstat(fds.memory, &st) == 0 && st.st_size > static_cast<off_t>(kDataOffset),
               "the shared-memory ring from {} is not a ring (fstat: {}, {} bytes)", peer, std::strerror(errno),
               st.st_size);
  ring->map_bytes_ = static_cast<size_t>(st.st_size);
  ring->map_ = ::mmap(nullptr, ring->map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fds.memory, 0);
  TANDEM_CHECK(ring->map_ != MAP_FAILED, "mmap of the shared-memory ring from {}: {}", peer, std::strerror(errno));
  ring->control_ = static_cast<Control*>(ring->map_);
  ring->capacity_ = ring->control_->capacity;
  TANDEM_CHECK(ring->control_->magic == kRingMagic && ring->capacity_ % 8 == 0 && ring->capacity_ >= 64 &&
                   kDataOffset + page_round(ring->capacity_) == ring->map_bytes_,
               "the shared-memory ring from {} has a foreign layout (another Tandem build?)", peer);
  ring->data_ = static_cast<char*>(ring->map_) + kDataOffset;
  return ring;
}

ShmRing::~ShmRing() {
  if (map_ != nullptr && map_ != MAP_FAILED) ::munmap(map_, map_bytes_);
  close_fd(fds_.memory);
  close_fd(fds_.data);
  close_fd(fds_.room);
}

// --- producer ------------------------------------------------------------------

size_t ShmSendEnd::write_some(const iovec* iov, int n) {
  ShmRing::Control& c = *ring_->control_;
  const size_t cap = ring_->capacity_;
  const uint64_t start = c.head.load(std::memory_order_relaxed);  // only this end writes it
  uint64_t head = start;
  seen_tail_ = c.tail.load(std::memory_order_acquire);
  size_t room = cap - static_cast<size_t>(head - seen_tail_);
  if (align_) {
    const size_t pad = pad_to_8(head);
    if (room < pad) return 0;
    head += pad, room -= pad, align_ = false;
  }
  // Published piece by piece, so the consumer starts on the first bytes while
  // the rest are copied (a large write would otherwise serialise the two).
  size_t total = 0, unpublished = head != start ? 1 : 0;
  auto publish = [&] {
    c.head.store(head, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with the consumer's flag-then-check
    if (c.consumer_waiting.load(std::memory_order_relaxed) != 0) signal(ring_->fds_.data);
    unpublished = 0;
  };
  for (int i = 0; i < n && room > 0; ++i) {
    for (size_t done = 0; done < iov[i].iov_len && room > 0;) {
      size_t k = std::min({room, iov[i].iov_len - done, kPublishBytes});
      copy_in(ring_->data_, cap, head, static_cast<const char*>(iov[i].iov_base) + done, k);
      head += k, room -= k, total += k, done += k, unpublished += k;
      if (unpublished >= kPublishBytes) publish();
    }
  }
  if (unpublished > 0) publish();
  return total;
}

int ShmSendEnd::arm(pollfd* fds, bool for_room) {
  // The right neighbour never writes on the TCP connection: readable means it closed.
  fds[0] = pollfd{liveness_fd_, POLLRDHUP, 0};
  if (!for_room) return 1;
  ShmRing::Control& c = *ring_->control_;
  c.producer_waiting.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  waiting_ = true;
  // Room freed before the flag was visible sent no wake-up: look once more.
  if (c.tail.load(std::memory_order_relaxed) != seen_tail_) signal(ring_->fds_.room);
  fds[1] = pollfd{ring_->fds_.room, POLLIN, 0};
  return 2;
}

void ShmSendEnd::disarm(const pollfd* fds, int) {
  if (waiting_) {
    ring_->control_->producer_waiting.store(0, std::memory_order_relaxed);
    drain(ring_->fds_.room);
    waiting_ = false;
  }
  if (fds[0].revents & (POLLRDHUP | POLLHUP | POLLERR))
    throw RingPeerLost{"closed the connection (the process died or gave up)"};
}

// --- consumer ------------------------------------------------------------------

namespace {
void publish_tail(ShmRing::Control& c, uint64_t tail, int room_fd) {
  c.tail.store(tail, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with the producer's flag-then-check
  if (c.producer_waiting.load(std::memory_order_relaxed) != 0) signal(room_fd);
}
}  // namespace

bool ShmRecvEnd::aligned(uint64_t head, uint64_t& tail) {
  if (!align_) return true;
  const size_t pad = pad_to_8(tail);
  if (head - tail < pad) return false;
  tail += pad;
  align_ = false;
  if (pad > 0) publish_tail(*ring_->control_, tail, ring_->fds_.room);
  return true;
}

size_t ShmRecvEnd::read_some(const iovec* iov, int n) {
  ShmRing::Control& c = *ring_->control_;
  const uint64_t head = seen_head_ = c.head.load(std::memory_order_acquire);
  uint64_t tail = c.tail.load(std::memory_order_relaxed);  // only this end writes it
  if (!aligned(head, tail)) return 0;
  size_t avail = static_cast<size_t>(head - tail), total = 0;
  for (int i = 0; i < n && avail > 0; ++i) {
    size_t k = std::min(avail, iov[i].iov_len);
    copy_out(ring_->data_, ring_->capacity_, tail, static_cast<char*>(iov[i].iov_base), k);
    tail += k, avail -= k, total += k;
  }
  if (total > 0) publish_tail(c, tail, ring_->fds_.room);
  return total;
}

std::pair<const char*, size_t> ShmRecvEnd::peek() {
  ShmRing::Control& c = *ring_->control_;
  const uint64_t head = seen_head_ = c.head.load(std::memory_order_acquire);
  uint64_t tail = c.tail.load(std::memory_order_relaxed);
  if (!aligned(head, tail)) return {nullptr, 0};
  const size_t at = static_cast<size_t>(tail % ring_->capacity_);
  return {ring_->data_ + at, std::min(static_cast<size_t>(head - tail), ring_->capacity_ - at)};
}

void ShmRecvEnd::consume(size_t bytes) {
  ShmRing::Control& c = *ring_->control_;
  publish_tail(c, c.tail.load(std::memory_order_relaxed) + bytes, ring_->fds_.room);
}

int ShmRecvEnd::arm(pollfd* fds, bool for_data) {
  fds[0] = pollfd{liveness_fd_, POLLIN | POLLRDHUP, 0};
  if (!for_data) return 1;
  ShmRing::Control& c = *ring_->control_;
  c.consumer_waiting.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  waiting_ = true;
  // The pass waits for more than is there (a partial header or element): sleep
  // until the producer adds bytes, which it signals now that the flag is set.
  // Bytes it added before seeing the flag are caught by this look.
  if (c.head.load(std::memory_order_relaxed) != seen_head_) signal(ring_->fds_.data);
  fds[1] = pollfd{ring_->fds_.data, POLLIN, 0};
  return 2;
}

void ShmRecvEnd::disarm(const pollfd* fds, int) {
  if (waiting_) {
    ring_->control_->consumer_waiting.store(0, std::memory_order_relaxed);
    drain(ring_->fds_.data);
    waiting_ = false;
  }
  if (fds[0].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) {
    // Bytes a peer wrote before it exited are still good (as TCP delivers
    // what was sent before the close): the peer only counts as gone once the
    // ring holds nothing this end has not looked at. A rank that finished the
    // last op and exited must not fail its neighbour's last op.
    if (ring_->control_->head.load(std::memory_order_acquire) != seen_head_) return;
    char byte;
    ssize_t k = ::recv(liveness_fd_, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      throw RingPeerLost{"closed the connection (the process died or gave up)"};
    if (k > 0)
      throw RingPeerLost{"sent bytes on the TCP connection of a shared-memory link (the two ranks disagree on the "
                         "transport)"};
  }
}

}  // namespace tandem::comm

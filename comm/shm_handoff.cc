#include "comm/shm_handoff.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <thread>

#include "comm/little_endian.h"
#include "core/check.h"

namespace tandem::comm {

namespace {

// The hand-off message, the same on both sides: one byte ('R') and the ring's
// three descriptors as SCM_RIGHTS. Not copyable: msg points into the object.
struct FdMessage {
  static constexpr size_t kFds = 3;
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFds)] = {};
  msghdr msg{};

  FdMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

std::string namespace_inode(const char* path) {
  struct stat st {};
  if (::stat(path, &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

sockaddr_un abstract_address(const std::string& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  TANDEM_CHECK(name.size() + 1 < sizeof a.sun_path, "abstract socket name '{}' is too long", name);
  a.sun_path[0] = '\0';  // abstract: no file
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

// Waits for `events` on fd; false at the deadline.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    TANDEM_CHECK(errno == EINTR, "poll: {}", std::strerror(errno));
  }
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

std::string host_identity() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(boot, boot_id);
  char host[256] = {};
  const std::string ipc = namespace_inode("/proc/self/ns/ipc"), net = namespace_inode("/proc/self/ns/net");
  if (boot_id.empty() || ::gethostname(host, sizeof host - 1) != 0 || ipc.empty() || net.empty()) return "";
  return std::string(host) + " boot " + boot_id + " ipc " + ipc + " net " + net;
}

ShmOffer::ShmOffer(uint64_t nonce, int rank) : nonce_(nonce) {
  static std::atomic<int> serial{0};  // several groups in one process
  name_ = fmt::format("tandem-ring-{}-{:016x}-{}-{}", ::getpid(), nonce, rank, serial++);
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  TANDEM_CHECK(fd_ >= 0, "socket(AF_UNIX): {}", std::strerror(errno));
  socklen_t len = 0;
  sockaddr_un a = abstract_address(name_, &len);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd_, 16) != 0) {
    int err = errno;
    close_fd(fd_);
    TANDEM_FAIL("cannot listen on the abstract Unix socket '{}': {}", name_, std::strerror(err));
  }
}

ShmOffer::~ShmOffer() { close_fd(fd_); }

void ShmOffer::give(const ShmRing& ring, Clock::time_point deadline, const std::string& peer) {
  for (;;) {
    TANDEM_CHECK(fd_ >= 0 && wait_for(fd_, POLLIN, deadline),
                 "{} did not come for its shared-memory ring (abstract socket '{}') before the rendezvous deadline",
                 peer, name_);
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) continue;
    unsigned char proof[8];
    size_t got = 0;
    while (got < sizeof proof && wait_for(c, POLLIN, deadline)) {
      ssize_t k = ::recv(c, proof + got, sizeof proof - got, MSG_DONTWAIT);
      if (k <= 0 && !(k < 0 && (errno == EAGAIN || errno == EINTR))) break;
      if (k > 0) got += static_cast<size_t>(k);
    }
    if (got != sizeof proof || get_le(proof, 8) != nonce_) {
      ::close(c);  // not one of ours: keep listening
      continue;
    }
    const int fds[FdMessage::kFds] = {ring.fds().memory, ring.fds().data, ring.fds().room};
    FdMessage m;
    m.byte = 'R';
    cmsghdr* cm = CMSG_FIRSTHDR(&m.msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof fds);
    std::memcpy(CMSG_DATA(cm), fds, sizeof fds);
    ssize_t k = -1;
    while ((k = ::sendmsg(c, &m.msg, MSG_NOSIGNAL)) < 0 && (errno == EAGAIN || errno == EINTR) &&
           wait_for(c, POLLOUT, deadline)) {
    }
    int err = errno;
    ::close(c);
    TANDEM_CHECK(k == 1, "handing the shared-memory ring to {}: {}", peer, std::strerror(err));
    close_fd(fd_);  // the name disappears with the socket
    return;
  }
}

ShmTake::ShmTake(const std::string& name, uint64_t nonce, Clock::time_point deadline, const std::string& peer)
    : peer_(peer) {
  socklen_t len = 0;
  sockaddr_un a = abstract_address(name, &len);
  for (;;) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    TANDEM_CHECK(fd_ >= 0, "socket(AF_UNIX): {}", std::strerror(errno));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), len) == 0) break;
    const int err = errno;
    close_fd(fd_);
    // EAGAIN: the listener's backlog is full for a moment; ECONNREFUSED: not listening (any more).
    TANDEM_CHECK(Clock::now() < deadline && (err == EAGAIN || err == ECONNREFUSED || err == EINTR),
                 "cannot reach {}'s shared-memory ring at abstract socket '{}': {}", peer, name, std::strerror(err));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  unsigned char proof[8];
  put_le(proof, nonce, 8);
  // 8 bytes into a fresh Unix socket's buffer: this does not block.
  TANDEM_CHECK(::send(fd_, proof, sizeof proof, MSG_NOSIGNAL) == sizeof proof,
               "sending the group nonce to {} for its shared-memory ring: {}", peer, std::strerror(errno));
}

ShmTake::~ShmTake() { close_fd(fd_); }

std::shared_ptr<ShmRing> ShmTake::take(Clock::time_point deadline) {
  int fds[FdMessage::kFds] = {-1, -1, -1};
  FdMessage m;
  ssize_t k = -1;
  for (;;) {
    TANDEM_CHECK(wait_for(fd_, POLLIN, deadline), "{} did not hand over its shared-memory ring before the rendezvous "
                                                  "deadline", peer_);
    k = ::recvmsg(fd_, &m.msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (k >= 0 || (errno != EAGAIN && errno != EINTR)) break;
  }
  const int err = errno;
  cmsghdr* cm = CMSG_FIRSTHDR(&m.msg);
  const bool ok = k == 1 && m.byte == 'R' && cm != nullptr && cm->cmsg_level == SOL_SOCKET &&
                  cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof fds);
  // Whatever descriptors came are ours to close, even in a malformed message.
  if (cm != nullptr && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
    std::memcpy(fds, CMSG_DATA(cm), std::min<size_t>(sizeof fds, cm->cmsg_len - CMSG_LEN(0)));
  close_fd(fd_);
  if (!ok) {
    for (int& fd : fds) close_fd(fd);
    TANDEM_FAIL("{} closed the hand-off socket instead of sending its shared-memory ring{}", peer_,
                k < 0 ? std::string(": ") + std::strerror(err) : "");
  }
  return ShmRing::attach(ShmRing::Fds{fds[0], fds[1], fds[2]}, peer_);
}

}  // namespace tandem::comm

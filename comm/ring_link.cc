#include "comm/ring_link.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace tandem::comm {

size_t TcpSendEnd::write_some(const iovec* iov, int n) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(n);
  ssize_t k = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k > 0) return static_cast<size_t>(k);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  throw RingPeerLost{std::string("lost the connection while we were sending: ") + std::strerror(errno)};
}

int TcpSendEnd::arm(pollfd* fds, bool for_room) {
  // POLLRDHUP even when not writing: a dead right neighbour is seen while we only wait to receive.
  fds[0] = pollfd{fd_, static_cast<short>(POLLRDHUP | (for_room ? POLLOUT : 0)), 0};
  return 1;
}

void TcpSendEnd::disarm(const pollfd* fds, int) {
  if (fds[0].revents & (POLLRDHUP | POLLHUP | POLLERR))
    throw RingPeerLost{"closed the connection (the process died or gave up)"};
}

size_t TcpRecvEnd::read_some(const iovec* iov, int n) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(n);
  ssize_t k = ::recvmsg(fd_, &msg, MSG_DONTWAIT);
  if (k > 0) return static_cast<size_t>(k);
  if (k == 0) throw RingPeerLost{"closed the connection (the process died or gave up)"};
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  throw RingPeerLost{std::string("lost the connection while we were receiving: ") + std::strerror(errno)};
}

int TcpRecvEnd::arm(pollfd* fds, bool) {
  fds[0] = pollfd{fd_, POLLIN, 0};
  return 1;
}

}  // namespace tandem::comm

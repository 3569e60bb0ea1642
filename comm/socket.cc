#include "comm/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "core/check.h"

namespace tandem::comm {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

void make_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  TANDEM_CHECK(flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, "fcntl(O_NONBLOCK): {}",
               errno_text(errno));
}

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { ::freeaddrinfo(a); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* out = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out);
  TANDEM_CHECK(rc == 0, "cannot resolve host '{}': {}", host, ::gai_strerror(rc));
  return AddrInfoPtr(out);
}

std::string numeric_host(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, buf, sizeof buf);
  } else {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr, buf, sizeof buf);
  }
  return buf;
}

// Waits until `fd` is ready for `events`; false at the deadline.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    TANDEM_CHECK(errno == EINTR, "poll: {}", errno_text(errno));
  }
}

}  // namespace

int poll_timeout_ms(Clock::time_point deadline) {
  auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(ms);
}

Socket::Socket(int fd) : fd_(fd) {}
Socket::~Socket() { close(); }
Socket::Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdown() const {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Socket Socket::listen(const std::string& host, int port, int backlog) {
  TANDEM_CHECK(port >= 0 && port <= 65535, "port {} is out of range (0-65535)", port);
  AddrInfoPtr addrs = resolve(host, port, true);
  std::string last_error = "no address";
  for (addrinfo* a = addrs.get(); a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = errno_text(errno);
      continue;
    }
    Socket s(fd);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, backlog) != 0) {
      last_error = errno_text(errno);
      continue;
    }
    make_nonblocking(fd);
    return s;
  }
  TANDEM_FAIL("cannot listen on {}: {}", join_host_port(host, port), last_error);
}

Socket Socket::connect(const std::string& host, int port, Clock::time_point deadline, const std::string& peer) {
  std::string last_error;
  auto backoff = std::chrono::milliseconds(5);
  for (;;) {
    AddrInfoPtr addrs = resolve(host, port, false);
    for (addrinfo* a = addrs.get(); a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        last_error = errno_text(errno);
        continue;
      }
      Socket s(fd);
      make_nonblocking(fd);
      int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        if (!wait_ready(fd, POLLOUT, deadline)) {
          last_error = "timed out";
          continue;
        }
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      }
      if (rc == 0) {
        s.set_no_delay();
        return s;
      }
      last_error = errno_text(errno);
    }
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  TANDEM_FAIL("cannot connect to {} at {} before the timeout: {}", peer, join_host_port(host, port), last_error);
}

Socket Socket::accept(Clock::time_point deadline) const {
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket s(fd);
      s.set_no_delay();
      return s;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    TANDEM_CHECK(errno == EAGAIN || errno == EWOULDBLOCK, "accept: {}", errno_text(errno));
    if (!wait_ready(fd_, POLLIN, deadline)) return Socket();
  }
}

int Socket::local_port() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  TANDEM_CHECK(::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0, "getsockname: {}",
               errno_text(errno));
  return ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in&>(ss).sin_port)
                                 : ntohs(reinterpret_cast<sockaddr_in6&>(ss).sin6_port);
}

std::string Socket::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  TANDEM_CHECK(::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0, "getsockname: {}",
               errno_text(errno));
  return numeric_host(ss);
}

void Socket::set_no_delay() {
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void Socket::set_buffer_sizes(int bytes) {
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

void Socket::send_all(const void* data, size_t n, Clock::time_point deadline, const std::string& peer) const {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      TANDEM_CHECK(wait_ready(fd_, POLLOUT, deadline), "timed out sending to {}", peer);
      continue;
    }
    TANDEM_FAIL("lost the connection to {} while sending: {}", peer, errno_text(errno));
  }
}

void Socket::recv_all(void* data, size_t n, Clock::time_point deadline, const std::string& peer) const {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd_, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    TANDEM_CHECK(k != 0, "{} closed the connection", peer);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      TANDEM_CHECK(wait_ready(fd_, POLLIN, deadline), "timed out waiting for {}", peer);
      continue;
    }
    TANDEM_FAIL("lost the connection to {} while receiving: {}", peer, errno_text(errno));
  }
}

std::string join_host_port(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

void split_host_port(const std::string& text, std::string* host, int* port) {
  size_t colon = text.rfind(':');
  TANDEM_CHECK(colon != std::string::npos && colon + 1 < text.size(), "'{}' is not host:port", text);
  std::string h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  for (size_t i = colon + 1; i < text.size(); ++i) {
    TANDEM_CHECK(text[i] >= '0' && text[i] <= '9' && p <= 65535, "'{}' is not host:port", text);
    p = p * 10 + (text[i] - '0');
  }
  TANDEM_CHECK(!h.empty() && p <= 65535, "'{}' is not host:port", text);
  *host = h;
  *port = p;
}

}  // namespace tandem::comm

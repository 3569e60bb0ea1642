// TCP sockets with deadlines, for the store client and the ring backend.
//
// A Socket owns one file descriptor (closed with the last owner, move-only)
// and is always non-blocking: every blocking operation here takes an absolute
// deadline and waits with poll(), so no call can hang past it. Failures throw
// tandem::Error naming the peer ("rank 2 at 10.0.0.2:41234") the caller passes
// in, the system's reason, and whether the peer closed or the deadline passed.
#pragma once

#include <chrono>
#include <string>

namespace tandem::comm {

using Clock = std::chrono::steady_clock;

// Deadline `timeout` from now; a zero or negative timeout means "now".
inline Clock::time_point deadline_after(std::chrono::milliseconds timeout) { return Clock::now() + timeout; }
// Milliseconds left until `deadline` (0 once passed), rounded up, for poll().
int poll_timeout_ms(Clock::time_point deadline);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd);  // takes ownership
  ~Socket();
  Socket(Socket&& o) noexcept;
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // A listening socket on host:port (port 0 picks a free one). `host` is an
  // address or name; "0.0.0.0" listens on every interface.
  static Socket listen(const std::string& host, int port, int backlog = 128);
  // Connects to host:port, retrying refused or unreachable attempts until the
  // deadline (the listener may not be up yet); throws naming `peer` after it.
  static Socket connect(const std::string& host, int port, Clock::time_point deadline, const std::string& peer);

  // Waits for one incoming connection; returns an invalid Socket at the deadline.
  Socket accept(Clock::time_point deadline) const;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  // Stops both directions so the peer sees end-of-stream at once, even while
  // another owner of the descriptor is blocked in poll().
  void shutdown() const;

  int local_port() const;
  std::string local_address() const;  // numeric, as the peer sees this end ("10.0.0.1")

  void set_no_delay();                  // disable Nagle: small collectives go out at once
  void set_buffer_sizes(int bytes);     // SO_SNDBUF / SO_RCVBUF hints

  // Send or receive exactly `n` bytes before `deadline`.
  void send_all(const void* data, size_t n, Clock::time_point deadline, const std::string& peer) const;
  void recv_all(void* data, size_t n, Clock::time_point deadline, const std::string& peer) const;

 private:
  int fd_ = -1;
};

// "host:port", with IPv6 addresses in brackets.
std::string join_host_port(const std::string& host, int port);
// Splits "host:port" (or "[v6]:port"); throws Error naming `text` when malformed.
void split_host_port(const std::string& text, std::string* host, int* port);

}  // namespace tandem::comm

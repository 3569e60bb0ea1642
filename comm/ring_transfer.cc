#include "comm/ring_transfer.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/check.h"

namespace tandem::comm {

void ring_transfer(const RingLink& link, const std::vector<RingSend>& sends, const std::vector<RingRecv>& recvs,
                   const RingReduceFn& reduce, std::vector<char>& scratch, const RingTransferOptions& options,
                   std::chrono::milliseconds idle_timeout, const std::string& what) {
  const size_t ns = sends.size(), nr = recvs.size();
  const size_t chunk = options.chunk_bytes;
  if (std::any_of(recvs.begin(), recvs.end(), [](const RingRecv& r) { return r.reduce && r.bytes > 0; }) &&
      scratch.size() < chunk)
    scratch.resize(chunk);

  size_t si = 0, s_off = 0;              // current send and bytes of it sent
  size_t ri = 0, r_got = 0, r_done = 0;  // current receive, bytes of it received, and processed
  auto processed = [&](int gate) -> size_t {
    if (gate < 0) return std::numeric_limits<size_t>::max();
    auto g = static_cast<size_t>(gate);
    return g < ri ? recvs[g].bytes : g == ri ? r_done : 0;
  };
  auto fail = [&](const std::string& peer, const std::string& why) {
    TANDEM_FAIL("{}: {} {}", what, peer, why);
  };
  Clock::time_point deadline = deadline_after(idle_timeout);

  for (;;) {
    while (si < ns && s_off == sends[si].bytes) ++si, s_off = 0;
    while (ri < nr && r_done == recvs[ri].bytes) ++ri, r_got = 0, r_done = 0;
    if (si == ns && ri == nr) return;

    size_t sendable = 0;
    if (si < ns) {
      size_t limit = std::min(sends[si].bytes, processed(sends[si].gate));
      sendable = limit > s_off ? limit - s_off : 0;
    }
    bool progress = false;

    if (sendable > 0) {
      ssize_t k = ::send(link.send_fd, sends[si].data + s_off, std::min(sendable, options.max_send_bytes),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        s_off += static_cast<size_t>(k);
        progress = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        fail(link.right_name, std::string("lost the connection while we were sending: ") + std::strerror(errno));
      }
    }

    if (ri < nr) {
      const RingRecv& r = recvs[ri];
      size_t chunk_len = r.reduce ? std::min(chunk, r.bytes - r_done) : r.bytes - r_done;
      char* dst = r.reduce ? scratch.data() + (r_got - r_done) : r.dst + r_got;
      size_t want = r.reduce ? chunk_len - (r_got - r_done) : r.bytes - r_got;
      ssize_t k = ::recv(link.recv_fd, dst, want, MSG_DONTWAIT);
      if (k > 0) {
        r_got += static_cast<size_t>(k);
        progress = true;
        if (!r.reduce) {
          r_done = r_got;
        } else if (r_got - r_done == chunk_len) {
          reduce(ri, r.dst + r_done, scratch.data(), chunk_len);
          r_done = r_got;
        }
      } else if (k == 0) {
        fail(link.left_name, "closed the connection (the process died or gave up)");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        fail(link.left_name, std::string("lost the connection while we were receiving: ") + std::strerror(errno));
      }
    }

    if (progress) {
      deadline = deadline_after(idle_timeout);
      continue;
    }

    // Nothing moved: sleep in poll() until a socket is ready. The send side
    // also watches for the right neighbour hanging up, so a dead peer is seen
    // even while we are only waiting to receive.
    pollfd fds[2];
    int n = 0, send_slot = -1, recv_slot = -1;
    if (si < ns) {
      fds[n] = pollfd{link.send_fd, static_cast<short>(POLLRDHUP | (sendable > 0 ? POLLOUT : 0)), 0};
      send_slot = n++;
    }
    if (ri < nr) {
      fds[n] = pollfd{link.recv_fd, POLLIN, 0};
      recv_slot = n++;
    }
    int rc = ::poll(fds, static_cast<nfds_t>(n), poll_timeout_ms(deadline));
    if (rc < 0) {
      TANDEM_CHECK(errno == EINTR, "{}: poll: {}", what, std::strerror(errno));
      continue;
    }
    if (rc == 0) {
      throw PeerTimeout(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + what + ": " +
                        (recv_slot >= 0 ? link.left_name + " sent" : link.right_name + " accepted") + " nothing for " +
                        std::to_string(idle_timeout.count()) + " ms");
    }
    if (send_slot >= 0 && (fds[send_slot].revents & (POLLRDHUP | POLLHUP | POLLERR)))
      fail(link.right_name, "closed the connection (the process died or gave up)");
  }
}

}  // namespace tandem::comm

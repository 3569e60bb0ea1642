#include "comm/ring_transfer.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "comm/little_endian.h"
#include "core/check.h"

namespace tandem::comm {

namespace {

constexpr uint32_t kFrameMagic = 0x46444e54;  // "TNDF"


}  // namespace

std::string_view ring_op_name(RingOp op) {
  switch (op) {
    case RingOp::AllReduce: return "all_reduce";
    case RingOp::Broadcast: return "broadcast";
    case RingOp::AllGather: return "all_gather";
    case RingOp::ReduceScatter: return "reduce_scatter";
    case RingOp::Barrier: return "barrier";
  }
  return "?";
}

// Layout, little-endian: magic u32 | op u8 | dtype u8 | 0 u16 | seq u64 | bytes u64 | step u32 | root i32.
void encode_ring_frame(const RingFrame& f, unsigned char* out) {
  std::memset(out, 0, kRingFrameHeaderBytes);
  put_le(out, kFrameMagic, 4);
  out[4] = static_cast<unsigned char>(f.op);
  out[5] = static_cast<unsigned char>(f.dtype);
  put_le(out + 8, f.seq, 8);
  put_le(out + 16, f.bytes, 8);
  put_le(out + 24, f.step, 4);
  put_le(out + 28, static_cast<uint32_t>(f.root), 4);
}

bool decode_ring_frame(const unsigned char* in, RingFrame* f) {
  if (get_le(in, 4) != kFrameMagic || in[4] < 1 || in[4] > static_cast<unsigned char>(RingOp::Barrier) ||
      in[5] > static_cast<unsigned char>(DType::U8) || in[6] != 0 || in[7] != 0)
    return false;
  f->op = static_cast<RingOp>(in[4]);
  f->dtype = static_cast<DType>(in[5]);
  f->seq = get_le(in + 8, 8);
  f->bytes = get_le(in + 16, 8);
  f->step = static_cast<uint32_t>(get_le(in + 24, 4));
  f->root = static_cast<int32_t>(static_cast<uint32_t>(get_le(in + 28, 4)));
  return true;
}

std::string describe_ring_frame(const RingFrame& f) {
  std::string root = f.op == RingOp::Broadcast ? fmt::format(" from root {}", f.root) : "";
  return fmt::format("sequence {}, {} bytes ({}{} {}, message {})", f.seq, f.bytes, ring_op_name(f.op), root,
                     dtype_name(f.dtype), f.step);
}

void ring_transfer(const RingLink& link, const RingFrame& op, const std::vector<RingSend>& sends,
                   const std::vector<RingRecv>& recvs, const RingReduceFn& reduce, std::vector<char>& scratch,
                   const RingTransferOptions& options, std::chrono::milliseconds idle_timeout,
                   const std::string& what) {
  const size_t ns = sends.size(), nr = recvs.size();
  const size_t chunk = options.chunk_bytes;
  constexpr size_t H = kRingFrameHeaderBytes;
  if (std::any_of(recvs.begin(), recvs.end(), [](const RingRecv& r) { return r.reduce && r.bytes > 0; }) &&
      scratch.size() < chunk)
    scratch.resize(chunk);

  auto frame_of = [&](size_t index, size_t bytes) {
    RingFrame f = op;
    f.step = static_cast<uint32_t>(index);
    f.bytes = bytes;
    return f;
  };
  unsigned char out_header[H], in_header[H];
  size_t si = 0, s_off = 0, h_sent = 0;              // current send, its payload bytes sent, its header bytes sent
  size_t ri = 0, r_got = 0, r_done = 0, h_got = 0;   // current receive, payload received and processed, header received
  if (ns > 0) encode_ring_frame(frame_of(0, sends[0].bytes), out_header);
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
    while (si < ns && h_sent == H && s_off == sends[si].bytes) {
      ++si, s_off = 0, h_sent = 0;
      if (si < ns) encode_ring_frame(frame_of(si, sends[si].bytes), out_header);
    }
    while (ri < nr && h_got == H && r_done == recvs[ri].bytes) ++ri, r_got = 0, r_done = 0, h_got = 0;
    if (si == ns && ri == nr) return;

    size_t sendable = 0;  // payload bytes of the current send that may go out now
    if (si < ns) {
      size_t limit = std::min(sends[si].bytes, processed(sends[si].gate));
      sendable = limit > s_off ? limit - s_off : 0;
    }
    // A header goes out with the first payload bytes it announces (one segment,
    // not two), alone only for an empty message or to finish a partial send.
    const bool can_send =
        si < ns && (sendable > 0 || (h_sent < H && (h_sent > 0 || sends[si].bytes == 0)));
    bool progress = false;

    if (can_send) {
      // The rest of the header and whatever payload may go, in one call.
      iovec iov[2];
      int n_iov = 0;
      if (h_sent < H) iov[n_iov++] = {out_header + h_sent, H - h_sent};
      if (sendable > 0)
        iov[n_iov++] = {const_cast<char*>(sends[si].data + s_off), std::min(sendable, options.max_send_bytes)};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(n_iov);
      ssize_t k = ::sendmsg(link.send_fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        auto sent = static_cast<size_t>(k);
        size_t to_header = std::min(sent, H - h_sent);
        h_sent += to_header;
        s_off += sent - to_header;
        progress = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        fail(link.right_name, std::string("lost the connection while we were sending: ") + std::strerror(errno));
      }
    }

    if (ri < nr) {
      // The rest of the header and payload in one call; the header is checked as
      // soon as it is complete, before any payload byte is reduced or the receive
      // counts as done.
      const RingRecv& r = recvs[ri];
      iovec iov[2];
      int n_iov = 0;
      if (h_got < H) iov[n_iov++] = {in_header + h_got, H - h_got};
      size_t chunk_len = 0;
      if (r.bytes > r_got) {
        chunk_len = r.reduce ? std::min(chunk, r.bytes - r_done) : r.bytes - r_done;
        char* dst = r.reduce ? scratch.data() + (r_got - r_done) : r.dst + r_got;
        size_t want = r.reduce ? chunk_len - (r_got - r_done) : r.bytes - r_got;
        iov[n_iov++] = {dst, want};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(n_iov);
      ssize_t k = ::recvmsg(link.recv_fd, &msg, MSG_DONTWAIT);
      if (k > 0) {
        auto got_bytes = static_cast<size_t>(k);
        progress = true;
        if (h_got < H) {
          const size_t to_header = std::min(got_bytes, H - h_got);
          h_got += to_header;
          got_bytes -= to_header;
          if (h_got == H) {
            const RingFrame expected = frame_of(ri, r.bytes);
            RingFrame got;
            if (!decode_ring_frame(in_header, &got)) {
              fail(link.left_name, fmt::format("sent bytes that are not a ring frame header where this rank expected "
                                               "({}): the byte streams are out of step",
                                               describe_ring_frame(expected)));
            }
            if (!(got == expected)) {
              fail(link.left_name,
                   fmt::format("sent ({}) where this rank expected ({}): the ranks issued different collectives, or "
                               "the same collective with different sizes (every rank must issue the same ops, in "
                               "the same order, with the same dtypes and sizes)",
                               describe_ring_frame(got), describe_ring_frame(expected)));
            }
          }
        }
        r_got += got_bytes;
        if (!r.reduce) {
          r_done = r_got;
        } else if (got_bytes > 0 && r_got - r_done == chunk_len) {
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
      fds[n] = pollfd{link.send_fd, static_cast<short>(POLLRDHUP | (can_send ? POLLOUT : 0)), 0};
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

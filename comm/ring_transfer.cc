#include "comm/ring_transfer.h"

#include <poll.h>

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
    case RingOp::DirectAllReduce: return "direct all_reduce";
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
  if (get_le(in, 4) != kFrameMagic || in[4] < 1 || in[4] > static_cast<unsigned char>(RingOp::DirectAllReduce) ||
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
  const size_t esz = dtype_size(op.dtype);
  constexpr size_t H = kRingFrameHeaderBytes;
  TANDEM_CHECK(ns == 0 || link.send != nullptr, "{}: no link to the right neighbour", what);
  TANDEM_CHECK(nr == 0 || link.recv != nullptr, "{}: no link from the left neighbour", what);
  const bool in_place = nr > 0 && link.recv->zero_copy();
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
  if (ns > 0) {
    encode_ring_frame(frame_of(0, sends[0].bytes), out_header);
    link.send->begin_message();
  }
  if (nr > 0) link.recv->begin_message();
  auto processed = [&](int gate) -> size_t {
    if (gate < 0) return std::numeric_limits<size_t>::max();
    auto g = static_cast<size_t>(gate);
    return g < ri ? recvs[g].bytes : g == ri ? r_done : 0;
  };
  auto fail = [&](const std::string& peer, const std::string& why) {
    TANDEM_FAIL("{}: {} {}", what, peer, why);
  };
  // The header is checked as soon as it is complete, before any payload byte
  // is reduced or the receive counts as done.
  auto check_header = [&](const RingRecv& r) {
    const RingFrame expected = frame_of(ri, r.bytes);
    RingFrame got;
    if (!decode_ring_frame(in_header, &got)) {
      fail(link.left_name, fmt::format("sent bytes that are not a ring frame header where this rank expected "
                                       "({}): the byte streams are out of step",
                                       describe_ring_frame(expected)));
    }
    if (!(got == expected)) {
      const bool one_direct = (got.op == RingOp::DirectAllReduce) != (expected.op == RingOp::DirectAllReduce);
      fail(link.left_name,
           fmt::format("sent ({}) where this rank expected ({}): the ranks issued different collectives, or "
                       "the same collective with different sizes{} (every rank must issue the same ops, in "
                       "the same order, with the same dtypes and sizes)",
                       describe_ring_frame(got), describe_ring_frame(expected),
                       one_direct ? ", or an all_reduce on shared buffers (ProcessGroup::shared_zeros) on one rank "
                                    "and on ordinary tensors on another"
                                  : ""));
    }
  };
  const bool spins = (ns > 0 && link.send->spins()) || (nr > 0 && link.recv->spins());
  Clock::time_point deadline = deadline_after(idle_timeout);
  Clock::time_point spin_until{};  // set when a no-progress stretch begins

  for (;;) {
    while (si < ns && h_sent == H && s_off == sends[si].bytes) {
      ++si, s_off = 0, h_sent = 0;
      if (si < ns) {
        encode_ring_frame(frame_of(si, sends[si].bytes), out_header);
        link.send->begin_message();
      }
    }
    while (ri < nr && h_got == H && r_done == recvs[ri].bytes) {
      ++ri, r_got = 0, r_done = 0, h_got = 0;
      if (ri < nr) link.recv->begin_message();
    }
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

    try {
      if (can_send) {
        // The rest of the header and whatever payload may go, in one call.
        iovec iov[2];
        int n_iov = 0;
        if (h_sent < H) iov[n_iov++] = {out_header + h_sent, H - h_sent};
        if (sendable > 0)
          iov[n_iov++] = {const_cast<char*>(sends[si].data + s_off), std::min(sendable, options.max_send_bytes)};
        if (size_t sent = link.send->write_some(iov, n_iov); sent > 0) {
          size_t to_header = std::min(sent, H - h_sent);
          h_sent += to_header;
          s_off += sent - to_header;
          progress = true;
        }
      }
    } catch (const RingPeerLost& e) {
      fail(link.right_name, e.why);
    }

    try {
      if (ri < nr) {
        const RingRecv& r = recvs[ri];
        if (in_place && r.reduce && h_got == H && r_got < r.bytes) {
          // Zero copy: reduce whole elements where they lie, at most a chunk at a time
          // (a smaller piece frees ring space and unblocks the gated send sooner).
          auto [at, avail] = link.recv->peek();
          size_t n = std::min({avail, r.bytes - r_done, chunk});
          n -= n % esz;
          if (n > 0) {
            if (reinterpret_cast<uintptr_t>(at) % esz == 0) {
              reduce(ri, r.dst + r_done, at, n);
            } else {  // the transport promises alignment; stay correct if one does not
              std::memcpy(scratch.data(), at, n);
              reduce(ri, r.dst + r_done, scratch.data(), n);
            }
            link.recv->consume(n);
            r_done = r_got = r_done + n;
            progress = true;
          }
        } else {
          // The rest of the header and payload in one call (a zero-copy reduce: the header only).
          iovec iov[2];
          int n_iov = 0;
          if (h_got < H) iov[n_iov++] = {in_header + h_got, H - h_got};
          size_t chunk_len = 0;
          if (r.bytes > r_got && !(in_place && r.reduce)) {
            chunk_len = r.reduce ? std::min(chunk, r.bytes - r_done) : r.bytes - r_done;
            char* dst = r.reduce ? scratch.data() + (r_got - r_done) : r.dst + r_got;
            size_t want = r.reduce ? chunk_len - (r_got - r_done) : r.bytes - r_got;
            iov[n_iov++] = {dst, want};
          }
          if (size_t got_bytes = n_iov > 0 ? link.recv->read_some(iov, n_iov) : 0; got_bytes > 0) {
            progress = true;
            if (h_got < H) {
              const size_t to_header = std::min(got_bytes, H - h_got);
              h_got += to_header;
              got_bytes -= to_header;
              if (h_got == H) check_header(r);
            }
            r_got += got_bytes;
            if (!r.reduce) {
              r_done = r_got;
            } else if (got_bytes > 0 && r_got - r_done == chunk_len) {
              reduce(ri, r.dst + r_done, scratch.data(), chunk_len);
              r_done = r_got;
            }
          }
        }
      }
    } catch (const RingPeerLost& e) {
      fail(link.left_name, e.why);
    }

    if (progress) {
      deadline = deadline_after(idle_timeout);
      spin_until = {};
      continue;
    }
    if (spins) {
      // Shared memory: the neighbour is probably mid-copy on another core; look
      // again for a little while before paying for a sleep and a wake-up.
      const auto now = Clock::now();
      if (spin_until == Clock::time_point{}) spin_until = now + options.spin;
      if (now < spin_until) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        continue;
      }
    }

    // Nothing moved: sleep in poll() until an end may move again. The send end
    // also watches for the right neighbour hanging up, so a dead peer is seen
    // even while we are only waiting to receive.
    pollfd fds[2 * kRingEndMaxPollFds];
    int n_send = 0, n_recv = 0;
    if (si < ns) n_send = link.send->arm(fds, can_send);
    if (ri < nr) n_recv = link.recv->arm(fds + n_send, true);
    int rc = ::poll(fds, static_cast<nfds_t>(n_send + n_recv), poll_timeout_ms(deadline));
    const int poll_errno = errno;
    try {
      if (n_send > 0) link.send->disarm(fds, n_send);
    } catch (const RingPeerLost& e) {
      fail(link.right_name, e.why);
    }
    try {
      if (n_recv > 0) link.recv->disarm(fds + n_send, n_recv);
    } catch (const RingPeerLost& e) {
      fail(link.left_name, e.why);
    }
    spin_until = {};
    if (rc < 0) {
      TANDEM_CHECK(poll_errno == EINTR, "{}: poll: {}", what, std::strerror(poll_errno));
      continue;
    }
    if (rc == 0) {
      throw PeerTimeout(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + what + ": " +
                        (ri < nr ? link.left_name + " sent" : link.right_name + " accepted") + " nothing for " +
                        std::to_string(idle_timeout.count()) + " ms");
    }
  }
}

}  // namespace tandem::comm

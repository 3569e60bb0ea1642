#include "comm/ring_process_group.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>

#include <unistd.h>

#include "comm/debug_level.h"
#include "comm/host_reduce.h"
#include "comm/little_endian.h"
#include "comm/ring_split.h"
#include "comm/shared_buffers.h"
#include "comm/shm_handoff.h"
#include "comm/shm_ring.h"
#include "comm/single_copy.h"
#include "comm/stuck_ranks.h"
#include "core/allocator.h"
#include "core/check.h"

#if TANDEM_WITH_CUDA
#include "comm/cuda_staging.h"
#endif

namespace tandem::comm {

namespace {

constexpr uint32_t kMagic = 0x4d444e54;  // "TNDM"
constexpr size_t kHelloBytes = 16;       // magic, rank (u32), nonce (u64), little-endian


// Byte offsets and lengths of n near-equal segments of `count` elements.
struct Segments {
  std::vector<size_t> off, len;
};
Segments split(int64_t count, int n, size_t esz) {
  Segments s;
  for (int i = 0; i < n; ++i) {
    const RingSegment seg = ring_segment(count, n, i, esz);
    s.off.push_back(seg.offset);
    s.len.push_back(seg.bytes);
  }
  return s;
}

bool is_cuda(const Tensor& t) { return t.device().is_cuda(); }

}  // namespace

RingProcessGroup::RingProcessGroup(std::shared_ptr<Store> store, int rank, int size, ProcessGroupOptions options)
    : ProcessGroup(rank, size),
      store_(std::move(store)),
      options_(std::move(options)),
      prefix_("ring/" + options_.group_name + "/") {
  TANDEM_CHECK(store_ != nullptr, "ring process group: no store");
  TANDEM_CHECK(options_.ring_chunk_bytes > 0 && options_.ring_chunk_bytes % 8 == 0,
               "ring chunk size {} must be a positive multiple of 8 bytes", options_.ring_chunk_bytes);
  TANDEM_CHECK(options_.ring_shm_bytes >= 64 && options_.ring_shm_bytes % 8 == 0,
               "ring shared-memory capacity {} must be a multiple of 8 bytes, at least 64", options_.ring_shm_bytes);
#if TANDEM_WITH_CUDA
  staging_ = std::make_shared<CudaStaging>();
#endif
  if (size > 1) rendezvous();
  thread_ = std::thread([this] { run_loop(); });
}

RingProcessGroup::~RingProcessGroup() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

namespace {

// What rank i published about its end of the links: its transport choice,
// the abstract socket of its shared-memory offer ("-" for none) and its host.
struct PeerTransport {
  RingTransport choice = RingTransport::Tcp;
  std::string offer;
  std::string host;
};

PeerTransport parse_peer_transport(const std::string& text, int rank) {
  const size_t a = text.find('\n'), b = a == std::string::npos ? a : text.find('\n', a + 1);
  TANDEM_CHECK(b != std::string::npos, "ring rendezvous: rank {} published a malformed transport record '{}'", rank,
               text);
  return {parse_ring_transport(text.substr(0, a), fmt::format("the ring transport of rank {}", rank)),
          text.substr(a + 1, b - a - 1), text.substr(b + 1)};
}

// Whether the link a -> b uses shared memory; every rank computes the same answer from the same records.
bool link_uses_shm(const std::vector<PeerTransport>& peers, int a, int b) {
  const PeerTransport &pa = peers[static_cast<size_t>(a)], &pb = peers[static_cast<size_t>(b)];
  const bool a_shm = pa.choice == RingTransport::Shm, b_shm = pb.choice == RingTransport::Shm;
  const bool a_tcp = pa.choice == RingTransport::Tcp, b_tcp = pb.choice == RingTransport::Tcp;
  TANDEM_CHECK(!(a_shm && b_tcp) && !(a_tcp && b_shm),
               "ring transport: rank {} asks for '{}' and its neighbour rank {} for '{}' (set the same transport, or "
               "auto, on every rank)",
               a, ring_transport_name(pa.choice), b, ring_transport_name(pb.choice));
  if (a_tcp || b_tcp) return false;
  const bool same_host = !pa.host.empty() && pa.host == pb.host;
  TANDEM_CHECK(same_host || !(a_shm || b_shm),
               "ring transport 'shm': neighbours rank {} and rank {} are not on the same host (rank {}: '{}', rank "
               "{}: '{}'); shared memory only joins ranks on one host and network namespace (use auto or tcp)",
               a, b, a, pa.host.empty() ? "unknown" : pa.host, b, pb.host.empty() ? "unknown" : pb.host);
  return same_host;
}

}  // namespace

void RingProcessGroup::rendezvous() {
  const int n = size(), r = rank();
  const auto deadline = deadline_after(options_.timeout);
  const std::string host = store_->local_address();
  Socket listener = Socket::listen(host, 0);
  auto addr_key = [&](int i) { return prefix_ + "addr/" + std::to_string(i); };
  auto transport_key = [&](int i) { return prefix_ + "transport/" + std::to_string(i); };

  // Any rank's random proposal wins; all then share it.
  std::random_device rd;
  uint64_t proposal = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  uint64_t nonce = std::stoull(store_->compare_set(prefix_ + "nonce", "", std::to_string(proposal)));

  RingTransport choice = options_.ring_transport;
  if (const char* env = std::getenv("TANDEM_RING_TRANSPORT"); env != nullptr && choice == RingTransport::Auto)
    choice = parse_ring_transport(env, "TANDEM_RING_TRANSPORT");
  // Listening before the address is published: a left neighbour that sees the
  // address may connect to the offer at once.
  std::unique_ptr<ShmOffer> offer;
  if (choice != RingTransport::Tcp) offer = std::make_unique<ShmOffer>(nonce, r);
  store_->set(transport_key(r), std::string(ring_transport_name(choice)) + "\n" + (offer ? offer->name() : "-") +
                                    "\n" + (choice != RingTransport::Tcp ? host_identity() : ""));
  store_->set(addr_key(r), join_host_port(host, listener.local_port()));

  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(addr_key(i));
  for (int i = 0; i < n; ++i) keys.push_back(transport_key(i));
  std::vector<std::string> missing = store_->wait(keys, options_.timeout);
  if (!missing.empty()) {
    std::string ranks;
    for (const auto& k : missing)
      if (k.find("/addr/") != std::string::npos) ranks += (ranks.empty() ? "" : ", ") + k.substr(k.rfind('/') + 1);
    TANDEM_FAIL("ring rendezvous of group '{}' timed out after {} ms on rank {}: rank(s) {} of world size {} never "
                "arrived",
                options_.group_name, options_.timeout.count(), r, ranks, n);
  }
  std::vector<PeerTransport> peers;
  for (int i = 0; i < n; ++i) peers.push_back(parse_peer_transport(store_->get(transport_key(i)), i));
  std::vector<bool> shm;  // link i -> i+1
  for (int i = 0; i < n; ++i) shm.push_back(link_uses_shm(peers, i, (i + 1) % n));
  const auto shm_links = std::count(shm.begin(), shm.end(), true);
  transport_ = shm_links == n ? "shm" : shm_links == 0 ? "tcp" : "shm within hosts, tcp between";
  // Spinning pays when the neighbour runs on another core; with more ranks on
  // this host than cores it steals the neighbour's time instead (measured on
  // 2 cores: 4 ranks were faster without it, 2 ranks no slower with it).
  const auto local_ranks = std::count_if(peers.begin(), peers.end(), [&](const PeerTransport& p) {
    return !p.host.empty() && p.host == peers[static_cast<size_t>(r)].host;
  });
  spin_ = local_ranks <= static_cast<long>(std::max(1u, std::thread::hardware_concurrency()))
              ? std::chrono::microseconds(50)
              : std::chrono::microseconds(0);

  const int right = (r + 1) % n, left = (r + n - 1) % n;
  std::string right_addr = store_->get(keys[right]), left_addr = store_->get(keys[left]);
  std::string right_host;
  int right_port = 0;
  split_host_port(right_addr, &right_host, &right_port);
  std::string right_name = "rank " + std::to_string(right) + " (right neighbour, " + right_addr + ")";
  std::string left_name = "rank " + std::to_string(left) + " (left neighbour, " + left_addr + ")";

  right_ = Socket::connect(right_host, right_port, deadline, right_name);
  unsigned char hello[kHelloBytes];
  put_le(hello, kMagic, 4);
  put_le(hello + 4, static_cast<uint64_t>(r), 4);
  put_le(hello + 8, nonce, 8);
  right_.send_all(hello, kHelloBytes, deadline, right_name);

  for (;;) {
    Socket s = listener.accept(deadline);
    TANDEM_CHECK(s.valid(), "ring rendezvous of group '{}': {} did not connect within {} ms", options_.group_name,
                 left_name, options_.timeout.count());
    unsigned char got[kHelloBytes];
    try {
      s.recv_all(got, kHelloBytes, std::min(deadline, deadline_after(std::chrono::seconds(5))), "a ring peer");
    } catch (const Error&) {
      continue;  // not one of ours: drop it and keep listening
    }
    if (get_le(got, 4) == kMagic && get_le(got + 8, 8) == nonce && get_le(got + 4, 4) == static_cast<uint64_t>(left)) {
      left_ = std::move(s);
      break;
    }
  }
  if (options_.ring_socket_buffer_bytes > 0) {
    right_.set_buffer_sizes(options_.ring_socket_buffer_bytes);
    left_.set_buffer_sizes(options_.ring_socket_buffer_bytes);
  }

  // Shared memory: connect to the left neighbour's offer first, then serve our
  // own to the right, then collect: no rank waits on one that has not connected.
  std::unique_ptr<ShmTake> take;
  if (shm[static_cast<size_t>(left)])
    take = std::make_unique<ShmTake>(peers[static_cast<size_t>(left)].offer, nonce, deadline, left_name);
  if (shm[static_cast<size_t>(r)]) {
    auto ring = ShmRing::create(options_.ring_shm_bytes);
    offer->give(*ring, deadline, right_name);
    send_end_ = std::make_unique<ShmSendEnd>(std::move(ring), right_.fd());
  } else {
    send_end_ = std::make_unique<TcpSendEnd>(right_.fd());
  }
  offer.reset();
  if (take) {
    recv_end_ = std::make_unique<ShmRecvEnd>(take->take(deadline), left_.fd());
  } else {
    recv_end_ = std::make_unique<TcpRecvEnd>(left_.fd());
  }
  link_ = RingLink{send_end_.get(), recv_end_.get(), right_name, left_name};
  setup_single_copy(nonce);
  setup_shared_buffers(nonce);
}

std::vector<std::string> RingProcessGroup::setup_all_gather(const std::string& what, const std::string& mine) {
  const int n = size();
  auto key = [&](int i) { return prefix_ + what + "/" + std::to_string(i); };
  store_->set(key(rank()), mine);
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(key(i));
  std::vector<std::string> missing = store_->wait(keys, options_.timeout);
  TANDEM_CHECK(missing.empty(), "ring rendezvous of group '{}' timed out after {} ms on rank {}: {} never published {}",
               options_.group_name, options_.timeout.count(), rank(), missing.empty() ? "" : missing.front(), what);
  std::vector<std::string> values;
  for (const auto& k : keys) values.push_back(store_->get(k));
  return values;
}

void RingProcessGroup::setup_single_copy(uint64_t nonce) {
  const int n = size(), r = rank();
  RingSingleCopy mode = options_.ring_single_copy;
  if (const char* env = std::getenv("TANDEM_RING_SINGLE_COPY"); env != nullptr && mode == RingSingleCopy::Auto)
    mode = parse_ring_single_copy(env, "TANDEM_RING_SINGLE_COPY");
  // The group's nonce in the word: a read that reaches some other process cannot pass.
  probe_word_ = nonce ^ 0x79706f632d656c67ull;
  std::vector<int> pids;
  std::vector<uint64_t> words;
  bool huge_pages_everywhere = true;
  const std::vector<std::string> selves = setup_all_gather(
      "single_copy/self", fmt::format("{} {} {} {}", ring_single_copy_name(mode), static_cast<int>(::getpid()),
                                      reinterpret_cast<uintptr_t>(&probe_word_),
                                      host_memory::large_blocks_on_huge_pages() ? 1 : 0));
  for (int i = 0; i < n; ++i) {
    const std::string& text = selves[static_cast<size_t>(i)];
    std::istringstream fields(text);
    std::string name;
    int pid = 0, huge = 0;
    uint64_t word = 0;
    TANDEM_CHECK(static_cast<bool>(fields >> name >> pid >> word >> huge),
                 "ring rendezvous: rank {} published a malformed single-copy record '{}'", i, text);
    pids.push_back(pid);
    words.push_back(word);
    huge_pages_everywhere = huge_pages_everywhere && huge == 1;
    const RingSingleCopy theirs = parse_ring_single_copy(name, fmt::format("the ring single-copy mode of rank {}", i));
    TANDEM_CHECK(theirs == mode,
                 "ring single copy: rank {} asks for '{}' and rank {} for '{}' (set the same ring_single_copy, or "
                 "TANDEM_RING_SINGLE_COPY, on every rank)",
                 r, ring_single_copy_name(mode), i, ring_single_copy_name(theirs));
  }
  pids_ = pids;
  if (mode == RingSingleCopy::Off) {
    single_copy_note_ = "off: asked for";
    return;
  }
  if (transport_ != "shm") {
    TANDEM_CHECK(mode != RingSingleCopy::On,
                 "ring single copy 'on': the ring's transport is '{}', and single copy needs every rank on one host "
                 "with the shm transport (use auto or off)",
                 transport_);
    single_copy_note_ = "off: the ranks are not all on one host with the shm transport";
    return;
  }
  auto sc = std::make_unique<SingleCopy>(r, n, options_.ring_cross_memory_read);
  std::string failure;
  for (int k = 1; k < n && failure.empty(); ++k) {
    const int j = (r + k) % n;
    if (std::string why = sc->probe(pids[static_cast<size_t>(j)], words[static_cast<size_t>(j)], probe_word_);
        !why.empty())
      failure = fmt::format("rank {} cannot read the memory of rank {}: {}", r, j, why);
  }
  std::string reason;
  for (const std::string& v : setup_all_gather("single_copy/probe", failure.empty() ? "ok" : failure))
    if (v != "ok" && reason.empty()) reason = v;
  if (!reason.empty()) {
    TANDEM_CHECK(mode != RingSingleCopy::On, "ring single copy 'on': {} (use auto or off)", reason);
    single_copy_note_ = "off: " + reason;
    if (distributed_debug_level() != DebugLevel::Off)
      std::fprintf(stderr, "tandem: ring group '%s' rank %d: all_reduce stays on the ring, single copy is off: %s\n",
                   options_.group_name.c_str(), r, reason.c_str());
    return;
  }
  if (mode == RingSingleCopy::Auto && !huge_pages_everywhere) {
    // Measured: from 4 KiB pages process_vm_readv pins every page and single
    // copy is slower than the ring (docs/results/allreduce_shm_cpu.md).
    single_copy_note_ =
        "off: host tensors are not on huge pages on every rank (TANDEM_HOST_HUGE_PAGES=0 or a kernel without "
        "transparent huge pages; from 4 KiB pages single copy is slower than the ring)";
    return;
  }
  single_copy_ = std::move(sc);
  single_copy_min_bytes_ = mode == RingSingleCopy::On ? 0 : kRingSingleCopyMinBytes;
  single_copy_note_ = fmt::format("from {} bytes", single_copy_min_bytes_);
}

void RingProcessGroup::setup_shared_buffers(uint64_t nonce) {
  const int n = size(), r = rank();
  RingSharedBuffers mode = options_.ring_shared_buffers;
  if (const char* env = std::getenv("TANDEM_RING_SHARED_BUFFERS"); env != nullptr && mode == RingSharedBuffers::Auto)
    mode = parse_ring_shared_buffers(env, "TANDEM_RING_SHARED_BUFFERS");
  // A buffer of the kind shared_zeros gives, holding the group's nonce: a
  // peer that maps some other segment cannot pass. It lives until every rank
  // has said whether it could map the others'.
  Tensor probe;
  std::string mine = std::string(ring_shared_buffers_name(mode));
  std::string failure;
  const uint64_t word = nonce ^ 0x7366667562646873ull;
  if (mode != RingSharedBuffers::Off && transport_ == "shm") {
    try {
      probe = comm::shared_zeros({1}, DType::I64);
      *probe.data<int64_t>() = static_cast<int64_t>(word);
      const SharedLocation loc = *find_shared(probe.data_ptr(), 8);
      mine += fmt::format(" {} {} {}", loc.fd, loc.inode, loc.bytes);
    } catch (const Error& e) {
      failure = fmt::format("rank {} cannot make a shared buffer: {}", r, e.what());
    }
  }
  const std::vector<std::string> selves = setup_all_gather("shared_buffers/self", mine);
  std::vector<SharedLocation> probes(static_cast<size_t>(n));
  bool all_made = true;
  for (int i = 0; i < n; ++i) {
    std::istringstream fields(selves[static_cast<size_t>(i)]);
    std::string name;
    fields >> name;
    const RingSharedBuffers theirs =
        parse_ring_shared_buffers(name, fmt::format("the ring shared-buffers mode of rank {}", i));
    TANDEM_CHECK(theirs == mode,
                 "ring shared buffers: rank {} asks for '{}' and rank {} for '{}' (set the same ring_shared_buffers, "
                 "or TANDEM_RING_SHARED_BUFFERS, on every rank)",
                 r, ring_shared_buffers_name(mode), i, ring_shared_buffers_name(theirs));
    SharedLocation& loc = probes[static_cast<size_t>(i)];
    all_made = all_made && static_cast<bool>(fields >> loc.fd >> loc.inode >> loc.bytes);
  }
  if (mode == RingSharedBuffers::Off) {
    shared_note_ = "off: asked for";
    return;
  }
  if (transport_ != "shm") {
    TANDEM_CHECK(mode != RingSharedBuffers::On,
                 "ring shared buffers 'on': the ring's transport is '{}', and shared buffers need every rank on one "
                 "host with the shm transport (use auto or off)",
                 transport_);
    shared_note_ = "off: the ranks are not all on one host with the shm transport";
    return;
  }
  PeerSegments probes_mapped;
  for (int k = 1; k < n && failure.empty() && all_made; ++k) {
    const int j = (r + k) % n;
    try {
      const char* p = probes_mapped.map(j, pids_[static_cast<size_t>(j)], probes[static_cast<size_t>(j)],
                                        "ring shared buffers probe");
      uint64_t got = 0;
      std::memcpy(&got, p, sizeof got);
      if (got != word)
        failure = fmt::format("rank {} mapped rank {}'s probe and read {:#x} instead of {:#x}", r, j, got, word);
    } catch (const Error& e) {
      failure = fmt::format("rank {} cannot map the shared buffers of rank {}: {}", r, j, e.what());
    }
  }
  if (!all_made && failure.empty()) failure = "a rank could not make a shared buffer";
  std::string reason;
  for (const std::string& v : setup_all_gather("shared_buffers/probe", failure.empty() ? "ok" : failure))
    if (v != "ok" && reason.empty()) reason = v;
  if (!reason.empty()) {
    TANDEM_CHECK(mode != RingSharedBuffers::On, "ring shared buffers 'on': {} (use auto or off)", reason);
    shared_note_ = "off: " + reason;
    if (distributed_debug_level() != DebugLevel::Off)
      std::fprintf(stderr, "tandem: ring group '%s' rank %d: shared buffers are off: %s\n",
                   options_.group_name.c_str(), r, reason.c_str());
    return;
  }
  shared_ = true;
  peer_segments_ = std::make_unique<PeerSegments>();
  shared_min_bytes_ = mode == RingSharedBuffers::On ? 0 : kRingSharedMinBytes;
  shared_note_ = fmt::format("from {} bytes", shared_min_bytes_);
}

Tensor RingProcessGroup::shared_zeros(const Shape& shape, DType dtype, Device device) const {
  if (shared_ && device.is_cpu()) return comm::shared_zeros(shape, dtype);
  return Tensor::zeros(shape, dtype, device);
}

std::shared_ptr<Work> RingProcessGroup::enqueue(RingFrame frame, std::vector<Tensor> tensors, Body body) {
  const std::string name(ring_op_name(frame.op));
  for (const Tensor& t : tensors)
    TANDEM_CHECK(!is_cuda(t) || cuda::built_with_cuda(), "{} on {}: Tandem was built without CUDA", name, t.str());
  auto work = std::make_shared<Work>(name, std::move(tensors));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TANDEM_CHECK(!stopping_, "{}: the process group is shutting down", name);
    frame.seq = op_count_++;
    queue_.push_back(Task{work, std::move(body), frame});
  }
  cv_.notify_one();
  return work;
}

void RingProcessGroup::run_loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!broken_.empty()) {
      task.work->mark_failed("the process group failed earlier and cannot be used: " + broken_);
    } else {
      task.work->mark_started();
      std::string what =
          task.work->op_name() + " #" + std::to_string(task.frame.seq) + " on rank " + std::to_string(rank());
      running_ = task.frame;
      try {
        task.body(what);
        task.work->mark_completed();
      } catch (const PeerTimeout& e) {
        task.work->mark_failed(fail_group(e.what(), task.frame.seq, true));
      } catch (const std::exception& e) {
        task.work->mark_failed(fail_group(e.what(), task.frame.seq, false));
      }
    }
    task.work->release_tensors();
  }
}

std::string RingProcessGroup::fail_group(const std::string& error, uint64_t seq, bool timed_out) {
  std::string what = error;
  std::string first;
  try {
    if (timed_out && size() > 1) {
      std::string ranks = ranks_not_at_op(*store_, prefix_, seq, rank(), size(),
                                          std::min(options_.timeout, std::chrono::milliseconds(2000)));
      if (!ranks.empty()) what += "; rank(s) " + ranks + " did not reach this collective";
    }
    if (size() > 1) first = store_->compare_set(prefix_ + "abort", "", "rank " + std::to_string(rank()) + ": " + what);
  } catch (const std::exception&) {
    // The store may be gone with the process that hosted it; the local error still stands.
  }
  const std::string mine = "rank " + std::to_string(rank()) + ": " + what;
  right_.shutdown();
  left_.shutdown();
  broken_ = what;
  if (!first.empty() && first != mine) return what + " [the first failure in this group: " + first + "]";
  return what;
}

void RingProcessGroup::transfer(const std::vector<RingSend>& sends, const std::vector<RingRecv>& recvs,
                                const RingReduceFn& reduce, const std::string& what) {
  RingTransferOptions o;
  o.chunk_bytes = options_.ring_chunk_bytes;
  o.spin = spin_;
  ring_transfer(link_, running_, sends, recvs, reduce, scratch_, o, options_.timeout, what);
}

// --- the algorithms on host buffers ---------------------------------------------

void RingProcessGroup::ring_all_reduce(const char* src, char* buf, DType dtype, int64_t count, ReduceOp op,
                                       const std::string& what) {
  const int n = size(), r = rank();
  if (n == 1) {
    if (src != buf && count > 0) std::memcpy(buf, src, static_cast<size_t>(count) * dtype_size(dtype));
    return;
  }
  // An empty buffer still exchanges its (empty) frames: a rank whose peers
  // reduce something else is caught here, not at some later op.
  const size_t esz = dtype_size(dtype);
  // Shared buffers only when this rank's are: every rank must pass shared
  // buffers or none (DDP's buckets come from shared_zeros on every rank); a
  // rank that does not is caught at the first frame (RingOp::DirectAllReduce).
  const size_t bytes = static_cast<size_t>(count) * esz;
  std::optional<SharedPair> shared;
  if (shared_ && bytes >= shared_min_bytes_) {
    const auto in = find_shared(src, bytes), out = find_shared(buf, bytes);
    if (in && out) shared = SharedPair{*in, *out};
  }
  const bool single_copy = single_copy_ && bytes >= single_copy_min_bytes_;
  if ((shared || single_copy) && direct_all_reduce(src, buf, dtype, count, op, shared, single_copy, what)) return;
  const Segments seg = split(count, n, esz);
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  std::vector<RingSend> sends;
  std::vector<RingRecv> recvs;
  // Reduce-scatter: at step s send segment r-s, receive and reduce r-s-1; after
  // n-1 steps this rank holds the full reduction of segment r+1. Out of place,
  // the first send reads the input and each reduction writes src + received
  // into buf, so the input is never copied.
  for (int s = 0; s < n - 1; ++s) {
    int out = mod(r - s), in = mod(r - s - 1);
    sends.push_back({(s == 0 ? src : buf) + seg.off[out], seg.len[out], s - 1});
    recvs.push_back({buf + seg.off[in], seg.len[in], true});
  }
  // All-gather: forward each finished segment around the ring.
  for (int t = 0; t < n - 1; ++t) {
    int out = mod(r + 1 - t), in = mod(r - t);
    sends.push_back({buf + seg.off[out], seg.len[out], n - 2 + t});
    recvs.push_back({buf + seg.off[in], seg.len[in], false});
  }
  const size_t last_reduce = static_cast<size_t>(n - 2);
  transfer(sends, recvs,
           [&](size_t i, char* dst, const char* received, size_t bytes) {
             auto elems = static_cast<int64_t>(bytes / esz);
             host_reduce(dst, src + (dst - buf), received, dtype, elems, op);
             if (op == ReduceOp::Avg && i == last_reduce) host_divide(dst, dtype, elems, n);
           },
           what);
}

bool RingProcessGroup::direct_all_reduce(const char* src, char* buf, DType dtype, int64_t count, ReduceOp op,
                                         const std::optional<SharedPair>& shared, bool single_copy,
                                         const std::string& what) {
  const int n = size(), r = rank();
  // Its own op in the frames: a rank on the ring instead fails at the first one.
  const RingOp op_in_frames = running_.op;
  running_.op = RingOp::DirectAllReduce;
  // Every rank's buffers and size: also the entry barrier, since no rank
  // touches a peer's buffer before the peer has published it. A shared
  // buffer's record also says where it lies (fd, inode, segment size, offset).
  constexpr size_t kWords = 12, kRecord = kWords * 8;
  std::vector<char> records(static_cast<size_t>(n) * kRecord);
  uint64_t words[kWords] = {reinterpret_cast<uintptr_t>(src), reinterpret_cast<uintptr_t>(buf),
                            static_cast<uint64_t>(count), 0};
  if (shared) {
    const SharedLocation& in = shared->in;
    const SharedLocation& out = shared->out;
    const uint64_t located[] = {1,         static_cast<uint64_t>(in.fd),  in.inode,  in.bytes, in.offset,
                                static_cast<uint64_t>(out.fd), out.inode, out.bytes, out.offset};
    std::copy(std::begin(located), std::end(located), words + 3);
  }
  auto* mine = reinterpret_cast<unsigned char*>(records.data()) + static_cast<size_t>(r) * kRecord;
  for (size_t w = 0; w < kWords; ++w) put_le(mine + w * 8, words[w], 8);
  ring_all_gather(records.data(), kRecord, what);
  auto word = [&](int i, size_t w) {
    return get_le(reinterpret_cast<const unsigned char*>(records.data()) + static_cast<size_t>(i) * kRecord + w * 8, 8);
  };
  bool all_shared = shared.has_value();
  for (int i = 0; i < n; ++i) {
    const auto theirs = static_cast<int64_t>(word(i, 2));
    TANDEM_CHECK(theirs == count,
                 "{}: rank {} all-reduces {} elements where this rank has {} (every rank must issue the same ops, in "
                 "the same order, with the same dtypes and sizes)",
                 what, i, theirs, count);
    all_shared = all_shared && word(i, 3) == 1;
  }
  if (all_shared) {
    std::vector<const char*> ins;
    std::vector<char*> outs;
    for (int i = 0; i < n; ++i) {
      if (i == r) {
        ins.push_back(src);
        outs.push_back(buf);
        continue;
      }
      const int pid = pids_[static_cast<size_t>(i)];
      auto located = [&](size_t w) {
        return SharedLocation{static_cast<int>(word(i, w)), word(i, w + 1), word(i, w + 2), word(i, w + 3)};
      };
      ins.push_back(peer_segments_->map(i, pid, located(4), what));
      outs.push_back(peer_segments_->map(i, pid, located(8), what));
    }
    shared_reduce_own_segment(ins, outs, r, dtype, count, op, shared_scratch_);
    ring_barrier(what);  // nobody returns while a peer still writes into its output
    return true;
  }
  if (!single_copy) {
    running_.op = op_in_frames;  // the ring carries on under the op's own frames
    return false;
  }
  std::vector<SingleCopyPeer> peers;
  for (int i = 0; i < n; ++i) peers.push_back({pids_[static_cast<size_t>(i)], word(i, 0), word(i, 1)});
  single_copy_->reduce_own_segment(peers, src, buf, dtype, count, op, what);
  ring_barrier(what);  // every segment is final before anyone copies it
  single_copy_->gather_other_segments(peers, buf, dtype, count, what);
  ring_barrier(what);  // nobody reads this rank's buffers once it returns
  return true;
}

void RingProcessGroup::ring_barrier(const std::string& what) {
  std::vector<char> words(static_cast<size_t>(size()) * 8);
  ring_all_gather(words.data(), 8, what);
}

void RingProcessGroup::ring_broadcast(char* buf, size_t bytes, int root, const std::string& what) {
  const int n = size();
  if (n == 1) return;
  const int pos = (rank() - root + n) % n;  // distance from the root along the ring
  std::vector<RingSend> sends;
  std::vector<RingRecv> recvs;
  if (pos != 0) recvs.push_back({buf, bytes, false});
  if (pos != n - 1) sends.push_back({buf, bytes, pos == 0 ? -1 : 0});  // forward as it arrives
  transfer(sends, recvs, nullptr, what);
}

void RingProcessGroup::ring_all_gather(char* buf, size_t b, const std::string& what) {
  const int n = size(), r = rank();
  if (n == 1) return;
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  std::vector<RingSend> sends;
  std::vector<RingRecv> recvs;
  for (int t = 0; t < n - 1; ++t) {
    sends.push_back({buf + mod(r - t) * b, b, t - 1});
    recvs.push_back({buf + mod(r - t - 1) * b, b, false});
  }
  transfer(sends, recvs, nullptr, what);
}

void RingProcessGroup::ring_reduce_scatter(char* buf, DType dtype, int64_t count, ReduceOp op,
                                           const std::string& what) {
  const int n = size(), r = rank();
  const size_t esz = dtype_size(dtype), b = static_cast<size_t>(count) * esz;
  if (n == 1) return;
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  std::vector<RingSend> sends;
  std::vector<RingRecv> recvs;
  // Shifted by one from all_reduce's schedule so that rank r ends up owning segment r.
  for (int s = 0; s < n - 1; ++s) {
    sends.push_back({buf + mod(r - s - 1) * b, b, s - 1});
    recvs.push_back({buf + mod(r - s - 2) * b, b, true});
  }
  const size_t last_reduce = static_cast<size_t>(n - 2);
  transfer(sends, recvs,
           [&](size_t i, char* dst, const char* received, size_t bytes) {
             auto elems = static_cast<int64_t>(bytes / esz);
             host_reduce(dst, dst, received, dtype, elems, op);
             if (op == ReduceOp::Avg && i == last_reduce) host_divide(dst, dtype, elems, n);
           },
           what);
}

// --- the ops ----------------------------------------------------------------------

namespace {
std::shared_ptr<void> mark_ready_if_cuda(const Tensor& t) {
#if TANDEM_WITH_CUDA
  if (is_cuda(t)) return CudaStaging::mark_ready(t.device().index);
#endif
  (void)t;
  return nullptr;
}
}  // namespace

std::shared_ptr<Work> RingProcessGroup::all_reduce(Tensor& t, ReduceOp op) { return all_reduce(t, t, op); }

std::shared_ptr<Work> RingProcessGroup::all_reduce(const Tensor& in, Tensor& out, ReduceOp op) {
  check_all_reduce(in, out);
  auto ready = mark_ready_if_cuda(in);
  return enqueue(RingFrame{.op = RingOp::AllReduce, .dtype = in.dtype()}, {in, out}, [this, in, out, op, ready](const std::string& what) {
    if (is_cuda(in)) {
#if TANDEM_WITH_CUDA
      staging_->wait_ready(ready, options_.timeout);
      char* buf = staging_->host_buffer(in.nbytes());
      staging_->to_host(in, buf);
      ring_all_reduce(buf, buf, in.dtype(), in.numel(), op, what);
      staging_->to_device(buf, out);
#endif
      return;
    }
    ring_all_reduce(static_cast<const char*>(in.data_ptr()), static_cast<char*>(out.data_ptr()), in.dtype(),
                    in.numel(), op, what);
  });
}

std::shared_ptr<Work> RingProcessGroup::broadcast(Tensor& t, int root) {
  check_broadcast(t, root);
  auto ready = mark_ready_if_cuda(t);
  return enqueue(RingFrame{.op = RingOp::Broadcast, .dtype = t.dtype(), .root = root}, {t}, [this, t, root, ready](const std::string& what) {
    if (is_cuda(t)) {
#if TANDEM_WITH_CUDA
      staging_->wait_ready(ready, options_.timeout);
      char* buf = staging_->host_buffer(t.nbytes());
      if (rank() == root) staging_->to_host(t, buf);
      ring_broadcast(buf, t.nbytes(), root, what);
      if (rank() != root) staging_->to_device(buf, t);
#endif
      return;
    }
    ring_broadcast(static_cast<char*>(t.data_ptr()), t.nbytes(), root, what);
  });
}

std::shared_ptr<Work> RingProcessGroup::all_gather(const Tensor& in, Tensor& out) {
  check_all_gather(in, out);
  auto ready = mark_ready_if_cuda(in);
  return enqueue(RingFrame{.op = RingOp::AllGather, .dtype = in.dtype()}, {in, out}, [this, in, out, ready](const std::string& what) {
    const size_t b = in.nbytes();
    if (is_cuda(in)) {
#if TANDEM_WITH_CUDA
      staging_->wait_ready(ready, options_.timeout);
      char* buf = staging_->host_buffer(out.nbytes());
      staging_->to_host(in, buf + rank() * b);
      ring_all_gather(buf, b, what);
      staging_->to_device(buf, out);
#endif
      return;
    }
    char* buf = static_cast<char*>(out.data_ptr());
    if (b > 0 && buf + rank() * b != in.data_ptr()) std::memmove(buf + rank() * b, in.data_ptr(), b);
    ring_all_gather(buf, b, what);
  });
}

std::shared_ptr<Work> RingProcessGroup::reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) {
  check_reduce_scatter(in, out);
  auto ready = mark_ready_if_cuda(in);
  return enqueue(RingFrame{.op = RingOp::ReduceScatter, .dtype = in.dtype()}, {in, out}, [this, in, out, op, ready](const std::string& what) {
    const size_t b = out.nbytes();
    char* buf = nullptr;
    std::vector<char> work;
    if (is_cuda(in)) {
#if TANDEM_WITH_CUDA
      staging_->wait_ready(ready, options_.timeout);
      buf = staging_->host_buffer(in.nbytes());
      staging_->to_host(in, buf);
#endif
    } else {
      work.assign(static_cast<const char*>(in.data_ptr()), static_cast<const char*>(in.data_ptr()) + in.nbytes());
      buf = work.data();
    }
    ring_reduce_scatter(buf, in.dtype(), out.numel(), op, what);
    if (is_cuda(out)) {
#if TANDEM_WITH_CUDA
      staging_->to_device(buf + rank() * b, out);
#endif
    } else if (b > 0) {
      std::memcpy(out.data_ptr(), buf + rank() * b, b);
    }
  });
}

std::shared_ptr<Work> RingProcessGroup::barrier() {
  Tensor token = Tensor::full({1}, 1.0, DType::I32);
  return enqueue(RingFrame{.op = RingOp::Barrier, .dtype = DType::I32}, {token}, [this, token](const std::string& what) {
    auto* p = static_cast<char*>(token.data_ptr());
    ring_all_reduce(p, p, DType::I32, 1, ReduceOp::Sum, what);
    int got = *token.data<int32_t>();
    TANDEM_CHECK(got == size(), "{}: {} ranks arrived, expected {}", what, got, size());
  });
}

}  // namespace tandem::comm

// The `ring` backend: collectives over TCP and shared memory, written from scratch.
//
// Ranks form a ring (rank r sends to r+1 and receives from r-1, one TCP
// connection per direction; between ranks on one host the bytes go through a
// shared-memory ring instead, comm/shm_ring.h, and the TCP connection stays
// as the liveness channel). all_reduce is the bandwidth-optimal ring:
// reduce-scatter then all-gather, 2(n-1) steps each moving 1/n of the
// buffer, pipelined chunk by chunk across steps (comm/ring_transfer.h);
// all_gather, reduce_scatter and broadcast are the matching halves and a
// pipelined chain. Buffers of any size work: segments differ by at most one
// element and may be empty.
//
// Every op runs on one comm thread owned by the group, in issue order, so the
// issuing thread keeps computing. CUDA tensors are staged through pinned
// host memory (comm/cuda_staging.h).
//
// Rendezvous (in the constructor, through the store, keys under
// "ring/<group>/"): each rank listens on the interface it reaches the store
// with, publishes its address, waits for all the others (a timeout names the
// ranks that never arrived), then connects right and accepts left; a
// per-group random nonce in the handshake rejects stray connections. Each
// rank also publishes its transport choice (options.ring_transport, or
// TANDEM_RING_TRANSPORT when that is auto) and its host identity
// (comm/shm_handoff.h), so every rank decides every link the same way: shared
// memory where both ends are on one host and neither asked for tcp; `shm`
// between hosts, or `shm` against `tcp`, fails on every rank naming the pair.
// The creator of each shared-memory ring is its producer (rank r for r -> r+1).
//
// Single copy: when every link is shared memory (all ranks on one host),
// each rank also publishes its pid, its options.ring_single_copy (or
// TANDEM_RING_SINGLE_COPY), whether its large host tensors are on huge pages
// and the address of a probe word; every rank reads each peer's word with
// process_vm_readv and publishes whether it could. Only if every rank could
// (and, for auto, every rank is on huge pages), all_reduce from
// kRingSingleCopyMinBytes (On: from 0) reads the peers' buffers directly (comm/single_copy.h) instead of
// streaming through the ring; its synchronisation is three small passes over
// the ring links (the buffers' addresses, a barrier between reduce-scatter
// and all-gather, one before returning), so framing, sequence checks and
// liveness are the ring's.
//
// Shared buffers: also when every link is shared memory, each rank
// publishes its options.ring_shared_buffers (or TANDEM_RING_SHARED_BUFFERS)
// and a small probe buffer (comm/shared_buffers.h); every rank maps each
// peer's and publishes whether it could. Only if every rank could,
// shared_zeros gives buffers peers map, and an all_reduce from
// kRingSharedMinBytes whose tensors are such buffers on every rank reduces
// them in place in one pass (the ranks' records say so, so every rank
// decides alike; otherwise the op goes on by single copy or the ring). Its
// synchronisation is two small passes over the ring links: the records
// (also the entry barrier) and one before returning.
//
// Failure: a peer that closes its connection or moves no byte for
// options.timeout fails the op with an Error naming it; the group then
// records the first failure in the store and shuts its sockets, so every rank
// fails promptly (and says where the failure started) instead of hanging.
// After a failure the group refuses further ops.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "comm/process_group.h"
#include "comm/shared_buffers.h"
#include "comm/ring_transfer.h"
#include "comm/socket.h"
#include "comm/store.h"

namespace tandem::comm {

class CudaStaging;
class SingleCopy;

// Auto's threshold for single copy, the huge page size: auto uses single
// copy only when every rank's large host tensors are on huge pages
// (the default, core/allocator.h), which smaller tensors are
// not; at 1 MiB 4 ranks were 22 % slower than the ring, at 2 MiB 18 % faster
// (median of 5; docs/results/allreduce_shm_cpu.md).
inline constexpr size_t kRingSingleCopyMinBytes = 2 << 20;

// Auto's threshold for reducing shared buffers in place: from the smallest
// size, since its two passes over the links cost what the ring's own 2(n-1)
// steps cost and every byte moves once (docs/results/allreduce_shm_cpu.md).
inline constexpr size_t kRingSharedMinBytes = 0;

class RingProcessGroup final : public ProcessGroup {
 public:
  RingProcessGroup(std::shared_ptr<Store> store, int rank, int size, ProcessGroupOptions options = {});
  ~RingProcessGroup() override;

  std::string backend_name() const override { return "ring"; }
  // The whole ring's: "shm", "tcp", or "shm within hosts, tcp between" (and "" for one rank).
  std::string transport() const override { return transport_; }
  // "from <n> bytes" when all_reduce reads peers' buffers directly, else "off: <why>" (and "" for one rank).
  std::string single_copy() const override { return single_copy_note_; }
  // "from <n> bytes" when all_reduce reduces shared buffers in place, else "off: <why>" (and "" for one rank).
  std::string shared_buffers() const override { return shared_note_; }
  // Memory every local rank maps (comm/shared_buffers.h) for CPU tensors when shared buffers are on.
  Tensor shared_zeros(const Shape& shape, DType dtype, Device device) const override;
  // CUDA tensors are staged through host memory on the comm thread.
  DeviceCompletion device_completion() const override { return DeviceCompletion::OnHost; }

  std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op) override;
  std::shared_ptr<Work> all_reduce(const Tensor& in, Tensor& out, ReduceOp op) override;
  std::shared_ptr<Work> broadcast(Tensor& t, int root) override;
  std::shared_ptr<Work> all_gather(const Tensor& in, Tensor& out) override;
  std::shared_ptr<Work> reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override;
  std::shared_ptr<Work> barrier() override;

 private:
  // Body of an op on the comm thread; `what` names it in errors ("all_reduce #12 on rank 3").
  using Body = std::function<void(const std::string& what)>;
  // `frame` names the op on the wire (its seq is filled in here).
  std::shared_ptr<Work> enqueue(RingFrame frame, std::vector<Tensor> tensors, Body body);
  void run_loop();
  void rendezvous();
  // Publishes `mine` under "<prefix><what>/<rank>" in the store; every rank's, in rank order.
  std::vector<std::string> setup_all_gather(const std::string& what, const std::string& mine);
  // After the links exist: decides single copy the same way on every rank (see above).
  void setup_single_copy(uint64_t nonce);
  // After single copy's: decides shared buffers the same way on every rank (see above).
  void setup_shared_buffers(uint64_t nonce);
  // Records the failure, tears the ring down; returns the message for the Work.
  std::string fail_group(const std::string& error, uint64_t seq, bool timed_out);

  // Host-buffer collectives (comm thread only).
  // buf = op over ranks of src; src == buf is in place (src is only read).
  void ring_all_reduce(const char* src, char* buf, DType dtype, int64_t count, ReduceOp op, const std::string& what);
  // Shared buffers in place, else single copy (as the flags allow and every
  // rank's record says); false when neither applies and the ring must run.
  // `shared`: where src and buf lie when both are this rank's shared buffers.
  struct SharedPair {
    SharedLocation in, out;
  };
  bool direct_all_reduce(const char* src, char* buf, DType dtype, int64_t count, ReduceOp op,
                         const std::optional<SharedPair>& shared, bool single_copy, const std::string& what);
  // Completes once every rank has entered it (an all-gather of one word per rank).
  void ring_barrier(const std::string& what);
  void ring_broadcast(char* buf, size_t bytes, int root, const std::string& what);
  void ring_all_gather(char* buf, size_t bytes_per_rank, const std::string& what);
  void ring_reduce_scatter(char* buf, DType dtype, int64_t count_per_rank, ReduceOp op, const std::string& what);
  void transfer(const std::vector<RingSend>& sends, const std::vector<RingRecv>& recvs, const RingReduceFn& reduce,
                const std::string& what);

  // A pointer to host bytes of `t`: the tensor's own for CPU, staged for CUDA.
  char* host_view(const Tensor& t);

  std::shared_ptr<Store> store_;
  ProcessGroupOptions options_;
  std::string prefix_;  // "ring/<group>/"
  Socket right_, left_;
  std::unique_ptr<RingSendEnd> send_end_;
  std::unique_ptr<RingRecvEnd> recv_end_;
  RingLink link_;
  std::string transport_;
  std::chrono::microseconds spin_{0};  // how long a shared-memory wait spins before it sleeps
  std::vector<char> scratch_;
  std::unique_ptr<SingleCopy> single_copy_;  // set when all_reduce may read peers' buffers
  size_t single_copy_min_bytes_ = 0;
  std::vector<int> pids_;                    // every rank's, when the transport is shm
  std::string single_copy_note_;
  uint64_t probe_word_ = 0;                  // what peers read at setup to prove they can
  bool shared_ = false;                      // all_reduce may reduce shared buffers in place
  size_t shared_min_bytes_ = 0;
  std::string shared_note_;
  std::unique_ptr<PeerSegments> peer_segments_;  // the peers' shared buffers mapped here
  std::vector<char> shared_scratch_;
  std::shared_ptr<CudaStaging> staging_;  // CUDA builds only

  std::mutex mutex_;
  std::condition_variable cv_;
  struct Task {
    std::shared_ptr<Work> work;
    Body body;
    RingFrame frame;  // frame.seq: position in this group's op sequence, the same on every rank
  };
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::string broken_;  // first failure; set on the comm thread only
  RingFrame running_;   // the op the comm thread runs: what its frames carry
  uint64_t op_count_ = 0;  // ops issued (under mutex_): numbers them in error messages
  std::thread thread_;
};

}  // namespace tandem::comm

// ProcessGroup: the collectives every backend provides.
//
// All ops are asynchronous: they return a Work at once and run in issue
// order. The caller must not touch the tensors until the Work completes (the
// Work holds them, so they stay alive). Every rank must issue the same ops in
// the same order with matching dtypes and sizes; a rank that does not is
// named in an error, not left to hang (the ring's frame headers, and
// TANDEM_DISTRIBUTED_DEBUG=DETAIL for any backend: see docs/comm.md).
//
//   all_reduce(t, op)            t = op over ranks of t                (in place)
//   all_reduce(in, out, op)      out = op over ranks of in             (out of place)
//   broadcast(t, root)           t = root's t
//   all_gather(in, out)          out[r*n:(r+1)*n] = rank r's in        (out has world*n elements)
//   reduce_scatter(in, out, op)  out = op over ranks of in[rank*n:(rank+1)*n]  (in has world*n)
//   barrier()                    completes once every rank issued it
//
// Avg is the sum divided by the world size, computed once on the summed
// value (integers: truncated toward zero). 16-bit floats are reduced in f32.
//
// CUDA tensors: the op is ordered after the work queued on the caller's
// *current* stream of the tensor's device (core/stream.h current_stream) at
// the time of the call; DDP makes its comm stream current with a StreamGuard.
// For nccl the op is enqueued on that stream; ring copies through pinned host
// memory on its own stream. When the Work completes, the result is visible to
// the issuing stream.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "comm/work.h"
#include "core/tensor.h"

namespace tandem::comm {

enum class ReduceOp { Sum, Avg, Max };

// How a backend completes an op on CUDA tensors, which decides how a consumer
// (DDP's Reducer) may order its own device work after the op:
//   OnStream  the op itself is enqueued on the issuing stream (nccl), so work
//             queued after it on that stream, or behind an event recorded
//             there, sees the result: no host wait is needed, and waiting on
//             the host would stall the CPU for the whole reduction.
//   OnHost    the data moves under a host thread (ring: staged through pinned
//             memory on the comm thread), so the result is in the tensor only
//             once the Work completed: the consumer must wait() on the host
//             before it orders device work after the op.
// (PyTorch's Reducer makes the same distinction through Work::getFuture().)
// A property of the backend, not of its name, so that wrappers and new
// backends say it themselves.
enum class DeviceCompletion { OnStream, OnHost };

// How the ring backend moves bytes between neighbours: Auto takes shared
// memory between ranks on one host and TCP between hosts; Tcp always TCP;
// Shm requires every neighbour on the same host (an error naming the ranks
// otherwise). TANDEM_RING_TRANSPORT=auto|tcp|shm replaces Auto.
enum class RingTransport { Auto, Tcp, Shm };
std::string_view ring_transport_name(RingTransport t);  // "auto", "tcp", "shm"
// Throws Error naming `where` (an option or variable) for anything else.
RingTransport parse_ring_transport(std::string_view name, std::string_view where);

// Whether the ring's all_reduce may read its peers' buffers directly
// (comm/single_copy.h: Linux cross-memory attach, one copy per byte) instead
// of passing every byte through the ring. Only possible when every rank of
// the group is on one host with the shm transport and each can read the
// others' memory (same uid, no ptrace restriction: probed once at setup).
// Auto uses it from kRingSingleCopyMinBytes (comm/ring_process_group.h)
// when every rank's large host tensors are on huge pages
// (TANDEM_HOST_HUGE_PAGES=1: from 4 KiB pages it is slower than the ring),
// and falls back to the ring when a probe fails (one line under
// TANDEM_DISTRIBUTED_DEBUG=INFO says why);
// Off never; On for every size, and an error on every rank when it is not
// possible. Every rank must ask for the same. TANDEM_RING_SINGLE_COPY=
// auto|off|on replaces Auto.
enum class RingSingleCopy { Auto, Off, On };
std::string_view ring_single_copy_name(RingSingleCopy m);  // "auto", "off", "on"
// Throws Error naming `where` (an option or variable) for anything else.
RingSingleCopy parse_ring_single_copy(std::string_view name, std::string_view where);

// Whether the ring's all_reduce reads and writes its peers' buffers in place
// when every rank's tensors are shared buffers (ProcessGroup::shared_zeros,
// comm/shared_buffers.h: one pass over the bytes, no kernel copy). Only
// possible when every rank of the group is on one host with the shm
// transport and each can map the others' buffers (same uid, no ptrace
// restriction: probed once at setup). Auto uses it from
// kRingSharedMinBytes (comm/ring_process_group.h) when the probe passes, and
// shared_zeros gives ordinary tensors when it fails (one line under
// TANDEM_DISTRIBUTED_DEBUG=INFO says why); Off never (shared_zeros gives
// ordinary tensors); On for every size, and an error on every rank when it is
// not possible. Every rank must ask for the same. TANDEM_RING_SHARED_BUFFERS=
// auto|off|on replaces Auto.
enum class RingSharedBuffers { Auto, Off, On };
std::string_view ring_shared_buffers_name(RingSharedBuffers m);  // "auto", "off", "on"
// Throws Error naming `where` (an option or variable) for anything else.
RingSharedBuffers parse_ring_shared_buffers(std::string_view name, std::string_view where);

// Reads `bytes` at `remote` in process `pid` into `local`, as
// process_vm_readv(2) with one iovec each: the bytes read, or -1 with errno set.
using CrossMemoryRead = std::function<long(int pid, void* local, uint64_t remote, size_t bytes)>;

struct ProcessGroupOptions {
  // Rendezvous deadline, and how long an op may go without moving a byte
  // (ring) or without finishing (nccl) before it fails.
  std::chrono::milliseconds timeout{300000};
  std::string group_name = "default";  // store keys are scoped by it: one name per group in a job
  size_t ring_chunk_bytes = 256 << 10;  // ring: reduce granularity (the pipeline's unit)
  int ring_socket_buffer_bytes = 0;     // ring: SO_SNDBUF/SO_RCVBUF; 0 keeps the kernel's autotuning
  RingTransport ring_transport = RingTransport::Auto;
  size_t ring_shm_bytes = 4 << 20;      // ring: capacity of each shared-memory ring (a multiple of 8)
  RingSingleCopy ring_single_copy = RingSingleCopy::Auto;
  RingSharedBuffers ring_shared_buffers = RingSharedBuffers::Auto;
  // ring: replaces process_vm_readv for the single-copy path (its probe and
  // every read); empty: the system call. For tests that make it fail.
  CrossMemoryRead ring_cross_memory_read;
};

std::string_view reduce_op_name(ReduceOp op);  // "sum", "avg", "max"
ReduceOp parse_reduce_op(std::string_view name);

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend_name() const = 0;
  virtual DeviceCompletion device_completion() const = 0;
  // How the bytes travel when a backend has a choice (ring: "shm", "tcp", or
  // "shm within hosts, tcp between"); empty when it has none.
  virtual std::string transport() const { return ""; }
  // Whether all_reduce reads peers' buffers directly (ring: "from 1048576
  // bytes", or "off: <why>", never with a comma: tandem bench allreduce
  // prints it in the header report/allreduce_table.cc reads); empty when the
  // backend has no such choice.
  virtual std::string single_copy() const { return ""; }
  // Whether all_reduce works in place on shared_zeros tensors (ring: "from 0
  // bytes", or "off: <why>", never with a comma); empty when the backend has
  // no such choice.
  virtual std::string shared_buffers() const { return ""; }

  // A zero-filled tensor for the buffers this group reduces most (DDP's
  // buckets): where the backend can reduce peers' buffers in place (the ring
  // with shared buffers on), host memory every local rank maps; otherwise
  // Tensor::zeros on `device`. Not collective.
  virtual Tensor shared_zeros(const Shape& shape, DType dtype, Device device) const {
    return Tensor::zeros(shape, dtype, device);
  }

  virtual std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> all_reduce(const Tensor& in, Tensor& out, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> broadcast(Tensor& t, int root) = 0;
  virtual std::shared_ptr<Work> all_gather(const Tensor& in, Tensor& out) = 0;
  virtual std::shared_ptr<Work> reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> barrier() = 0;

 protected:
  ProcessGroup(int rank, int size);

  // Argument checks shared by the backends; each throws Error naming the op and the tensors.
  void check_all_reduce(const Tensor& in, const Tensor& out) const;
  void check_broadcast(const Tensor& t, int root) const;
  void check_all_gather(const Tensor& in, const Tensor& out) const;
  void check_reduce_scatter(const Tensor& in, const Tensor& out) const;

 private:
  int rank_;
  int size_;
};

}  // namespace tandem::comm

// What the ring backend's tests share: starting every rank of a group on its
// own thread of this process (a RingProcessGroup's constructor rendezvouses
// with its peers, so the ranks must start together), and checking that every
// rank of a group that cannot start fails with an Error rather than hanging.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "comm/ring_process_group.h"
#include "comm/shared_buffers.h"
#include "comm/store.h"
#include "comm/store_server.h"
#include "core/check.h"

namespace tandem::comm::testing {

using RingGroups = std::vector<std::shared_ptr<RingProcessGroup>>;

inline std::shared_ptr<Store> connect(const StoreServer& server) {
  StoreOptions so;
  so.timeout = std::chrono::milliseconds(10000);
  return std::make_shared<Store>("127.0.0.1", server.port(), so);
}

// Ranks 0..n-1, rank r with options_of(r).
template <class F>
RingGroups start_ring(StoreServer& server, int n, F options_of) {
  std::vector<std::future<std::shared_ptr<RingProcessGroup>>> f;
  for (int r = 0; r < n; ++r)
    f.push_back(std::async(std::launch::async,
                           [&, r] { return std::make_shared<RingProcessGroup>(connect(server), r, n, options_of(r)); }));
  RingGroups out;
  for (auto& x : f) out.push_back(x.get());
  return out;
}

inline RingGroups start_ring(StoreServer& server, int n, const ProcessGroupOptions& o) {
  return start_ring(server, n, [&](int) { return o; });
}

// Starts ranks 0..n-1 with options_of(r) and expects every rank's start to throw
// an Error; check(message) makes the test's assertions on each message.
template <class F>
void expect_every_rank_fails_to_start(StoreServer& server, int n, F options_of,
                                      const std::function<void(const std::string&)>& check) {
  std::vector<std::future<void>> f;
  for (int r = 0; r < n; ++r)
    f.push_back(std::async(std::launch::async, [&, r] { RingProcessGroup pg(connect(server), r, n, options_of(r)); }));
  for (auto& x : f) {
    try {
      x.get();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      check(e.what());
    }
  }
}

// Values with every mantissa bit busy (floats) or spread (integers), so that
// another order of additions would show in the bits.
inline std::vector<double> noisy(int rank, int64_t count, DType d, int salt) {
  std::vector<double> v(static_cast<size_t>(count));
  const bool integer = d == DType::I32 || d == DType::I64;
  for (int64_t i = 0; i < count; ++i) {
    double x = std::sin(0.731 * static_cast<double>(i) + 1.37 * rank + salt) * (1 + rank);
    v[static_cast<size_t>(i)] = integer ? std::floor(x * 1e6) : x;
  }
  return v;
}

inline std::vector<char> bytes_of(const Tensor& t) {
  const char* p = static_cast<const char*>(t.data_ptr());
  return std::vector<char>(p, p + t.nbytes());
}

// Starts rank r's op with issue(r) on every rank, then waits for all.
template <typename F>
void on_every_rank(int n, F issue) {
  std::vector<std::shared_ptr<Work>> works;
  for (int r = 0; r < n; ++r) works.push_back(issue(r));
  for (auto& w : works) ASSERT_TRUE(w->wait(std::chrono::milliseconds(60000)));
}

// all_reduce in place and out of place on every rank of `pgs`, each rank's
// result bytes (in place, then out of place); the tensors come from
// `buffer(pg, values, dtype)` (ordinary tensors, or the group's shared
// buffers). Out of place must leave the input alone.
template <class Buffer>
std::vector<std::vector<char>> all_reduce_results(const RingGroups& pgs, DType d, int64_t count, ReduceOp op,
                                                  int salt, Buffer buffer) {
  const int n = static_cast<int>(pgs.size());
  std::vector<Tensor> in_place, in, out;
  for (int r = 0; r < n; ++r) {
    const ProcessGroup& pg = *pgs[static_cast<size_t>(r)];
    in_place.push_back(buffer(pg, noisy(r, count, d, salt), d));
    in.push_back(buffer(pg, noisy(r, count, d, salt + 1), d));
    out.push_back(buffer(pg, std::vector<double>(static_cast<size_t>(count), 0.0), d));
  }
  on_every_rank(n, [&](int r) { return pgs[static_cast<size_t>(r)]->all_reduce(in_place[static_cast<size_t>(r)], op); });
  on_every_rank(n, [&](int r) {
    return pgs[static_cast<size_t>(r)]->all_reduce(in[static_cast<size_t>(r)], out[static_cast<size_t>(r)], op);
  });
  std::vector<std::vector<char>> results;
  for (int r = 0; r < n; ++r) {
    results.push_back(bytes_of(in_place[static_cast<size_t>(r)]));
    results.push_back(bytes_of(out[static_cast<size_t>(r)]));
    EXPECT_EQ(bytes_of(in[static_cast<size_t>(r)]),
              bytes_of(Tensor::from_vector(noisy(r, count, d, salt + 1), {count}, d)))
        << "out of place leaves the input alone";
  }
  return results;
}

// Whether this kernel lets a process map a memfd through /proc/<pid>/fd, as
// the ring's shared buffers need (gVisor may not): checked on this process's
// own segment, independently of the ring's probe.
inline bool kernel_maps_memfds_through_proc() {
  Tensor t = shared_zeros({1}, DType::I64);
  *t.data<int64_t>() = 7;
  try {
    PeerSegments peers;
    const SharedLocation loc = *find_shared(t.data_ptr(), 8);
    return *reinterpret_cast<const int64_t*>(peers.map(0, static_cast<int>(::getpid()), loc, "probe")) == 7;
  } catch (const Error&) {
    return false;
  }
}

#define TANDEM_SKIP_UNLESS_MEMFDS_MAP()                                                                  \
  do {                                                                                                   \
    if (!::tandem::comm::testing::kernel_maps_memfds_through_proc())                                     \
      GTEST_SKIP() << "this kernel does not let a process map a memfd through /proc/<pid>/fd "           \
                      "(gVisor?): the ring's shared buffers are off here";                               \
  } while (0)

}  // namespace tandem::comm::testing

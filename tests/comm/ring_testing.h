// What the ring backend's tests share: starting every rank of a group on its
// own thread of this process (a RingProcessGroup's constructor rendezvouses
// with its peers, so the ranks must start together), and checking that every
// rank of a group that cannot start fails with an Error rather than hanging.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
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

// A CUDA graph captured from a stream and instantiated, as a move-only value
// type usable from CPU-only builds (where capturing throws Error).
//
// Graph::capture makes `stream` current, begins capturing it, runs `work`,
// ends the capture (also when `work` throws, which it then rethrows) and
// instantiates the graph; launch() enqueues one replay on a stream.
//
// The capture mode is cudaStreamCaptureModeThreadLocal: a call on this thread
// that capture does not allow (a synchronisation, a plain cudaMalloc, a query
// of a captured event) fails the capture with an error instead of running
// once, outside the graph, and being lost at replay. Calls on other threads
// (data-loader workers pinning memory, NCCL's watchdog polling its own events)
// touch no capturing stream and are left alone; the global mode would fail the
// capture on them.
#pragma once

#include <functional>

#include "core/stream.h"

namespace tandem::cuda {

class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(Graph&& o) noexcept;
  Graph& operator=(Graph&& o) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // `stream` must not be the legacy default stream (it cannot be captured).
  static Graph capture(const Stream& stream, const std::function<void()>& work);
  void launch(const Stream& stream) const;
  bool defined() const { return exec_ != nullptr; }

 private:
  void* exec_ = nullptr;  // cudaGraphExec_t
};

// True while `stream` is being captured (false without CUDA).
bool is_capturing(const Stream& stream);

}  // namespace tandem::cuda

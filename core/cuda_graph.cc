#include "core/cuda_graph.h"

#include <utility>

#include "core/check.h"

#if TANDEM_WITH_CUDA
#include "core/cuda_check.h"
#endif

namespace tandem::cuda {

Graph::Graph(Graph&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)) {}

Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    Graph old(std::move(*this));
    exec_ = std::exchange(o.exec_, nullptr);
  }
  return *this;
}

#if TANDEM_WITH_CUDA

Graph::~Graph() {
  if (exec_) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

Graph Graph::capture(const Stream& stream, const std::function<void()>& work) {
  TANDEM_CHECK(stream.handle() != nullptr, "CUDA graph capture: the legacy default stream cannot be captured");
  auto s = static_cast<cudaStream_t>(stream.handle());
  cudaGraph_t graph = nullptr;
  {
    StreamGuard current(stream);
    TANDEM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    try {
      work();
    } catch (...) {
      // End the capture so the stream is usable again; the graph is discarded.
      if (cudaStreamEndCapture(s, &graph) == cudaSuccess && graph) (void)cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      throw;
    }
    TANDEM_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  }
  Graph out;
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);  // the executable graph does not need it
  TANDEM_CUDA_CHECK(e);
  out.exec_ = exec;
  return out;
}

void Graph::launch(const Stream& stream) const {
  TANDEM_CHECK(exec_ != nullptr, "CUDA graph: launch of an empty graph");
  TANDEM_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream.handle())));
}

bool is_capturing(const Stream& stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TANDEM_CUDA_CHECK(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream.handle()), &status));
  return status != cudaStreamCaptureStatusNone;
}

#else  // !TANDEM_WITH_CUDA

Graph::~Graph() = default;

Graph Graph::capture(const Stream&, const std::function<void()>&) {
  TANDEM_FAIL("CUDA graph capture: Tandem was built without CUDA");
}

void Graph::launch(const Stream&) const { TANDEM_FAIL("CUDA graph launch: Tandem was built without CUDA"); }

bool is_capturing(const Stream&) { return false; }

#endif

}  // namespace tandem::cuda

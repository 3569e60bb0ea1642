// cuDNN fused attention for the cross-check back-end (see attention_cudnn.h).
//
// One cuDNN frontend graph per (device, shape, dtype, mask or not, direction),
// built on first use and cached per thread with its handle (building a graph
// queries heuristics and compiles plans: tens to hundreds of milliseconds; a
// benchmark or test repeats the same shapes). Tensors are described by strides
// into Tandem's packed layouts: for the (3, H, Dh)-packed qkv row of width
// W = 3*H*Dh, head h of q at sequence position s of batch b is at
// b*S*W + s*W + h*Dh (k adds H*Dh, v 2*H*Dh), i.e. dims [B, H, S, Dh] with
// strides [S*W, Dh, W, 1]; out and dout are the same with width H*Dh.
// The backward asks for cuDNN's deterministic algorithm, as Tandem's is.
#include "kernels/cuda/attention_cudnn.h"

#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cmath>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "core/cuda_check.h"
#include "kernels/cuda/per_thread_handles.h"
#include "kernels/cuda/scratch.cuh"

namespace tandem::kernels {

namespace fe = cudnn_frontend;

namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kSeqQ, kSeqKV, kDO, kDQ, kDK, kDV };

#define TANDEM_CUDNN_FE_CHECK(expr, what)                                                     \
  do {                                                                                        \
    fe::error_t tandem_fe_ = (expr);                                                          \
    TANDEM_CHECK(tandem_fe_.is_good(), "cuDNN attention ({}): {}", what, tandem_fe_.get_message()); \
  } while (0)

thread_local PerThreadHandles<cudnnHandle_t, cudnnDestroy> tls_handles;

cudnnHandle_t handle_for(int device, cudaStream_t stream) {
  cudnnHandle_t& h = tls_handles.slot(device, "cuDNN attention");
  if (!h) {
    const cudnnStatus_t st = cudnnCreate(&h);
    TANDEM_CHECK(st == CUDNN_STATUS_SUCCESS, "cuDNN attention: cudnnCreate failed: {}", cudnnGetErrorString(st));
  }
  const cudnnStatus_t st = cudnnSetStream(h, stream);
  TANDEM_CHECK(st == CUDNN_STATUS_SUCCESS, "cuDNN attention: cudnnSetStream failed: {}", cudnnGetErrorString(st));
  return h;
}

fe::DataType_t fe_type(DType t) {
  switch (t) {
    case DType::F16: return fe::DataType_t::HALF;
    case DType::BF16: return fe::DataType_t::BFLOAT16;
    default:
      TANDEM_FAIL("cuDNN attention: dtype {} is not supported (f16, bf16: cuDNN's fused attention has no f32)",
                  dtype_name(t));
  }
}

// Everything this back-end refuses, checked before any device work.
void check_supported(const AttentionShape& s, DType t) {
  fe_type(t);
  TANDEM_CHECK(s.head_dim % 8 == 0 && s.head_dim <= 128,
               "cuDNN attention: head_dim {} is not supported (a multiple of 8, at most 128)", s.head_dim);
  TANDEM_CHECK(s.batch > 0 && s.seq > 0 && s.heads > 0, "cuDNN attention: empty shape B={} S={} H={}", s.batch,
               s.seq, s.heads);
}

using Attr = fe::graph::Tensor_attributes;

// [B, H, S, Dh] over a packed row of `width` elements, starting at head 0 of its part.
Attr packed(const char* name, Uid uid, const AttentionShape& s, int64_t width) {
  return Attr()
      .set_name(name)
      .set_uid(uid)
      .set_dim({s.batch, s.heads, s.seq, s.head_dim})
      .set_stride({s.seq * width, s.head_dim, width, 1});
}

Attr stats_attr(const AttentionShape& s) {
  return Attr()
      .set_name("stats")
      .set_uid(kStats)
      .set_dim({s.batch, s.heads, s.seq, 1})
      .set_stride({s.heads * s.seq, s.seq, 1, 1})
      .set_data_type(fe::DataType_t::FLOAT);
}

std::pair<std::shared_ptr<Attr>, std::shared_ptr<Attr>> seq_lens(fe::graph::Graph& g, const AttentionShape& s) {
  auto len = [&](const char* name, Uid uid) {
    return g.tensor(Attr()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({s.batch, 1, 1, 1})
                        .set_stride({1, 1, 1, 1})
                        .set_data_type(fe::DataType_t::INT32));
  };
  return {len("seq_q", kSeqQ), len("seq_kv", kSeqKV)};
}

struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
};

std::shared_ptr<fe::graph::Graph> new_graph(DType t) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe_type(t))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

Built finish(std::shared_ptr<fe::graph::Graph> g, cudnnHandle_t h, const char* what) {
  TANDEM_CUDNN_FE_CHECK(g->build(h, {fe::HeurMode_t::A}), what);
  Built b{std::move(g), 0};
  TANDEM_CUDNN_FE_CHECK(b.graph->get_workspace_size(b.workspace), what);
  return b;
}

Built build_forward(const AttentionShape& s, DType t, bool masked, cudnnHandle_t h) {
  auto g = new_graph(t);
  const int64_t w = 3 * s.heads * s.head_dim, ow = s.heads * s.head_dim;
  auto q = g->tensor(packed("q", kQ, s, w)), k = g->tensor(packed("k", kK, s, w)), v = g->tensor(packed("v", kV, s, w));
  auto opts = fe::graph::SDPA_attributes()
                  .set_name("tandem_attention_forward")
                  .set_generate_stats(true)
                  .set_attn_scale(1.0f / std::sqrt(static_cast<float>(s.head_dim)));
  if (masked) {
    auto [sq, skv] = seq_lens(*g, s);
    opts.set_padding_mask(true).set_seq_len_q(sq).set_seq_len_kv(skv);
  }
  auto [o, stats] = g->sdpa(q, k, v, opts);
  o->set_output(true).set_uid(kO).set_dim({s.batch, s.heads, s.seq, s.head_dim}).set_stride(
      {s.seq * ow, s.head_dim, ow, 1});
  stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT);
  return finish(std::move(g), h, "building the forward graph");
}

Built build_backward(const AttentionShape& s, DType t, bool masked, cudnnHandle_t h) {
  auto g = new_graph(t);
  const int64_t w = 3 * s.heads * s.head_dim, ow = s.heads * s.head_dim;
  auto q = g->tensor(packed("q", kQ, s, w)), k = g->tensor(packed("k", kK, s, w)), v = g->tensor(packed("v", kV, s, w));
  auto o = g->tensor(packed("o", kO, s, ow)), dout = g->tensor(packed("dO", kDO, s, ow));
  auto stats = g->tensor(stats_attr(s));
  auto opts = fe::graph::SDPA_backward_attributes()
                  .set_name("tandem_attention_backward")
                  .set_attn_scale(1.0f / std::sqrt(static_cast<float>(s.head_dim)))
                  .set_deterministic_algorithm(true);
  if (masked) {
    auto [sq, skv] = seq_lens(*g, s);
    opts.set_padding_mask(true).set_seq_len_q(sq).set_seq_len_kv(skv);
  }
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, opts);
  const std::vector<int64_t> dim{s.batch, s.heads, s.seq, s.head_dim}, stride{s.seq * w, s.head_dim, w, 1};
  dq->set_output(true).set_uid(kDQ).set_dim(dim).set_stride(stride);
  dk->set_output(true).set_uid(kDK).set_dim(dim).set_stride(stride);
  dv->set_output(true).set_uid(kDV).set_dim(dim).set_stride(stride);
  return finish(std::move(g), h, "building the backward graph");
}

const Built& graph_for(const AttentionShape& s, DType t, bool masked, bool backward, int device, cudnnHandle_t h) {
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int, bool, bool>;
  thread_local std::map<Key, Built> cache;
  const Key key{device, s.batch, s.seq, s.heads, s.head_dim, static_cast<int>(t), masked, backward};
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(key, backward ? build_backward(s, t, masked, h) : build_forward(s, t, masked, h)).first;
  return it->second;
}

// Per-sequence lengths for cuDNN's padding mask: queries all S (Tandem computes padded query rows too),
// keys the length of the real prefix. Reads the mask on the host (synchronises the stream); the
// lengths go back from pageable memory, which cudaMemcpyAsync stages before it returns.
struct SeqLens {
  Scratch device;
  SeqLens(const uint8_t* mask, const AttentionShape& s, int dev, cudaStream_t stream)
      : device(dev, static_cast<size_t>(2 * s.batch) * sizeof(int32_t), stream) {
    std::vector<uint8_t> m(static_cast<size_t>(s.batch * s.seq));
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(m.data(), mask, m.size(), cudaMemcpyDeviceToHost, stream));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<int32_t> lens(static_cast<size_t>(2 * s.batch));
    for (int64_t b = 0; b < s.batch; ++b) {
      const uint8_t* row = m.data() + b * s.seq;
      int64_t n = 0;
      while (n < s.seq && row[n]) ++n;
      for (int64_t j = n; j < s.seq; ++j)
        TANDEM_CHECK(!row[j],
                     "cuDNN attention: sequence {} has a real token at {} after padding at {}: cuDNN's padding mask "
                     "needs the real tokens first",
                     b, j, n);
      TANDEM_CHECK(n > 0, "cuDNN attention: sequence {} is all padding (not supported by this back-end)", b);
      lens[static_cast<size_t>(b)] = static_cast<int32_t>(s.seq);
      lens[static_cast<size_t>(s.batch + b)] = static_cast<int32_t>(n);
    }
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(device.as<int32_t>(), lens.data(), lens.size() * sizeof(int32_t),
                                      cudaMemcpyHostToDevice, stream));
  }
};

// Executes `b` with `pack`, adding the sequence lengths when there is a mask.
void run(const Built& b, std::unordered_map<int64_t, void*>& pack, const uint8_t* mask, const AttentionShape& s,
         cudnnHandle_t h, int device, cudaStream_t stream, const char* what) {
  std::unique_ptr<SeqLens> lens;
  if (mask) {
    lens = std::make_unique<SeqLens>(mask, s, device, stream);
    pack[kSeqQ] = lens->device.as<int32_t>();
    pack[kSeqKV] = lens->device.as<int32_t>() + s.batch;
  }
  Scratch workspace(device, static_cast<size_t>(b.workspace), stream);
  TANDEM_CUDNN_FE_CHECK(b.graph->execute(h, pack, workspace.as<void>()), what);
}

}  // namespace

void attention_forward_cudnn(const void* qkv, const uint8_t* mask, void* out, float* stats, const AttentionShape& s,
                             DType t, int device, void* stream) {
  check_supported(s, t);
  auto st = static_cast<cudaStream_t>(stream);
  cudnnHandle_t h = handle_for(device, st);
  const Built& b = graph_for(s, t, mask != nullptr, false, device, h);
  const size_t es = dtype_size(t), hd = static_cast<size_t>(s.heads * s.head_dim) * es;
  auto* base = static_cast<char*>(const_cast<void*>(qkv));
  std::unordered_map<int64_t, void*> pack{{kQ, base}, {kK, base + hd}, {kV, base + 2 * hd}, {kO, out}, {kStats, stats}};
  run(b, pack, mask, s, h, device, st, "forward");
}

void attention_backward_cudnn(const void* qkv, const uint8_t* mask, const void* out, const float* stats,
                              const void* dout, void* dqkv, const AttentionShape& s, DType t, int device,
                              void* stream) {
  check_supported(s, t);
  auto st = static_cast<cudaStream_t>(stream);
  cudnnHandle_t h = handle_for(device, st);
  const Built& b = graph_for(s, t, mask != nullptr, true, device, h);
  const size_t es = dtype_size(t), hd = static_cast<size_t>(s.heads * s.head_dim) * es;
  auto* base = static_cast<char*>(const_cast<void*>(qkv));
  auto* dbase = static_cast<char*>(dqkv);
  std::unordered_map<int64_t, void*> pack{{kQ, base},
                                          {kK, base + hd},
                                          {kV, base + 2 * hd},
                                          {kO, const_cast<void*>(out)},
                                          {kStats, const_cast<float*>(stats)},
                                          {kDO, const_cast<void*>(dout)},
                                          {kDQ, dbase},
                                          {kDK, dbase + hd},
                                          {kDV, dbase + 2 * hd}};
  run(b, pack, mask, s, h, device, st, "backward");
}

}  // namespace tandem::kernels

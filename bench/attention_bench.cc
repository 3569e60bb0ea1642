// Times the attention kernels, forward and backward, and prints achieved TFLOP/s.
//
//   attention_bench [--device cpu|cuda] [--dtype f32|bf16|f16] [--dropout P] [--min-seconds T]
//                   [--backend tandem|cudnn] [--forward tiled|pipelined|pipelined_wide]
//                   [--backward split|fused|split_pipelined|fused_ordered|fused_ordered_pipelined]
//                   [--shape B,S,H,Dh] [--real-fraction F]
//
// --shape times that one shape instead of the list (for a profiler, which
// should see one shape's kernels).
// --real-fraction F (0 < F <= 1, default 1: no mask) gives every row a key-padding
// mask: its first ceil(F * S) keys real, the rest padding, as Tandem's batches pad
// every text to max_seq_len. The work the kernels do then depends on
// TANDEM_ATTENTION_KEY_TILES (the key_tiles column): all visits every key tile,
// trimmed skips those past each row's last real key (kernels/cuda/attention_switches.h).
// With --dropout, TANDEM_ATTENTION_DROPOUT_KEEP (the keep column) says where the
// backward gets the keep decisions: recompute (Philox again in each backward pass)
// or saved (the forward also writes them, one bit per element, and the backward
// reads them), as the op would; "-" without dropout. TANDEM_ATTENTION_DROPOUT_RNG (the
// rng column) picks the dropout's rule: philox10x8 or philox7x16
// (kernels/attention_dropout_rng.h); "-" without dropout. TANDEM_ATTENTION_OCCUPANCY=high
// (kernels/cuda/attention_switches.h) shows in the fwd_blk/SM and bwd_blk/SM columns: five and
// three at head dims up to 32 in 16 bits, for the pipelined forward and split_pipelined.
// TANDEM_ATTENTION_BLOCK_ORDER (the order column): heads_first or tiles_first, how the kernels'
// grids are laid out (kernels/cuda/attention_switches.h; every shape here has under 65535 heads, so
// tiles_first applies to all); "-" where the kernels are not ours.
// The TFLOP/s columns still count the dense S x S work, so with a mask they are
// what the dense problem would have to reach to take the same time.
// --forward picks Tandem's CUDA forward kernel for bf16/f16 (the table's
// fwd_kernel column): tiled (the bench's default, the baseline; the library's
// default, TANDEM_ATTENTION_FORWARD unset, is pipelined),
// pipelined (cp.async double buffering and ldmatrix,
// kernels/cuda/attention_forward_pipelined.cuh) or pipelined_wide (the same
// with 32 query rows per warp). f32 always runs tiled, and the backward is the
// same kernels either way.
// --backend cudnn times cuDNN's fused attention on the same buffers instead of
// Tandem's kernels (a build with the cuDNN attention back-end; bf16/f16, no dropout):
// the peer our kernels are measured against on the same machine.
// --backward picks the CUDA backward path (kernels/cuda/attention_cuda.h): split
// (rowdot, dK/dV, dQ: seven S x S x Dh products; the bench's default) or fused
// (five, dQ through f32 scratch); the table's `backward` column names it. The
// library's default (auto) is fused in f32 and with dropout, split otherwise.
// split_pipelined is split with both passes' streamed tiles double-buffered by
// cp.async (kernels/cuda/attention_backward_pipelined.cuh; bf16/f16);
// fused_ordered is fused with the dQ shares added in place in key-tile order (no
// partials, no reduction kernel; the same bits); fused_ordered_pipelined is that
// with the query tiles double-buffered by cp.async (bf16/f16).
// Calls the raw kernels (kernels/cpu/attention_cpu.h, kernels/cuda/attention_cuda.h)
// on random qkv without padding, so autograd bookkeeping is not timed. FLOPs are
// counted the way FlashAttention reports them: forward 4*B*H*S^2*Dh (QK^T and PV),
// backward 2.5x that (five S x S x Dh products), whatever the kernel actually
// recomputes. Each size runs once to warm up, then repeats until --min-seconds
// have passed (at least 3 times); the mean per call is reported. GPU times come
// from CUDA events on the current stream. fwd_blk/SM and bwd_blk/SM are how many thread blocks of the
// forward kernel and of the backward's main kernel (dkdv or fused) fit one multiprocessor
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor): 128 threads each.
// bench/pytorch/attention_bench.py prints the same table for PyTorch's SDPA.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/elapsed.h"
#include "core/parse_number.h"
#include "core/random.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "kernels/attention_dropout_rng.h"
#include "kernels/cpu/attention_cpu.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/attention_cuda.h"
#endif
#if TANDEM_WITH_CUDNN_ATTENTION
#include "kernels/cuda/attention_cudnn.h"
#endif

namespace tandem::kernels {
namespace {

struct Options {
  Device device = Device::cpu();
  DType dtype = DType::F32;
  double dropout = 0.0;
  double min_seconds = 0.5;
  bool cudnn = false;  // --backend cudnn
  std::string backward = "split";  // --backward: split, fused, split_pipelined, fused_ordered(_pipelined)
  std::string forward = "tiled";  // --forward: tiled, pipelined or pipelined_wide
  std::optional<AttentionShape> shape;  // --shape: this one instead of the list
  double real_fraction = 1.0;           // --real-fraction: each row's real keys, the rest padding
};

// "B,S,H,Dh", each a positive integer.
AttentionShape parse_shape(const std::string& v) {
  int64_t f[4] = {0, 0, 0, 0};
  size_t pos = 0;
  for (int k = 0; k < 4; ++k) {
    const size_t end = k < 3 ? v.find(',', pos) : v.size();
    const std::string part = end == std::string::npos ? std::string() : v.substr(pos, end - pos);
    f[k] = parse_int64(part).value_or(0);
    TANDEM_CHECK(f[k] > 0 && f[k] <= (int64_t{1} << 20) && (k < 3 || end == v.size()),
                 "attention_bench: --shape must be B,S,H,Dh (four positive integers), got '{}'", v);
    pos = end + 1;
  }
  return AttentionShape{f[0], f[1], f[2], f[3]};
}

// The number an option's value spells, whole (no trailing characters); Error naming the option otherwise.
double parse_number(const std::string& option, const std::string& v) {
  const std::optional<double> x = parse_double(v);
  TANDEM_CHECK(x, "attention_bench: {} needs a number, got '{}'", option, v);
  return *x;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    TANDEM_CHECK(i + 1 < argc, "attention_bench: option {} needs a value", a);
    const std::string v = argv[++i];
    if (a == "--device") {
      o.device = parse_device(v);
    } else if (a == "--dtype") {
      o.dtype = parse_dtype(v);
    } else if (a == "--dropout") {
      o.dropout = parse_number(a, v);
      TANDEM_CHECK(o.dropout >= 0 && o.dropout < 1, "attention_bench: --dropout must be in [0, 1), got {}", v);
    } else if (a == "--min-seconds") {
      o.min_seconds = parse_number(a, v);
      TANDEM_CHECK(o.min_seconds >= 0 && o.min_seconds <= 3600,
                   "attention_bench: --min-seconds must be 0 to 3600, got {}", v);
    }
    else if (a == "--backend") {
      TANDEM_CHECK(v == "tandem" || v == "cudnn", "attention_bench: --backend must be tandem or cudnn, got '{}'", v);
      o.cudnn = v == "cudnn";
    } else if (a == "--backward") {
      TANDEM_CHECK(v == "split" || v == "fused" || v == "split_pipelined" || v == "fused_ordered" ||
                       v == "fused_ordered_pipelined",
                   "attention_bench: --backward must be split, fused, split_pipelined, fused_ordered or "
                   "fused_ordered_pipelined, got '{}'",
                   v);
      o.backward = v;
    } else if (a == "--shape") {
      o.shape = parse_shape(v);
    } else if (a == "--real-fraction") {
      o.real_fraction = parse_number(a, v);
      TANDEM_CHECK(o.real_fraction > 0 && o.real_fraction <= 1,
                   "attention_bench: --real-fraction must be in (0, 1], got {}", v);
    } else if (a == "--forward") {
      TANDEM_CHECK(v == "tiled" || v == "pipelined" || v == "pipelined_wide",
                   "attention_bench: --forward must be tiled, pipelined or pipelined_wide, got '{}'", v);
      o.forward = v;
    } else {
      TANDEM_FAIL("attention_bench: unknown option {} (--device, --dtype, --dropout, --min-seconds, --backend, "
                  "--forward, --backward, --shape, --real-fraction)",
                  a);
    }
  }
#if !TANDEM_WITH_CUDNN_ATTENTION
  TANDEM_CHECK(!o.cudnn, "attention_bench: --backend cudnn, but this build has no cuDNN attention back-end "
                         "(cuDNN and the cuDNN frontend: docs/kernels.md)");
#endif
  TANDEM_CHECK(!o.cudnn || o.device.is_cuda(), "attention_bench: --backend cudnn needs --device cuda");
  TANDEM_CHECK(!o.cudnn || o.dropout == 0, "attention_bench: --backend cudnn runs without dropout (--dropout 0)");
  TANDEM_CHECK(o.backward == "split" || (o.device.is_cuda() && !o.cudnn),
               "attention_bench: --backward {} is a path of Tandem's CUDA kernels (--device cuda, --backend tandem)",
               o.backward);
  TANDEM_CHECK((o.backward != "split_pipelined" && o.backward != "fused_ordered_pipelined") ||
                   o.dtype == DType::BF16 || o.dtype == DType::F16,
               "attention_bench: --backward {} is for bf16/f16 (--dtype bf16|f16)", o.backward);
  TANDEM_CHECK(o.forward == "tiled" ||
                   (o.device.is_cuda() && !o.cudnn && (o.dtype == DType::BF16 || o.dtype == DType::F16)),
               "attention_bench: --forward {} is Tandem's CUDA forward for bf16/f16 (--device cuda, "
               "--backend tandem, --dtype bf16|f16)",
               o.forward);
  // Last, so that on a machine without a GPU a GPU command line is checked in full
  // (tools/gpu-check.sh's rehearsal relies on it).
  TANDEM_CHECK(!o.device.is_cuda() || cuda::available(), "attention_bench: --device {}, but no CUDA device is available",
               o.device.str());
  return o;
}

#if TANDEM_WITH_CUDA
AttentionForwardKernel forward_kernel(const Options& o) {
  return o.forward == "pipelined"        ? AttentionForwardKernel::Pipelined
         : o.forward == "pipelined_wide" ? AttentionForwardKernel::PipelinedWide
                                         : AttentionForwardKernel::Tiled;
}
AttentionBackwardPath backward_path(const Options& o) {
  return o.backward == "fused"             ? AttentionBackwardPath::Fused
         : o.backward == "split_pipelined" ? AttentionBackwardPath::SplitPipelined
         : o.backward == "fused_ordered"   ? AttentionBackwardPath::FusedOrdered
         : o.backward == "fused_ordered_pipelined" ? AttentionBackwardPath::FusedOrderedPipelined
                                           : AttentionBackwardPath::Split;
}
#endif

// Mean seconds per call of f: one warm-up call, then repeats until min_seconds (at least 3 calls).
double time_per_call(const Options& o, const std::function<void()>& f) {
  f();
  if (o.device.is_cuda()) {
    cuda::Stream s = cuda::current_stream(o.device.index);
    cuda::Event start(true), stop(true);
    int calls = 0;
    double ms = 0;
    while (calls < 3 || ms < 1e3 * o.min_seconds) {
      start.record(s);
      for (int k = 0; k < 10; ++k) f();
      stop.record(s);
      stop.synchronize();
      ms += start.elapsed_ms(stop);
      calls += 10;
    }
    return ms / 1e3 / calls;
  }
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  int calls = 0;
  double seconds = 0;
  while (calls < 3 || seconds < o.min_seconds) {
    f();
    ++calls;
    seconds = seconds_since(t0);
  }
  return seconds / calls;
}

void run(const Options& o, const AttentionShape& s) {
  const AttentionDropout d{static_cast<float>(o.dropout), 1, 0, nullptr, attention_dropout_rng()};
  const Shape qkv_shape{s.batch, s.seq, 3 * s.heads * s.head_dim}, out_shape{s.batch, s.seq, s.heads * s.head_dim};
  Tensor qkv = Tensor::empty(qkv_shape, o.dtype, o.device), dout = Tensor::empty(out_shape, o.dtype, o.device);
  fill_normal(qkv, 1, 0);
  fill_normal(dout, 2, 0);
  Tensor out = Tensor::empty(out_shape, o.dtype, o.device), dqkv = Tensor::empty(qkv_shape, o.dtype, o.device);
  const DType stats = o.dtype == DType::F64 ? DType::F64 : DType::F32;
  Tensor lse = Tensor::empty({s.batch, s.heads, s.seq}, stats, o.device);
  // --real-fraction < 1: the first ceil(F * S) keys of every row real, the rest padding.
  Tensor mask_tensor;
  if (o.real_fraction < 1) {
    const auto real = static_cast<int64_t>(std::ceil(o.real_fraction * static_cast<double>(s.seq)));
    std::vector<int64_t> flags(static_cast<size_t>(s.batch * s.seq));
    for (int64_t i = 0; i < s.batch * s.seq; ++i) flags[static_cast<size_t>(i)] = i % s.seq < real ? 1 : 0;
    mask_tensor = Tensor::from_vector(flags, {s.batch, s.seq}, DType::U8, o.device);
  }
  const uint8_t* mask = mask_tensor.defined() ? mask_tensor.data<uint8_t>() : nullptr;

  std::function<void()> forward, backward;
  Tensor keep_bytes;        // the saved dropout keep bits (TANDEM_ATTENTION_DROPOUT_KEEP=saved)
  uint8_t* keep = nullptr;  // their bytes, or null: recomputed
  if (o.device.is_cpu()) {
    forward = [&] { attention_forward_cpu(qkv.data_ptr(), mask, out.data_ptr(), lse.data_ptr(), s, d, o.dtype); };
    backward = [&] {
      attention_backward_cpu(qkv.data_ptr(), mask, lse.data_ptr(), dout.data_ptr(), dqkv.data_ptr(), s, d, o.dtype);
    };
  } else if (o.cudnn) {
#if TANDEM_WITH_CUDNN_ATTENTION
    void* stream = cuda::current_stream(o.device.index).handle();
    forward = [&, stream] {
      attention_forward_cudnn(qkv.data_ptr(), mask, out.data_ptr(), lse.data<float>(), s, o.dtype, o.device.index,
                              stream);
    };
    backward = [&, stream] {
      attention_backward_cudnn(qkv.data_ptr(), mask, out.data_ptr(), lse.data<float>(), dout.data_ptr(),
                               dqkv.data_ptr(), s, o.dtype, o.device.index, stream);
    };
#endif
  } else {
#if TANDEM_WITH_CUDA
    void* stream = cuda::current_stream(o.device.index).handle();
    const AttentionForwardKernel kernel = forward_kernel(o);
    // TANDEM_ATTENTION_DROPOUT_KEEP=saved: the forward writes the keep bits that the backward reads.
    if (d.active() && attention_dropout_keep() == AttentionDropoutKeep::Saved)
      keep_bytes = Tensor::empty({attention_keep_bytes(s)}, DType::U8, o.device);
    keep = keep_bytes.defined() ? keep_bytes.data<uint8_t>() : nullptr;
    forward = [&, stream, kernel] {
      attention_forward_cuda(qkv.data_ptr(), mask, out.data_ptr(), lse.data<float>(), s, d, o.dtype,
                             o.device.index, stream, kernel, keep);
    };
    const AttentionBackwardPath path = backward_path(o);
    backward = [&, stream, path] {
      attention_backward_cuda(qkv.data_ptr(), mask, out.data_ptr(), lse.data<float>(), dout.data_ptr(),
                              dqkv.data_ptr(), s, d, o.dtype, o.device.index, stream, path, keep);
    };
#else
    TANDEM_FAIL("attention_bench: --device cuda, but Tandem was built without CUDA");
#endif
  }
  const double fwd = time_per_call(o, forward);
  const double bwd = time_per_call(o, backward);  // out and lse hold the forward's results
  const double fwd_flops = 4.0 * double(s.batch * s.heads) * double(s.seq) * double(s.seq) * double(s.head_dim);
  const std::string fwd_kernel = o.device.is_cpu() ? "cpu" : o.cudnn ? "cudnn" : o.forward;
  const std::string backward_name = o.device.is_cpu() ? "cpu" : o.cudnn ? "cudnn" : o.backward;
  // Blocks of Tandem's forward kernel and of its backward's main kernel resident per multiprocessor
  // ("-" where they are not ours).
  std::string fwd_blocks = "-", bwd_blocks = "-", key_tiles = "-", order = "-", keep_name = "-";
  // The dropout's rule (TANDEM_ATTENTION_DROPOUT_RNG, every device), "-" without dropout; cuDNN has its own.
  const std::string rng_name = !d.active() ? "-" : o.cudnn ? "cudnn" : attention_dropout_rng_name(d.rng);
#if TANDEM_WITH_CUDA
  if (o.device.is_cuda() && !o.cudnn) {
    fwd_blocks = std::to_string(attention_forward_blocks_per_sm(s.head_dim, o.dtype, forward_kernel(o)));
    bwd_blocks = std::to_string(attention_backward_blocks_per_sm(s.head_dim, o.dtype, backward_path(o)));
    key_tiles = attention_key_tiles_name(attention_key_tiles());
    order = attention_block_order_name(attention_block_order());
    if (d.active()) keep_name = attention_dropout_keep_name(attention_dropout_keep());
  }
#endif
  fmt::print(
      "{:>6} {:>7} {:>14} {:>15} {:>5} {:>6} {:>5} {:>6} {:>7} {:>8} {:>10} {:>5} {:>9} {:>11} {:>9} {:>11.3f} "
      "{:>10.3f} {:>10} {:>11.3f} {:>10.3f} {:>10}\n",
      o.device.str(), o.cudnn ? "cudnn" : "tandem", fwd_kernel, backward_name, dtype_name(o.dtype), s.batch, s.seq,
      s.heads, s.head_dim, o.dropout, rng_name, o.real_fraction, key_tiles, order, keep_name, 1e3 * fwd,
      fwd_flops / fwd / 1e12,
      fwd_blocks, 1e3 * bwd, 2.5 * fwd_flops / bwd / 1e12, bwd_blocks);
}

}  // namespace
}  // namespace tandem::kernels

int main(int argc, char** argv) {
  using namespace tandem;
  using namespace tandem::kernels;
  try {
    const Options o = parse(argc, argv);
    // (batch, seq, heads, head_dim): BERT-base-like shapes at growing sequence lengths, and Dh = 32 / 128.
    std::vector<AttentionShape> sizes = {{32, 128, 12, 64}, {16, 256, 12, 64}, {8, 512, 12, 64},
                                         {8, 512, 16, 32},  {8, 512, 6, 128}};
    if (o.device.is_cuda()) sizes.push_back({64, 512, 12, 64});
    if (o.shape) sizes = {*o.shape};
    fmt::print("{:>6} {:>7} {:>14} {:>15} {:>5} {:>6} {:>5} {:>6} {:>7} {:>8} {:>10} {:>5} {:>9} {:>11} {:>9} {:>11} "
               "{:>10} {:>10} {:>11} {:>10} {:>10}\n",
               "device", "backend", "fwd_kernel", "backward", "dtype", "batch", "seq", "heads", "head_dim", "dropout",
               "rng", "real", "key_tiles", "order", "keep", "fwd_ms", "fwd_TFLOPs", "fwd_blk/SM", "bwd_ms", "bwd_TFLOPs", "bwd_blk/SM");
    for (const AttentionShape& s : sizes) run(o, s);
  } catch (const std::exception& e) {
    fmt::print(stderr, "attention_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}

// `tandem bench allreduce`: collective bandwidth in the nccl-tests format
// (all_reduce_perf, and with --collective reduce_scatter_perf / all_gather_perf).
//
// Run one process per rank, e.g.
//   tandem launch --nproc-per-node 4 -- tandem bench allreduce -b 8 -e 256M -f 2
// Rank 0 prints, per size: the time of one collective (the slowest rank's
// mean over --iters back-to-back ops), algbw = size / time, busbw = algbw x
// the ring's factor (the bytes each rank's link really carries, so numbers
// are comparable across world sizes): 2(n-1)/n for all_reduce, (n-1)/n for
// reduce_scatter and all_gather. As in nccl-tests, size is the whole buffer:
// all_reduce's, reduce_scatter's input (n x its output), all_gather's output
// (n x its input). #wrong counts the elements that differ from the
// closed-form expected result in a separate checked run; out of place, then
// in place (all_reduce only: Tandem's reduce_scatter and all_gather take
// separate input and output, so their in-place columns print "-").
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <memory>

#include "apps/commands.h"
#include "comm/init.h"
#include "core/check.h"
#include "core/elapsed.h"
#include "core/stream.h"
#include "core/tensor.h"

namespace tandem::apps {

namespace {

struct BenchOptions {
  std::string backend = "ring";
  std::string min_bytes = "8", max_bytes = "256M";
  double step_factor = 2;
  int iters = 20, warmup = 5;
  std::string collective = "all_reduce";  // all_reduce | reduce_scatter | all_gather
  std::string dtype = "f32", op = "sum", device = "cpu";
  bool check = true;
  double timeout_s = 300;
  std::string ring_chunk = "256K";
  std::string ring_socket_buffer = "0";
  std::string ring_transport = "auto";
  std::string ring_single_copy = "auto";
  std::string ring_shared_buffers = "auto";
};

// `option` names where the text came from in errors ("--maxbytes").
size_t parse_size(const std::string& text, const char* option) {
  TANDEM_CHECK(!text.empty(), "{}: empty size", option);
  size_t unit = 1;
  std::string digits = text;
  switch (std::toupper(static_cast<unsigned char>(text.back()))) {
    case 'K': unit = 1ull << 10; digits.pop_back(); break;
    case 'M': unit = 1ull << 20; digits.pop_back(); break;
    case 'G': unit = 1ull << 30; digits.pop_back(); break;
    default: break;
  }
  TANDEM_CHECK(!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos,
               "{}: '{}' is not a size (like 8, 64K, 256M, 1G)", option, text);
  // Up to 1 TiB: far beyond any buffer this benchmark can allocate, and no overflow below.
  constexpr size_t kMax = size_t{1} << 40;
  TANDEM_CHECK(digits.size() <= 13 && std::stoull(digits) * unit <= kMax, "{}: '{}' is more than 1T", option, text);
  return std::stoull(digits) * unit;
}

const char* nccl_type_name(DType d) {
  switch (d) {
    case DType::F32: return "float";
    case DType::F64: return "double";
    case DType::F16: return "half";
    case DType::BF16: return "bfloat16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    default: return "?";
  }
}

// Rank r's input element i and the expected reduction: small integers, exact in every dtype.
double input_value(int rank, int64_t i) { return static_cast<double>((rank + i) % 5); }

double expected_value(comm::ReduceOp op, int world, DType d, int64_t i) {
  double sum = 0, max = 0;
  for (int r = 0; r < world; ++r) {
    sum += input_value(r, i);
    max = std::max(max, input_value(r, i));
  }
  if (op == comm::ReduceOp::Max) return max;
  if (op == comm::ReduceOp::Sum) return sum;
  return (d == DType::I32 || d == DType::I64) ? std::trunc(sum / world) : sum / world;
}

class Bench {
 public:
  Bench(comm::ProcessGroup& pg, const BenchOptions& o, Device device)
      : pg_(pg),
        o_(o),
        device_(device),
        dtype_(parse_dtype(o.dtype)),
        op_(comm::parse_reduce_op(o.op)),
        kind_(parse_kind(o.collective)) {}

  void run() {
    const size_t esz = dtype_size(dtype_);
    const size_t lo = parse_size(o_.min_bytes, "--minbytes"), hi = parse_size(o_.max_bytes, "--maxbytes");
    TANDEM_CHECK(lo >= 1 && lo <= hi, "sizes: need 1 <= --minbytes <= --maxbytes, got {} and {}", o_.min_bytes,
                 o_.max_bytes);
    header();
    double bus_sum = 0;
    int rows = 0;
    int64_t wrong_total = 0;
    for (double bytes = static_cast<double>(lo); bytes <= static_cast<double>(hi) * 1.0000001; bytes *= o_.step_factor) {
      // reduce_scatter and all_gather move a whole number of elements per rank.
      const int64_t world = pg_.size(), per_rank_multiple = all_reduce() ? 1 : world;
      const int64_t count = static_cast<int64_t>(static_cast<size_t>(bytes) / esz) / per_rank_multiple * per_rank_multiple;
      if (count == 0) continue;
      part_ = count / world;
      Tensor in = make_input(kind_ == Kind::AllGather ? part_ : count);
      Tensor out = buffer(kind_ == Kind::ReduceScatter ? part_ : count);
      const Result oop = measure(in, out, false), ip = all_reduce() ? measure(in, in, true) : Result{};
      wrong_total += oop.wrong + ip.wrong;
      bus_sum += oop.busbw + ip.busbw;
      rows += all_reduce() ? 2 : 1;
      if (pg_.rank() == 0) {
        const size_t nbytes = static_cast<size_t>(count) * esz;
        const std::string redop = kind_ == Kind::AllGather ? "none" : std::string(comm::reduce_op_name(op_));
        std::printf("%12zu  %12lld  %8s  %6s  %6d  %s  %s\n", nbytes, static_cast<long long>(count),
                    nccl_type_name(dtype_), redop.c_str(), -1, oop.str().c_str(),
                    all_reduce() ? ip.str().c_str() : Result::not_run().c_str());
        std::fflush(stdout);
      }
    }
    if (pg_.rank() == 0) {
      std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_total), wrong_total ? "FAILED" : "OK");
      std::printf("# Avg bus bandwidth    : %g\n#\n", rows ? bus_sum / rows : 0.0);
    }
    TANDEM_CHECK(wrong_total == 0, "bench allreduce: {} wrong elements ({})", wrong_total, o_.collective);
  }

 private:
  enum class Kind { AllReduce, ReduceScatter, AllGather };

  static Kind parse_kind(const std::string& name) {
    if (name == "all_reduce") return Kind::AllReduce;
    if (name == "reduce_scatter") return Kind::ReduceScatter;
    TANDEM_CHECK(name == "all_gather", "--collective: '{}' is not all_reduce, reduce_scatter or all_gather", name);
    return Kind::AllGather;
  }
  bool all_reduce() const { return kind_ == Kind::AllReduce; }

  std::shared_ptr<comm::Work> issue(const Tensor& in, Tensor& out) {
    switch (kind_) {
      case Kind::AllReduce: return pg_.all_reduce(in, out, op_);
      case Kind::ReduceScatter: return pg_.reduce_scatter(in, out, op_);
      case Kind::AllGather: return pg_.all_gather(in, out);
    }
    return nullptr;
  }

  // Element i of this rank's output, in closed form.
  double expected(int64_t i) const {
    switch (kind_) {
      case Kind::AllReduce: return expected_value(op_, pg_.size(), dtype_, i);
      case Kind::ReduceScatter: return expected_value(op_, pg_.size(), dtype_, pg_.rank() * part_ + i);
      case Kind::AllGather: return input_value(static_cast<int>(i / part_), i % part_);
    }
    return 0;
  }

  // The ring's bytes per link over the collective's size (nccl-tests' busbw factor).
  double bus_factor() const {
    const double n = pg_.size();
    return all_reduce() ? 2 * (n - 1) / n : (n - 1) / n;
  }

  struct Result {
    double us = 0, algbw = 0, busbw = 0;
    int64_t wrong = 0;
    std::string str() const { return fmt::format("{:10.2f}  {:6.2f}  {:6.2f}  {:6}", us, algbw, busbw, wrong); }
    static std::string not_run() { return fmt::format("{:>10}  {:>6}  {:>6}  {:>6}", "-", "-", "-", "-"); }
  };

  // What DDP reduces: its buckets come from shared_zeros too (shared buffers
  // where the group has them, ordinary tensors elsewhere).
  Tensor buffer(int64_t count) const { return pg_.shared_zeros({count}, dtype_, device_); }

  Tensor make_input(int64_t count) const {
    std::vector<double> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = input_value(pg_.rank(), i);
    Tensor t = buffer(count);
    t.copy_(Tensor::from_vector(v, {count}, dtype_, device_));
    return t;
  }

  void wait(const std::shared_ptr<comm::Work>& w) const {
    TANDEM_CHECK(w->wait(std::chrono::milliseconds(static_cast<int64_t>(o_.timeout_s * 1000))),
                 "bench allreduce: a {} did not finish within {} s", o_.collective, o_.timeout_s);
  }

  // Slowest rank's value (the time of a collective is the time of its last rank).
  double max_over_ranks(double v) const {
    Tensor t = Tensor::full({1}, v, DType::F64, device_);
    wait(pg_.all_reduce(t, comm::ReduceOp::Max));
    return t.item();
  }

  Result measure(Tensor& in, Tensor& out, bool in_place) {
    Tensor scratch_in = in;
    if (in_place) {
      scratch_in = buffer(in.numel());
      scratch_in.copy_(in);
    }
    Tensor& target = in_place ? scratch_in : out;
    for (int i = 0; i < o_.warmup; ++i) wait(issue(scratch_in, target));
    wait(pg_.barrier());
    auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<comm::Work> last;
    for (int i = 0; i < o_.iters; ++i) last = issue(scratch_in, target);
    wait(last);
    if (device_.is_cuda()) cuda::current_stream(device_.index).synchronize();
    double seconds = seconds_since(t0) / o_.iters;
    Result r;
    seconds = max_over_ranks(seconds);
    r.us = seconds * 1e6;
    r.algbw = static_cast<double>(std::max(in.nbytes(), out.nbytes())) / seconds / 1e9;
    r.busbw = r.algbw * bus_factor();
    if (o_.check) {
      Tensor fresh = make_input(in.numel());
      Tensor& dst = in_place ? fresh : out;
      wait(issue(fresh, dst));
      const std::vector<double> got = dst.to_double_vector();
      // The closed form rounded to the dtype once (an average need not be representable).
      std::vector<double> want(got.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = expected(static_cast<int64_t>(i));
      want = Tensor::from_vector(want, {static_cast<int64_t>(want.size())}, dtype_).to_double_vector();
      int64_t wrong = 0;
      for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i]) ++wrong;
      Tensor w = Tensor::full({1}, static_cast<double>(wrong), DType::F64, device_);
      wait(pg_.all_reduce(w, comm::ReduceOp::Sum));
      r.wrong = static_cast<int64_t>(w.item());
    }
    return r;
  }

  void header() const {
    if (pg_.rank() != 0) return;
    std::string transport = pg_.transport().empty() ? "" : " (transport " + pg_.transport() + ")";
    if (!pg_.single_copy().empty()) transport += " (single copy " + pg_.single_copy() + ")";
    if (!pg_.shared_buffers().empty()) transport += " (shared buffers " + pg_.shared_buffers() + ")";
    std::printf("# tandem bench allreduce: %s, backend %s%s, %d ranks, dtype %s, op %s, device %s, iters %d, warmup %d\n#\n",
                o_.collective.c_str(), pg_.backend_name().c_str(), transport.c_str(), pg_.size(), nccl_type_name(dtype_),
                std::string(comm::reduce_op_name(op_)).c_str(), device_.str().c_str(), o_.iters, o_.warmup);
    std::printf("# %10s  %12s  %8s  %6s  %6s  %34s  %34s\n", "", "", "", "", "", "out-of-place", "in-place");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %10s  %6s  %6s  %6s  %10s  %6s  %6s  %6s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %10s  %6s  %6s  %6s  %10s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "",
                "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }

  comm::ProcessGroup& pg_;
  const BenchOptions& o_;
  Device device_;
  DType dtype_;
  comm::ReduceOp op_;
  Kind kind_;
  int64_t part_ = 0;  // elements per rank of the current size (reduce_scatter's output, all_gather's input)
};

}  // namespace

void add_bench_allreduce_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("allreduce", "all_reduce (or reduce_scatter, all_gather) bandwidth table in the "
                                                "nccl-tests format (run under tandem launch)");
  auto o = std::make_shared<BenchOptions>();
  cmd->add_option("--backend", o->backend, "ring, nccl or auto")->capture_default_str();
  cmd->add_option("-b,--minbytes", o->min_bytes, "Smallest size (8, 64K, 1M, ...)")->capture_default_str();
  cmd->add_option("-e,--maxbytes", o->max_bytes, "Largest size")->capture_default_str();
  cmd->add_option("--collective", o->collective, "all_reduce, reduce_scatter or all_gather")
      ->check(CLI::IsMember({"all_reduce", "reduce_scatter", "all_gather"}))
      ->capture_default_str();
  cmd->add_option("-f,--stepfactor", o->step_factor, "Size multiplier between rows")->capture_default_str();
  cmd->add_option("-n,--iters", o->iters, "Timed iterations per size")->capture_default_str();
  cmd->add_option("-w,--warmup_iters", o->warmup, "Untimed iterations per size")->capture_default_str();
  cmd->add_option("-d,--datatype", o->dtype, "f32, f16, bf16, i32, i64, f64")->capture_default_str();
  cmd->add_option("-o,--op", o->op, "sum, avg or max")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu or cuda")->capture_default_str();
  cmd->add_option("-c,--check", o->check, "Check results (1) or not (0)")->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "Seconds before a collective counts as hung")->capture_default_str();
  cmd->add_option("--ring-chunk", o->ring_chunk, "ring: pipeline chunk size")->capture_default_str();
  cmd->add_option("--ring-socket-buffer", o->ring_socket_buffer, "ring: SO_SNDBUF/SO_RCVBUF (0: kernel autotuning)")
      ->capture_default_str();
  cmd->add_option("--ring-transport", o->ring_transport, "ring: auto (shared memory on one host), tcp or shm")
      ->capture_default_str();
  cmd->add_option("--ring-single-copy", o->ring_single_copy,
                  "ring: auto (all_reduce of 2M and more reads the peers' buffers directly on one host when tensors are on huge pages), off or on (every size)")
      ->capture_default_str();
  cmd->add_option("--ring-shared-buffers", o->ring_shared_buffers,
                  "ring: auto (the buffers are memory every rank on one host maps, reduced in place, as DDP's buckets), off (ordinary tensors) or on (an error where impossible)")
      ->capture_default_str();
  cmd->callback([o] {
    TANDEM_CHECK(o->iters >= 1, "--iters must be at least 1, got {}", o->iters);
    TANDEM_CHECK(o->warmup >= 0, "--warmup_iters must be at least 0, got {}", o->warmup);
    TANDEM_CHECK(o->step_factor > 1 && std::isfinite(o->step_factor), "--stepfactor must be more than 1, got {}",
                 o->step_factor);
    TANDEM_CHECK(o->timeout_s > 0 && o->timeout_s <= 1e6, "--timeout must be in (0, 1e6] seconds, got {}",
                 o->timeout_s);
    comm::RankInfo info = comm::rank_info_from_env();
    comm::ProcessGroupOptions po;
    po.timeout = std::chrono::milliseconds(static_cast<int64_t>(o->timeout_s * 1000));
    po.ring_chunk_bytes = parse_size(o->ring_chunk, "--ring-chunk");
    const size_t socket_buffer = parse_size(o->ring_socket_buffer, "--ring-socket-buffer");
    TANDEM_CHECK(socket_buffer <= (1u << 30), "--ring-socket-buffer: '{}' is more than 1G", o->ring_socket_buffer);
    po.ring_socket_buffer_bytes = static_cast<int>(socket_buffer);
    po.ring_transport = comm::parse_ring_transport(o->ring_transport, "--ring-transport");
    po.ring_single_copy = comm::parse_ring_single_copy(o->ring_single_copy, "--ring-single-copy");
    po.ring_shared_buffers = comm::parse_ring_shared_buffers(o->ring_shared_buffers, "--ring-shared-buffers");
    Device device = parse_device(o->device);
    // NCCL only reduces device memory; without this the header printed and the first
    // collective failed on a CPU tensor (the GPU check's first run of it did).
    TANDEM_CHECK(o->backend != "nccl" || device.is_cuda(), "--backend nccl reduces GPU tensors only: add --device cuda");
    TANDEM_CHECK(!device.is_cuda() || cuda::available(), "--device {}, but no CUDA device is available", o->device);
    if (device.is_cuda()) {
      device = Device::cuda(info.local_rank % std::max(1, cuda::device_count()));
      cuda::set_device(device.index);
    }
    auto pg = comm::init_process_group(o->backend, info, po);
    TANDEM_CHECK(pg->backend_name() != "nccl" || device.is_cuda(),
                 "--backend {} chose nccl, which reduces GPU tensors only: add --device cuda", o->backend);
    Bench(*pg, *o, device).run();
  });
}

}  // namespace tandem::apps

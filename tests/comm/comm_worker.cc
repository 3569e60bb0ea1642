// One rank of the multi-process comm tests, started by the launcher library
// (tests/comm/*_multiprocess_test.cc) or by tests/comm/netns_test.sh.
//
//   comm_worker collectives [--backend B] [--device cpu|cuda]
//       every collective, dtype, size (including 0 and sizes not divisible by
//       the world size), in place and out of place, against a reference each
//       rank computes on its own from the closed-form inputs of every rank.
//   comm_worker rendezvous           init + barrier (for missing-rank tests)
//   comm_worker kill_mid_allreduce V rank V SIGKILLs itself while a large
//       all_reduce is running; the others must fail with an error naming V.
//   comm_worker desync KIND          after one matching all_reduce, rank 1
//       issues something else than the others: "count" (one element fewer),
//       "skip" (skips an all_reduce), "dtype" (i32 where the others use f32),
//       "root" (broadcasts from another root), "missing" (stops before the
//       last op). Then every rank issues one more all_reduce and a barrier;
//       the worker exits 2 with the error if any of it fails, 0 otherwise.
//
// Exit 0 on success, 1 on a wrong result, 2 on an error (printed on stderr).
// TANDEM_COMM_TIMEOUT_MS sets the process group timeout. Every rank first
// prints "rank R: transport T (pid P), single copy C, shared buffers S" (T:
// the ring's transport, empty for nccl). all_reduce's buffers come from
// shared_zeros, as DDP's buckets do.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <string>
#include <thread>
#include <vector>

#include "comm/init.h"
#include "core/check.h"
#include "core/stream.h"
#include "core/tensor.h"

using namespace tandem;
using namespace tandem::comm;

namespace {

// Small integers: sums over <= 4 ranks are exact in every dtype, f16 and bf16 included.
double value(int rank, int64_t i, int salt) { return static_cast<double>((rank * 7 + i * 13 + salt * 5) % 17) - 8; }

std::vector<double> values(int rank, int64_t n, int salt, int64_t first = 0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = value(rank, first + i, salt);
  return v;
}

double tolerance(DType d) {
  switch (d) {
    case DType::F16: return 1e-3;
    case DType::BF16: return 8e-3;
    case DType::F32: return 1e-6;
    default: return 0;
  }
}

class Checker {
 public:
  Checker(int rank, Device device) : rank_(rank), device_(device) {}

  void expect(const Tensor& got, const std::vector<double>& want, const std::string& what, double atol = 0) {
    ++checks_;
    std::vector<double> g = got.to_double_vector();
    if (g.size() != want.size()) return fail(fmt::format("{}: {} elements, expected {}", what, g.size(), want.size()));
    const double rtol = tolerance(got.dtype());
    for (size_t i = 0; i < g.size(); ++i) {
      double err = std::abs(g[i] - want[i]);
      if (err > atol + rtol * std::abs(want[i])) {
        return fail(fmt::format("{}: element {} is {}, expected {}", what, i, g[i], want[i]));
      }
    }
  }

  Tensor make(const std::vector<double>& v, DType d) const {
    return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, d, device_);
  }

  void fail(const std::string& message) {
    ++failures_;
    if (failures_ <= 10) std::fprintf(stderr, "rank %d: WRONG %s\n", rank_, message.c_str());
  }
  int checks() const { return checks_; }
  int failures() const { return failures_; }

 private:
  int rank_;
  Device device_;
  int checks_ = 0, failures_ = 0;
};

// The reference reduction of element i over all ranks, in double.
double reference(ReduceOp op, int world, DType d, int64_t i, int salt) {
  double sum = 0, max = -1e300;
  for (int r = 0; r < world; ++r) {
    double v = value(r, i, salt);
    sum += v;
    max = std::max(max, v);
  }
  if (op == ReduceOp::Max) return max;
  if (op == ReduceOp::Sum) return sum;
  if (d == DType::I32 || d == DType::I64) return std::trunc(sum / world);
  return sum / world;
}

// t's values in a buffer from the group's shared_zeros: shared buffers where
// the group has them (TANDEM_RING_SHARED_BUFFERS), an ordinary tensor elsewhere.
Tensor shared(const ProcessGroup& pg, const Tensor& t) {
  Tensor out = pg.shared_zeros(t.shape(), t.dtype(), t.device());
  out.copy_(t);
  return out;
}

std::chrono::milliseconds wait_limit() { return std::chrono::minutes(2); }

int run_collectives(ProcessGroup& pg, Device device) {
  const int n = pg.size(), r = pg.rank();
  Checker check(r, device);
  const std::vector<DType> dtypes = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::F64};
  const std::vector<int64_t> sizes = {0, 1, n - 1, n + 1, 7, 1000, 65537, 300001};
  const std::vector<ReduceOp> ops = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max};
  int salt = 0;
  for (DType d : dtypes) {
    for (int64_t count : sizes) {
      std::string tag = fmt::format("{} x{}", dtype_name(d), count);
      for (ReduceOp op : ops) {
        ++salt;
        std::vector<double> want(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i) want[static_cast<size_t>(i)] = reference(op, n, d, i, salt);
        // In place, on the buffers DDP reduces (shared where the group has them).
        Tensor t = shared(pg, check.make(values(r, count, salt), d));
        pg.all_reduce(t, op)->wait(wait_limit());
        check.expect(t, want, fmt::format("all_reduce {} in place {}", reduce_op_name(op), tag));
        // Out of place: the input is left alone.
        Tensor in = shared(pg, check.make(values(r, count, salt), d)), out = pg.shared_zeros({count}, d, device);
        pg.all_reduce(in, out, op)->wait(wait_limit());
        check.expect(out, want, fmt::format("all_reduce {} out of place {}", reduce_op_name(op), tag));
        check.expect(in, values(r, count, salt), fmt::format("all_reduce {} input untouched {}", reduce_op_name(op), tag));
        // reduce_scatter: rank r gets the reduction of block r.
        Tensor big = check.make(values(r, count * n, salt), d), part = Tensor::zeros({count}, d, device);
        pg.reduce_scatter(big, part, op)->wait(wait_limit());
        std::vector<double> want_part(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i) want_part[static_cast<size_t>(i)] = reference(op, n, d, r * count + i, salt);
        check.expect(part, want_part, fmt::format("reduce_scatter {} {}", reduce_op_name(op), tag));
        // reduce_scatter in place: the output is this rank's block of the input.
        Tensor big2 = check.make(values(r, count * n, salt), d);
        Tensor mine = big2.view_range(r * count, {count});
        pg.reduce_scatter(big2, mine, op)->wait(wait_limit());
        check.expect(mine, want_part, fmt::format("reduce_scatter {} in place {}", reduce_op_name(op), tag));
      }
      ++salt;
      for (int root = 0; root < n; ++root) {
        Tensor t = check.make(values(r, count, salt + root), d);
        pg.broadcast(t, root)->wait(wait_limit());
        check.expect(t, values(root, count, salt + root), fmt::format("broadcast from {} {}", root, tag));
      }
      std::vector<double> gathered;
      for (int j = 0; j < n; ++j) {
        auto v = values(j, count, salt);
        gathered.insert(gathered.end(), v.begin(), v.end());
      }
      Tensor in = check.make(values(r, count, salt), d), out = Tensor::zeros({count * n}, d, device);
      pg.all_gather(in, out)->wait(wait_limit());
      check.expect(out, gathered, fmt::format("all_gather {}", tag));
      Tensor out2 = Tensor::zeros({count * n}, d, device);
      Tensor own = out2.view_range(r * count, {count});
      own.copy_(in);
      pg.all_gather(own, out2)->wait(wait_limit());
      check.expect(out2, gathered, fmt::format("all_gather in place {}", tag));
    }
  }
  // Non-integer f32 data: every rank must end with bitwise the same sum (DDP replicas must not drift).
  std::vector<double> noisy(100003);
  for (size_t i = 0; i < noisy.size(); ++i) noisy[i] = std::sin(0.37 * static_cast<double>(i) + r) * (1 + r);
  Tensor t = check.make(noisy, DType::F32);
  pg.all_reduce(t, ReduceOp::Sum)->wait(wait_limit());
  Tensor all = Tensor::zeros({t.numel() * n}, DType::F32, device);
  pg.all_gather(t, all)->wait(wait_limit());
  std::vector<double> a = all.to_double_vector();
  for (int j = 1; j < n; ++j)
    for (int64_t i = 0; i < t.numel(); ++i)
      if (a[static_cast<size_t>(j * t.numel() + i)] != a[static_cast<size_t>(i)]) {
        check.fail(fmt::format("all_reduce f32: rank {} and rank 0 differ at {}", j, i));
        break;
      }
  std::vector<double> want(noisy.size());
  for (size_t i = 0; i < noisy.size(); ++i)
    for (int j = 0; j < n; ++j) want[i] += std::sin(0.37 * static_cast<double>(i) + j) * (1 + j);
  // The ring adds in another order than this loop: allow f32 rounding of terms up to (1 + r).
  check.expect(t, want, "all_reduce f32 of non-integer values", 1e-5 * n * n);
  pg.barrier()->wait(wait_limit());
  std::printf("rank %d: %d checks, %d wrong\n", r, check.checks(), check.failures());
  return check.failures() == 0 ? 0 : 1;
}

int run_kill_mid_allreduce(ProcessGroup& pg, int victim) {
  pg.barrier()->wait(wait_limit());
  // 64 MiB: long enough to be caught in flight.
  Tensor big = shared(pg, Tensor::full({16 << 20}, 1.0, DType::F32));
  auto work = pg.all_reduce(big, ReduceOp::Sum);
  if (pg.rank() == victim) {
    while (work->start_time() == Work::Clock::time_point{}) std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ::kill(::getpid(), SIGKILL);
  }
  try {
    work->wait(wait_limit());
    std::fprintf(stderr, "rank %d: the all_reduce completed although rank %d died\n", pg.rank(), victim);
    return 1;
  } catch (const Error& e) {
    std::string m = e.what();
    std::fprintf(stderr, "rank %d: %s\n", pg.rank(), m.c_str());
    return m.find(fmt::format("rank {} ", victim)) != std::string::npos ? 0 : 1;
  }
}

// Each op waits for its Work, so the error belongs to the first op that fails.
int run_desync(ProcessGroup& pg, const std::string& kind) {
  const bool odd = pg.rank() == 1;
  auto all_reduce = [&](int64_t count, DType d) {
    Tensor t = Tensor::full({count}, 1.0, d);
    pg.all_reduce(t, ReduceOp::Sum)->wait(wait_limit());
  };
  all_reduce(10, DType::F32);  // collective #0 matches everywhere
  if (kind == "count") {
    all_reduce(odd ? 99 : 100, DType::F32);
  } else if (kind == "skip") {
    if (!odd) all_reduce(100, DType::F32);
  } else if (kind == "dtype") {
    all_reduce(100, odd ? DType::I32 : DType::F32);
  } else if (kind == "root") {
    Tensor t = Tensor::full({100}, 1.0);
    pg.broadcast(t, odd ? 1 : 0)->wait(wait_limit());
  } else if (kind == "missing") {
    if (odd) {
      std::printf("rank %d: stops before the last all_reduce\n", pg.rank());
      return 0;
    }
  } else {
    std::fprintf(stderr, "comm_worker: unknown desync kind '%s'\n", kind.c_str());
    return 2;
  }
  all_reduce(1000, DType::F32);
  pg.barrier()->wait(wait_limit());
  std::printf("rank %d: no error\n", pg.rank());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fprintf(stderr, "usage: comm_worker collectives|rendezvous|kill_mid_allreduce ...\n");
    return 2;
  }
  try {
    std::string backend = "ring";
    Device device = Device::cpu();
    for (size_t i = 1; i + 1 < args.size(); ++i) {
      if (args[i] == "--backend") backend = args[i + 1];
      if (args[i] == "--device" && args[i + 1] == "cuda") device = Device::cuda(0);
    }
    RankInfo info = rank_info_from_env();
    if (device.is_cuda()) device = Device::cuda(info.local_rank % std::max(1, cuda::device_count()));
    ProcessGroupOptions options;
    if (const char* t = std::getenv("TANDEM_COMM_TIMEOUT_MS")) options.timeout = std::chrono::milliseconds(std::atoi(t));
    auto pg = init_process_group(backend, info, options);
    std::printf("rank %d: transport %s (pid %d), single copy %s, shared buffers %s\n", pg->rank(),
                pg->transport().c_str(), static_cast<int>(::getpid()), pg->single_copy().c_str(),
                pg->shared_buffers().c_str());
    std::fflush(stdout);
    if (args[0] == "collectives") return run_collectives(*pg, device);
    if (args[0] == "kill_mid_allreduce") return run_kill_mid_allreduce(*pg, std::stoi(args.at(1)));
    if (args[0] == "desync") return run_desync(*pg, args.at(1));
    if (args[0] == "rendezvous") {
      pg->barrier()->wait(wait_limit());
      std::printf("rank %d: rendezvous ok (%s)\n", pg->rank(), info.str().c_str());
      return 0;
    }
    std::fprintf(stderr, "comm_worker: unknown scenario '%s'\n", args[0].c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_worker: error: %s\n", e.what());
    return 2;
  }
}

// Intra-op parallelism for the CPU kernels: parallel_for over an index range.
//
// One process-wide pool. Its size is chosen once: TANDEM_NUM_THREADS, else
// OMP_NUM_THREADS (the variable PyTorch and BLAS users already set), else the
// cores this process may run on divided among the ranks of this machine
// (LOCAL_WORLD_SIZE from `tandem launch`/torchrun, OMPI_COMM_WORLD_LOCAL_SIZE
// under mpirun), at least 1. So two ranks on two cores get one thread each and
// never oversubscribe the machine.
//
// parallel_for(begin, end, grain, f) calls f(lo, hi) on disjoint sub-ranges
// that cover [begin, end), on the calling thread and the pool's workers, and
// returns when all are done. Ranges of fewer than `grain` indices are not
// split. The pool only decides who runs which range: a kernel that wants the
// same bits whatever the thread count makes each index's result independent of
// the range it is computed in (every kernel here does; see docs/kernels.md).
// A parallel_for inside another (or while another thread holds the pool) runs
// serially on its caller, so nesting and concurrent callers are safe.
// An exception thrown by f is rethrown on the caller (the first one).
#pragma once

#include <cstdint>
#include <string>

namespace tandem {

struct ThreadCountChoice {
  int threads = 1;
  std::string reason;  // which rule chose it, e.g. "TANDEM_NUM_THREADS=3" or "2 cores / LOCAL_WORLD_SIZE=2"
};

// The sizing rule as a pure function of the environment values (null when
// unset) and the core count; throws tandem::Error naming the variable when a
// set value is not a positive integer.
ThreadCountChoice choose_intra_op_threads(const char* tandem_num_threads, const char* omp_num_threads,
                                          const char* local_world_size, int cores);
// Cores this process may run on (its CPU affinity mask).
int available_cores();
// choose_intra_op_threads on this process's environment, evaluated once.
const ThreadCountChoice& intra_op_thread_choice();

// The pool's current size (1 = everything runs on the caller).
int intra_op_threads();
// Resizes the pool (tests and benchmarks); not while a parallel_for is running.
void set_intra_op_threads(int threads);

namespace detail {
// Runs task(ctx, i) for every i in [0, tasks), spread over the pool.
void run_parallel_tasks(int64_t tasks, void (*task)(void*, int64_t), void* ctx);
}  // namespace detail

template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t threads = intra_op_threads();
  if (threads <= 1 || n <= grain) {
    f(begin, end);
    return;
  }
  const int64_t most = (n + grain - 1) / grain;
  const int64_t tasks = most < threads ? most : threads;
  const int64_t chunk = (n + tasks - 1) / tasks;
  struct Ctx {
    const F* f;
    int64_t begin, end, chunk;
  } ctx{&f, begin, end, chunk};
  detail::run_parallel_tasks(
      tasks,
      [](void* p, int64_t i) {
        const Ctx& c = *static_cast<const Ctx*>(p);
        const int64_t lo = c.begin + i * c.chunk;
        const int64_t hi = lo + c.chunk < c.end ? lo + c.chunk : c.end;
        if (lo < hi) (*c.f)(lo, hi);
      },
      &ctx);
}

}  // namespace tandem

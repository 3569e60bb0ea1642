// The intra-op pool: workers spin briefly, then sleep on a condition variable,
// between parallel regions; the caller runs tasks too and waits for the rest.
#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/check.h"

namespace tandem {

namespace {

// A positive integer, or an error naming the variable. OMP_NUM_THREADS may be a
// list of per-nesting-level counts ("4,2"): its first entry is the outer level.
int positive_int(const char* name, const char* value, bool list_allowed) {
  std::string_view v(value);
  if (list_allowed) v = v.substr(0, v.find(','));
  int n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  TANDEM_CHECK(ec == std::errc() && end == v.data() + v.size() && n >= 1, "{}={}: expected a positive integer", name,
               value);
  return n;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spin iterations before a worker (or the waiting caller) goes to sleep: a few
// tens of microseconds, about the gap between two kernels of a training step,
// so back-to-back parallel regions do not pay a futex wake-up each.
constexpr int kSpin = 2000;

thread_local bool t_in_region = false;  // inside a task, or a pool worker: nested regions run serially

class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }

  // False when another thread holds the pool (the caller then runs serially).
  bool try_run(int64_t tasks, void (*task)(void*, int64_t), void* ctx) {
    std::unique_lock<std::mutex> region(region_m_, std::try_to_lock);
    if (!region.owns_lock()) return false;
    task_ = task;
    ctx_ = ctx;
    tasks_ = tasks;
    error_ = nullptr;
    next_.store(0, std::memory_order_relaxed);
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(m_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    drain();
    for (int i = 0; i < kSpin && pending_.load(std::memory_order_acquire) > 0; ++i) cpu_relax();
    if (pending_.load(std::memory_order_acquire) > 0) {
      std::unique_lock<std::mutex> lk(m_);
      done_.wait(lk, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void drain() {
    const bool outer = t_in_region;
    t_in_region = true;
    for (int64_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < tasks_;) {
      try {
        task_(ctx_, i);
      } catch (...) {
        std::lock_guard<std::mutex> lk(error_m_);
        if (!error_) error_ = std::current_exception();
      }
    }
    t_in_region = outer;
  }

  void worker_loop() {
    t_in_region = true;
    uint64_t seen = 0;
    for (;;) {
      for (int i = 0; i < kSpin && generation_.load(std::memory_order_acquire) == seen; ++i) cpu_relax();
      {
        std::unique_lock<std::mutex> lk(m_);
        wake_.wait(lk, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        seen = generation_.load(std::memory_order_acquire);
        if (stop_) return;
      }
      drain();
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lk(m_);
        done_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex region_m_;  // one parallel region at a time
  std::mutex m_;         // guards sleeping and waking
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
  int64_t tasks_ = 0;
  void (*task_)(void*, int64_t) = nullptr;
  void* ctx_ = nullptr;
  std::mutex error_m_;
  std::exception_ptr error_;
};

std::mutex g_pool_m;
std::unique_ptr<Pool> g_pool;
std::atomic<int> g_threads{0};  // 0: not chosen yet

Pool* pool() {
  std::lock_guard<std::mutex> lk(g_pool_m);
  if (!g_pool) g_pool = std::make_unique<Pool>(intra_op_threads());
  return g_pool.get();
}

}  // namespace

ThreadCountChoice choose_intra_op_threads(const char* tandem_num_threads, const char* omp_num_threads,
                                          const char* local_world_size, int cores) {
  if (tandem_num_threads && *tandem_num_threads) {
    const int n = positive_int("TANDEM_NUM_THREADS", tandem_num_threads, false);
    return {n, fmt::format("TANDEM_NUM_THREADS={}", n)};
  }
  if (omp_num_threads && *omp_num_threads) {
    const int n = positive_int("OMP_NUM_THREADS", omp_num_threads, true);
    return {n, fmt::format("OMP_NUM_THREADS={}", n)};
  }
  cores = std::max(cores, 1);
  if (local_world_size && *local_world_size) {
    const int ranks = positive_int("LOCAL_WORLD_SIZE", local_world_size, false);
    return {std::max(1, cores / ranks), fmt::format("{} cores / {} local ranks", cores, ranks)};
  }
  return {cores, fmt::format("{} cores", cores)};
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

const ThreadCountChoice& intra_op_thread_choice() {
  static const ThreadCountChoice choice = [] {
    const char* local = std::getenv("LOCAL_WORLD_SIZE");
    if (!local || !*local) local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    return choose_intra_op_threads(std::getenv("TANDEM_NUM_THREADS"), std::getenv("OMP_NUM_THREADS"), local,
                                   available_cores());
  }();
  return choice;
}

int intra_op_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = intra_op_thread_choice().threads;
    int expected = 0;
    if (!g_threads.compare_exchange_strong(expected, n)) n = expected;
  }
  return n;
}

void set_intra_op_threads(int threads) {
  TANDEM_CHECK(threads >= 1, "set_intra_op_threads: need at least 1 thread, got {}", threads);
  std::lock_guard<std::mutex> lk(g_pool_m);
  g_pool.reset();
  g_threads.store(threads, std::memory_order_relaxed);
}

namespace detail {

void run_parallel_tasks(int64_t tasks, void (*task)(void*, int64_t), void* ctx) {
  if (!t_in_region && tasks > 1 && pool()->try_run(tasks, task, ctx)) return;
  for (int64_t i = 0; i < tasks; ++i) task(ctx, i);
}

}  // namespace detail

}  // namespace tandem

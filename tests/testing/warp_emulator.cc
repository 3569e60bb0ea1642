#include "tests/testing/warp_emulator.h"

#include <ucontext.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define WARP_EMULATOR_ASAN 1
#endif

namespace warp_emulator {

namespace {

struct Barrier {
  int expected = 0;
  int arrived = 0;
  uint64_t generation = 0;
};

// One cp.async: 16 bytes to `dst`, the first `src_bytes` of them from `src`, the rest zero.
struct AsyncCopy {
  unsigned char* dst;
  const unsigned char* src;
  int src_bytes;
};

struct Fiber {
  ucontext_t context;
  std::unique_ptr<char[]> stack;
  Dim3 thread;
  bool done = false;
  void* asan_fake_stack = nullptr;
  std::vector<AsyncCopy> uncommitted;              // issued since the last commit_group
  std::deque<std::vector<AsyncCopy>> in_flight;   // committed groups, oldest first
};

constexpr size_t kStackBytes = 256 * 1024;

// The block being run on this thread.
struct Block {
  const std::function<void()>* kernel = nullptr;
  Dim3 shape;  // blockDim
  std::vector<Fiber> fibers;
  ucontext_t scheduler;
  int current = 0;
  uint64_t progress = 0;  // arrivals, completions and exits: unchanged for a whole round means deadlock
  Barrier block;
  std::vector<Barrier> warps;
  std::vector<float> float_slots;
  std::vector<uint32_t> word_slots;
  std::vector<const void*> row_slots;  // ldmatrix's row addresses, 32 per warp
  std::unique_ptr<unsigned char[], void (*)(unsigned char*)> shared{nullptr, [](unsigned char*) {}};
  size_t shared_bytes = 0;
  std::exception_ptr error;  // the first exception a kernel thread threw: ends the launch
  Schedule schedule = Schedule::RoundRobin;
  // AddressSanitizer must be told about every stack switch (the scheduler's stack bounds come from the first one).
  void* asan_scheduler_fake_stack = nullptr;
  const void* asan_scheduler_bottom = nullptr;
  size_t asan_scheduler_size = 0;
};

thread_local Block* running = nullptr;

Block& block() {
  if (!running) throw std::logic_error("warp_emulator: CUDA built-in used outside launch()");
  return *running;
}

// Switches from the current fiber back to the scheduler.
void yield() {
  Block& b = block();
  Fiber& f = b.fibers[static_cast<size_t>(b.current)];
#if WARP_EMULATOR_ASAN
  __sanitizer_start_switch_fiber(&f.asan_fake_stack, b.asan_scheduler_bottom, b.asan_scheduler_size);
#endif
  swapcontext(&f.context, &b.scheduler);
#if WARP_EMULATOR_ASAN
  __sanitizer_finish_switch_fiber(f.asan_fake_stack, nullptr, nullptr);
#endif
}

void wait(Barrier& barrier) {
  Block& b = block();
  ++b.progress;
  const uint64_t generation = barrier.generation;
  if (++barrier.arrived == barrier.expected) {
    barrier.arrived = 0;
    ++barrier.generation;
    return;
  }
  while (barrier.generation == generation) yield();
}

void fiber_main() {
  Block& b = block();
#if WARP_EMULATOR_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &b.asan_scheduler_bottom, &b.asan_scheduler_size);
#endif
  try {
    (*b.kernel)();
  } catch (...) {  // unwinding must stop on this fiber's stack; launch() rethrows it
    if (!b.error) b.error = std::current_exception();
  }
  b.fibers[static_cast<size_t>(b.current)].done = true;
  ++b.progress;
#if WARP_EMULATOR_ASAN
  __sanitizer_start_switch_fiber(nullptr, b.asan_scheduler_bottom, b.asan_scheduler_size);  // this fiber ends
#endif
  // Returning resumes uc_link: the scheduler.
}

// Out of line: getcontext returns twice as far as the compiler knows, which would put the caller's loop at risk.
[[gnu::noinline]] void make_fiber_context(Fiber& f, ucontext_t& scheduler) {
  ucontext_t* context = &f.context;
  getcontext(context);
  context->uc_stack.ss_sp = f.stack.get();
  context->uc_stack.ss_size = kStackBytes;
  context->uc_link = &scheduler;
  makecontext(context, fiber_main, 0);
}

void run_block(Block& b, unsigned bx, unsigned by, Dim3 grid) {
  const int threads = static_cast<int>(b.fibers.size());
  b.block = Barrier{threads, 0, 0};
  for (Barrier& w : b.warps) w = Barrier{32, 0, 0};
  for (int i = 0; i < threads; ++i) {
    Fiber& f = b.fibers[static_cast<size_t>(i)];
    f.thread = Dim3{static_cast<unsigned>(i) % b.shape.x, static_cast<unsigned>(i) / b.shape.x, 0};
    f.done = false;
    f.uncommitted.clear();  // copies still in flight when a thread exits land nowhere visible
    f.in_flight.clear();
    make_fiber_context(f, b.scheduler);
  }
  // Runs fiber i until it yields or ends.
  const auto resume = [&](int i) {
    Fiber& f = b.fibers[static_cast<size_t>(i)];
    b.current = i;
    threadIdx = f.thread;
    blockIdx = Dim3{bx, by, 0};
    blockDim = b.shape;
    gridDim = grid;
#if WARP_EMULATOR_ASAN
    __sanitizer_start_switch_fiber(&b.asan_scheduler_fake_stack, f.stack.get(), kStackBytes);
#endif
    swapcontext(&b.scheduler, &f.context);
#if WARP_EMULATOR_ASAN
    __sanitizer_finish_switch_fiber(b.asan_scheduler_fake_stack, nullptr, nullptr);
#endif
    if (b.error) std::rethrow_exception(std::exchange(b.error, nullptr));
  };
  const auto done = [&](int i) { return b.fibers[static_cast<size_t>(i)].done; };
  const int warps = threads / 32;
  int alive = threads;
  while (alive > 0) {
    const uint64_t before = b.progress;
    if (b.schedule == Schedule::RoundRobin) {
      for (int i = 0; i < threads; ++i)
        if (!done(i)) resume(i);
    } else {
      // Each warp in turn until none of its threads can move without another warp: they all wait at
      // __syncthreads or have ended (a pass over the warp without progress).
      for (int k = 0; k < warps; ++k) {
        const int w = b.schedule == Schedule::WarpByWarp ? k : warps - 1 - k;
        uint64_t pass;
        do {
          pass = b.progress;
          for (int i = 32 * w; i < 32 * w + 32; ++i)
            if (!done(i)) resume(i);
        } while (b.progress != pass);
      }
    }
    alive = static_cast<int>(std::count_if(b.fibers.begin(), b.fibers.end(), [](const Fiber& f) { return !f.done; }));
    if (alive > 0 && b.progress == before)
      throw std::runtime_error("warp_emulator: deadlock in block (" + std::to_string(bx) + ", " + std::to_string(by) +
                               "): threads wait at barriers that can never complete");
  }
}

}  // namespace

void launch(unsigned grid_x, unsigned grid_y, int threads, size_t shared_bytes, const std::function<void()>& kernel,
            Schedule schedule) {
  if (threads <= 0) throw std::invalid_argument("warp_emulator: threads must be a multiple of 32");
  launch(grid_x, grid_y, Dim3{static_cast<unsigned>(threads), 1, 1}, shared_bytes, kernel, schedule);
}

void launch(unsigned grid_x, unsigned grid_y, Dim3 shape, size_t shared_bytes, const std::function<void()>& kernel,
            Schedule schedule) {
  const int threads = static_cast<int>(shape.x * shape.y);
  if (shape.z != 1 || threads <= 0 || threads % 32 != 0)
    throw std::invalid_argument("warp_emulator: a block is x * y threads (z = 1), a multiple of 32");
  Block b;
  b.shape = shape;
  b.kernel = &kernel;
  b.schedule = schedule;
  b.fibers.resize(static_cast<size_t>(threads));
  for (Fiber& f : b.fibers) f.stack = std::make_unique<char[]>(kStackBytes);
  b.warps.resize(static_cast<size_t>(threads / 32));
  b.float_slots.assign(static_cast<size_t>(threads), 0.0f);
  b.word_slots.assign(static_cast<size_t>(threads) * 6, 0u);
  b.row_slots.assign(static_cast<size_t>(threads), nullptr);
  b.shared_bytes = shared_bytes;
  struct Reset {
    ~Reset() { running = nullptr; }
  } reset;
  running = &b;
  const Dim3 grid{grid_x, grid_y, 1};
  for (unsigned by = 0; by < grid_y; ++by)
    for (unsigned bx = 0; bx < grid_x; ++bx) {
      b.shared = {new (std::align_val_t(16)) unsigned char[shared_bytes > 0 ? shared_bytes : 1],
                  [](unsigned char* p) { ::operator delete[](p, std::align_val_t(16)); }};
      std::fill(b.shared.get(), b.shared.get() + shared_bytes, static_cast<unsigned char>(0xff));
      run_block(b, bx, by, grid);
    }
}

unsigned char* shared_memory() { return block().shared.get(); }

void block_barrier() { wait(block().block); }

void warp_barrier() {
  Block& b = block();
  wait(b.warps[static_cast<size_t>(b.current / 32)]);
}

float* warp_float_slots() {
  Block& b = block();
  return b.float_slots.data() + (b.current / 32) * 32;
}

uint32_t* warp_word_slots() {
  Block& b = block();
  return b.word_slots.data() + (b.current / 32) * 32 * 6;
}

namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// A 16-byte row of the block's shared memory, or an error naming the instruction.
void check_shared_row(const Block& b, const void* p, const char* instruction) {
  const auto* q = static_cast<const unsigned char*>(p);
  const unsigned char* base = b.shared.get();
  if (q < base || q + 16 > base + b.shared_bytes || !aligned16(q))
    throw std::logic_error(std::string("warp_emulator: ") + instruction + " address " +
                           std::to_string(reinterpret_cast<uintptr_t>(p)) + " is not a 16-byte aligned row of the " +
                           std::to_string(b.shared_bytes) + " bytes of shared memory (thread " +
                           std::to_string(b.current) + ")");
}

}  // namespace

void cp_async(void* shared_dst, const void* global_src, int src_bytes) {
  Block& b = block();
  check_shared_row(b, shared_dst, "cp.async destination");
  if (!aligned16(global_src) || src_bytes < 0 || src_bytes > 16)
    throw std::logic_error("warp_emulator: cp.async needs a 16-byte aligned source and 0 <= src-size <= 16 (thread " +
                           std::to_string(b.current) + ", src-size " + std::to_string(src_bytes) + ")");
  auto* dst = static_cast<unsigned char*>(shared_dst);
  std::memset(dst, 0xff, 16);  // undefined until the copy's group completes
  b.fibers[static_cast<size_t>(b.current)].uncommitted.push_back(
      {dst, static_cast<const unsigned char*>(global_src), src_bytes});
}

void cp_async_commit_group() {
  Fiber& f = block().fibers[static_cast<size_t>(block().current)];
  f.in_flight.push_back(std::move(f.uncommitted));  // possibly empty, as in PTX
  f.uncommitted.clear();
}

void cp_async_wait_group(int pending) {
  Fiber& f = block().fibers[static_cast<size_t>(block().current)];
  while (f.in_flight.size() > static_cast<size_t>(pending)) {
    for (const AsyncCopy& c : f.in_flight.front()) {
      std::memcpy(c.dst, c.src, static_cast<size_t>(c.src_bytes));
      std::memset(c.dst + c.src_bytes, 0, static_cast<size_t>(16 - c.src_bytes));
    }
    f.in_flight.pop_front();
  }
}

void ldmatrix(int matrices, bool trans, uint32_t* regs, const void* row) {
  Block& b = block();
  const int lane = b.current % 32;
  const void** rows = b.row_slots.data() + (b.current / 32) * 32;
  rows[lane] = row;
  warp_barrier();
  for (int l = 0; l < 8 * matrices; ++l) check_shared_row(b, rows[l], "ldmatrix row");  // lanes past them: unused
  // Element (r, c) of matrix i: the c-th 16-bit value of the row lane 8i + r points to.
  auto element = [&](int i, int r, int c) {
    uint16_t v;
    std::memcpy(&v, static_cast<const unsigned char*>(rows[8 * i + r]) + 2 * c, sizeof v);
    return static_cast<uint32_t>(v);
  };
  const int g = lane / 4, w = lane % 4;
  for (int i = 0; i < matrices; ++i)
    regs[i] = trans ? element(i, 2 * w, g) | element(i, 2 * w + 1, g) << 16
                    : element(i, g, 2 * w) | element(i, g, 2 * w + 1) << 16;
  warp_barrier();  // every lane has read before the slots are reused
}

}  // namespace warp_emulator

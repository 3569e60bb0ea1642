#include "tests/testing/warp_emulator.h"

#include <ucontext.h>

#include <algorithm>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
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

struct Fiber {
  ucontext_t context;
  std::unique_ptr<char[]> stack;
  Dim3 thread;
  bool done = false;
  void* asan_fake_stack = nullptr;
};

constexpr size_t kStackBytes = 256 * 1024;

// The block being run on this thread.
struct Block {
  const std::function<void()>* kernel = nullptr;
  std::vector<Fiber> fibers;
  ucontext_t scheduler;
  int current = 0;
  uint64_t progress = 0;  // arrivals, completions and exits: unchanged for a whole round means deadlock
  Barrier block;
  std::vector<Barrier> warps;
  std::vector<float> float_slots;
  std::vector<uint32_t> word_slots;
  std::unique_ptr<unsigned char[], void (*)(unsigned char*)> shared{nullptr, [](unsigned char*) {}};
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
  (*b.kernel)();
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

void run_block(Block& b, unsigned bx, unsigned by) {
  const int threads = static_cast<int>(b.fibers.size());
  b.block = Barrier{threads, 0, 0};
  for (Barrier& w : b.warps) w = Barrier{32, 0, 0};
  for (int i = 0; i < threads; ++i) {
    Fiber& f = b.fibers[static_cast<size_t>(i)];
    f.thread = Dim3{static_cast<unsigned>(i), 0, 0};
    f.done = false;
    make_fiber_context(f, b.scheduler);
  }
  int alive = threads;
  while (alive > 0) {
    const uint64_t before = b.progress;
    alive = 0;
    for (int i = 0; i < threads; ++i) {
      Fiber& f = b.fibers[static_cast<size_t>(i)];
      if (f.done) continue;
      b.current = i;
      threadIdx = f.thread;
      blockIdx = Dim3{bx, by, 0};
#if WARP_EMULATOR_ASAN
      __sanitizer_start_switch_fiber(&b.asan_scheduler_fake_stack, f.stack.get(), kStackBytes);
#endif
      swapcontext(&b.scheduler, &f.context);
#if WARP_EMULATOR_ASAN
      __sanitizer_finish_switch_fiber(b.asan_scheduler_fake_stack, nullptr, nullptr);
#endif
      if (!f.done) ++alive;
    }
    if (alive > 0 && b.progress == before)
      throw std::runtime_error("warp_emulator: deadlock in block (" + std::to_string(bx) + ", " + std::to_string(by) +
                               "): threads wait at barriers that can never complete");
  }
}

}  // namespace

void launch(unsigned grid_x, unsigned grid_y, int threads, size_t shared_bytes, const std::function<void()>& kernel) {
  if (threads <= 0 || threads % 32 != 0) throw std::invalid_argument("warp_emulator: threads must be a multiple of 32");
  Block b;
  b.kernel = &kernel;
  b.fibers.resize(static_cast<size_t>(threads));
  for (Fiber& f : b.fibers) f.stack = std::make_unique<char[]>(kStackBytes);
  b.warps.resize(static_cast<size_t>(threads / 32));
  b.float_slots.assign(static_cast<size_t>(threads), 0.0f);
  b.word_slots.assign(static_cast<size_t>(threads) * 6, 0u);
  struct Reset {
    ~Reset() { running = nullptr; }
  } reset;
  running = &b;
  for (unsigned by = 0; by < grid_y; ++by)
    for (unsigned bx = 0; bx < grid_x; ++bx) {
      b.shared = {new (std::align_val_t(16)) unsigned char[shared_bytes > 0 ? shared_bytes : 1],
                  [](unsigned char* p) { ::operator delete[](p, std::align_val_t(16)); }};
      std::fill(b.shared.get(), b.shared.get() + shared_bytes, static_cast<unsigned char>(0xff));
      run_block(b, bx, by);
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

}  // namespace warp_emulator

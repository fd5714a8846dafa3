// The scheduler of the CUDA kernel emulator (emu.h): a block's threads as fibers, barriers,
// warp exchanges and the checks that fail a launch.
//
// Fibers are Boost.Context's (Debian's libboost-context-dev, linked statically), each on a
// stack of its own mapped with a guard page below it, so an overflow faults instead of writing
// over a neighbour. A switch is a few instructions (glibc's swapcontext makes a system call each
// time, which made the emulated tiled kernels' test thirty times slower). Under AddressSanitizer
// every switch is announced (__sanitizer_start_switch_fiber / _finish_; Boost 1.74 does so only
// for its ucontext fibers), so ASan follows the stacks and checks the emulated kernels' memory
// accesses like any host code's. A fiber a failed launch leaves waiting is never resumed again,
// not even to unwind it (the switch would be one ASan is not told of): it is set aside.
#include "emu.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define SAOBP_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SAOBP_EMU_ASAN 1
#endif
#endif
#ifdef SAOBP_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#include <boost/context/fiber.hpp>
#include <boost/context/preallocated.hpp>
#include <boost/context/stack_context.hpp>

namespace saobp::cuda {

namespace {
cudaError_t g_last = cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return g_last; }
namespace emu {
cudaError_t set_last_error(cudaError_t e) {
  if (e != cudaSuccess) g_last = e;
  return e;
}
}  // namespace emu
namespace {
// The codes the emulator gives: cudaGetErrorName's and cudaGetErrorString's answers.
struct ErrorText {
  cudaError_t code;
  const char *name, *text;
};
constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
};
const ErrorText* error_text(cudaError_t e) {
  for (const ErrorText& t : kErrors)
    if (t.code == e) return &t;
  return nullptr;
}
}  // namespace

const char* cudaGetErrorString(cudaError_t e) {
  const ErrorText* t = error_text(e);
  return t ? t->text : "unknown error";
}
const char* cudaGetErrorName(cudaError_t e) {
  const ErrorText* t = error_text(e);
  return t ? t->name : "cudaErrorUnknown";
}

namespace emu {

namespace {

constexpr int kWarp = 32;
constexpr int kMaxThreads = 1024;
#ifdef SAOBP_EMU_ASAN
constexpr size_t kStack = size_t{512} << 10;  // ASan's redzones make frames several times larger
#else
constexpr size_t kStack = size_t{128} << 10;
#endif

struct Barrier {
  int arrived = 0;
};

namespace bc = boost::context;

struct Fiber {
  bc::fiber self;  // resumes it (while it is suspended)
  uint3 tid;
  int linear = 0;
  enum State { ready, waiting, done } state = ready;
  const Barrier* wait_on = nullptr;
  int parity = 0;  // which of its warp's two slot rows this lane's next exchange uses
  char* stack = nullptr;
  void* fake_stack = nullptr;  // ASan's, across a switch
};

struct Warp {
  Barrier bar;
  int lanes = 0;  // threads of the block in this warp (32 but in a block's last, partial warp)
  uint64_t slot[2][kWarp] = {};
};

// A stack a fiber, reused launch to launch: PROT_NONE guard page, then kStack usable bytes.
struct Stacks {
  std::vector<char*> base;
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  char* get(size_t i) {
    while (base.size() <= i) {
      void* p = mmap(nullptr, kStack + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::runtime_error("cuda emulator: cannot map a fiber stack");
      mprotect(p, page, PROT_NONE);
      base.push_back(static_cast<char*>(p) + page);
    }
    return base[i];
  }
};

// The state of the launch in progress (one at a time: launch() holds the mutex).
struct State {
  std::mutex mutex;
  Stacks stacks;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Barrier block_bar;
  int live = 0;
  Fiber* cur = nullptr;
  bc::fiber scheduler;        // resumes the scheduler (while a fiber runs)
  void* main_fake = nullptr;  // ASan: the scheduler's fake stack and its stack's bounds
  const void* main_bottom = nullptr;
  size_t main_size = 0;
  const std::function<void()>* body = nullptr;
  uint3 block_idx;
  dim3 block_dim, grid_dim;
  Order order = Order::forward;
  std::string failure, last_failure;
};
State& st() {
  static State s;
  return s;
}

// The fibers failed launches left waiting: never resumed nor destroyed (destroying one resumes
// it to unwind its stack, which another fiber may use by then). A global pointer, so neither the
// exit's destructors nor LeakSanitizer see them.
std::vector<bc::fiber>* g_set_aside = nullptr;

// Ends the launch's fibers, setting aside the waiting ones.
void retire_fibers() {
  State& s = st();
  for (Fiber& f : s.fibers)
    if (f.self) {
      if (!g_set_aside) g_set_aside = new std::vector<bc::fiber>;
      g_set_aside->push_back(std::move(f.self));
    }
  s.fibers.clear();
}

// ASan's side of a switch to the stack [bottom, bottom + size), from a fiber that continues
// later (fake: where ASan keeps its fake stack) or ends (fake nullptr); then, back on a stack,
// the end of the switch that came here (the bounds of the stack that was left, where asked).
void asan_leave([[maybe_unused]] void** fake, [[maybe_unused]] const void* bottom,
                [[maybe_unused]] size_t size) {
#ifdef SAOBP_EMU_ASAN
  __sanitizer_start_switch_fiber(fake, bottom, size);
#endif
}
void asan_arrive([[maybe_unused]] void* fake, [[maybe_unused]] const void** from_bottom,
                 [[maybe_unused]] size_t* from_size) {
#ifdef SAOBP_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, from_bottom, from_size);
#endif
}

// Back to the scheduler, from the running fiber; it continues here when resumed.
void to_scheduler() {
  State& s = st();
  Fiber* f = s.cur;
  asan_leave(&f->fake_stack, s.main_bottom, s.main_size);
  s.scheduler = std::move(s.scheduler).resume();
  asan_arrive(f->fake_stack, &s.main_bottom, &s.main_size);
}

// The scheduler resumes fiber f until it waits or returns.
void resume(Fiber& f) {
  State& s = st();
  s.cur = &f;
  asan_leave(&s.main_fake, f.stack, kStack);
  f.self = std::move(f.self).resume();
  asan_arrive(s.main_fake, nullptr, nullptr);
  s.cur = nullptr;
}

// A stack allocator for bc::fiber that owns nothing: the fibers run on Stacks' stacks.
struct Borrowed {
  bc::stack_context allocate() { throw std::logic_error("cuda emulator: fibers run on borrowed stacks"); }
  void deallocate(bc::stack_context&) noexcept {}
};

void fail(const std::string& why) {
  State& s = st();
  if (s.failure.empty()) s.failure = why;
}

std::string where(const Fiber& f) {
  const State& s = st();
  return "block (" + std::to_string(s.block_idx.x) + "," + std::to_string(s.block_idx.y) + "," +
         std::to_string(s.block_idx.z) + ") thread (" + std::to_string(f.tid.x) + "," +
         std::to_string(f.tid.y) + "," + std::to_string(f.tid.z) + ")";
}

void release(const Barrier& b) {
  for (Fiber& f : st().fibers)
    if (f.state == Fiber::waiting && f.wait_on == &b) f.state = Fiber::ready, f.wait_on = nullptr;
}

// The running fiber arrives at b, of which `needed` arrivals open it: the last one goes on,
// the others wait for it. After a failure, a fiber that would wait is left waiting for good.
void arrive(Barrier& b, int needed) {
  State& s = st();
  if (++b.arrived >= needed) {
    b.arrived = 0;
    release(b);
    return;
  }
  s.cur->state = Fiber::waiting;
  s.cur->wait_on = &b;
  to_scheduler();
}

// A thread: the kernel's body, then its exit (a returned thread leaves the block's barrier).
bc::fiber fiber_main(bc::fiber&& scheduler) {
  State& s = st();
  asan_arrive(nullptr, &s.main_bottom, &s.main_size);
  s.scheduler = std::move(scheduler);
  (*s.body)();
  Fiber& f = *s.cur;
  f.state = Fiber::done;
  --s.live;
  const Warp& w = s.warps[static_cast<size_t>(f.linear / kWarp)];
  if (w.bar.arrived > 0)
    fail(where(f) + " returned while lanes of its warp wait in a shuffle or vote for it");
  if (s.block_bar.arrived > 0 && s.block_bar.arrived >= s.live) {  // the returned no longer count
    s.block_bar.arrived = 0;
    release(s.block_bar);
  }
  asan_leave(nullptr, s.main_bottom, s.main_size);  // this fiber's stack is done with
  return std::move(s.scheduler);
}

// Runs the block at s.block_idx; false (with s.failure) when it cannot finish.
bool run_block() {
  State& s = st();
  const int n = static_cast<int>(s.block_dim.x * s.block_dim.y * s.block_dim.z);
  retire_fibers();
  s.fibers.resize(static_cast<size_t>(n));
  s.warps.assign(static_cast<size_t>((n + kWarp - 1) / kWarp), Warp{});
  for (size_t w = 0; w < s.warps.size(); ++w)
    s.warps[w].lanes = std::min(kWarp, n - static_cast<int>(w) * kWarp);
  s.block_bar = Barrier{};
  s.live = n;
  for (int i = 0; i < n; ++i) {
    Fiber& f = s.fibers[static_cast<size_t>(i)];
    const unsigned x = s.block_dim.x, xy = s.block_dim.x * s.block_dim.y, u = static_cast<unsigned>(i);
    f.tid = {u % x, u % xy / x, u / xy};
    f.linear = i;
    f.stack = s.stacks.get(static_cast<size_t>(i));
#ifdef SAOBP_EMU_ASAN
    // The frames of the stack's last fiber (those that never returned, such as Boost's entry
    // frame, or all of a set-aside fiber's) left their redzones poisoned.
    __asan_unpoison_memory_region(f.stack, kStack);
#endif
    bc::stack_context sc;
    sc.size = kStack;
    sc.sp = f.stack + kStack;  // the top: stacks grow down
    f.self = bc::fiber(std::allocator_arg, bc::preallocated(sc.sp, sc.size, sc), Borrowed{}, fiber_main);
  }
  for (int done = 0; done < n;) {
    bool progressed = false;
    for (int k = 0; k < n; ++k) {
      Fiber& f = s.fibers[static_cast<size_t>(s.order == Order::forward ? k : n - 1 - k)];
      if (f.state != Fiber::ready) continue;
      resume(f);
      progressed = true;
      if (f.state == Fiber::done) ++done;
      if (!s.failure.empty()) return false;
    }
    if (done < n && !progressed) {
      int at_block = 0, at_warp = 0;
      const Fiber* first = nullptr;
      for (const Fiber& f : s.fibers) {
        if (f.state != Fiber::waiting) continue;
        (f.wait_on == &s.block_bar ? at_block : at_warp)++;
        if (!first) first = &f;
      }
      fail("deadlock: " + std::to_string(at_block) + " threads wait at __syncthreads and " +
           std::to_string(at_warp) +
           " in warp shuffles or votes that no other thread will reach (first: " + where(*first) + ")");
      return false;
    }
  }
  return true;
}

}  // namespace

const uint3& thread_idx() { return st().cur->tid; }
const uint3& block_idx() { return st().block_idx; }
const dim3& block_dim() { return st().block_dim; }
const dim3& grid_dim() { return st().grid_dim; }
int lane() { return st().cur->linear % kWarp; }

void syncthreads() {
  State& s = st();
  arrive(s.block_bar, s.live);
}

namespace {
// The running lane's warp, after checking that `mask` names exactly its lanes, all live.
Warp& warp_for(unsigned mask) {
  State& s = st();
  Fiber& f = *s.cur;
  Warp& w = s.warps[static_cast<size_t>(f.linear / kWarp)];
  const unsigned all = w.lanes == kWarp ? 0xffffffffu : (1u << w.lanes) - 1u;
  if (mask != all)
    fail(where(f) + ": a shuffle or vote with mask " + std::to_string(mask) +
         "; the emulator takes the warp's full mask only");
  const int first = f.linear / kWarp * kWarp;
  for (int l = 0; l < w.lanes; ++l)
    if (s.fibers[static_cast<size_t>(first + l)].state == Fiber::done)
      fail(where(f) + ": a shuffle or vote names lane " + std::to_string(l) + ", which has returned");
  return w;
}
}  // namespace

uint64_t warp_exchange(unsigned mask, uint64_t bits, int src) {
  State& s = st();
  Fiber& f = *s.cur;
  Warp& w = warp_for(mask);
  const int l = f.linear % kWarp, p = f.parity;
  w.slot[p][l] = bits;
  arrive(w.bar, w.lanes);
  f.parity ^= 1;
  return src >= 0 && src < w.lanes ? w.slot[p][src] : bits;
}

bool warp_any(unsigned mask, bool pred) {
  State& s = st();
  Fiber& f = *s.cur;
  Warp& w = warp_for(mask);
  const int p = f.parity;
  w.slot[p][f.linear % kWarp] = pred ? 1 : 0;
  arrive(w.bar, w.lanes);
  f.parity ^= 1;
  bool any = false;
  for (int l = 0; l < w.lanes; ++l) any = any || w.slot[p][l] != 0;
  return any;
}

void launch(dim3 grid, dim3 block, size_t shared_bytes, const std::function<void()>& body) {
  State& s = st();
  const std::lock_guard<std::mutex> lock(s.mutex);
  s.failure.clear();
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > kMaxThreads || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535 || shared_bytes > (size_t{227} << 10)) {
    s.last_failure = "invalid launch configuration: grid (" + std::to_string(grid.x) + "," +
                     std::to_string(grid.y) + "," + std::to_string(grid.z) + "), block (" +
                     std::to_string(block.x) + "," + std::to_string(block.y) + "," + std::to_string(block.z) +
                     "), " + std::to_string(shared_bytes) + " bytes of dynamic shared memory";
    g_last = cudaErrorInvalidConfiguration;
    return;
  }
  s.body = &body;
  s.block_dim = block;
  s.grid_dim = grid;
  bool ok = true;
  for (unsigned z = 0; ok && z < grid.z; ++z)
    for (unsigned y = 0; ok && y < grid.y; ++y)
      for (unsigned x = 0; ok && x < grid.x; ++x) {
        s.block_idx = {x, y, z};
        ok = run_block();
      }
  s.body = nullptr;
  retire_fibers();
  s.last_failure = s.failure;
  if (!ok) g_last = cudaErrorLaunchFailure;
}

void set_order(Order o) { st().order = o; }
std::string last_failure() { return st().last_failure; }

}  // namespace emu
}  // namespace saobp::cuda

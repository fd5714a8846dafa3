// The CUDA device runtime behind saobp::cuda: device queries, copies, synchronization, the count
// of the host's waits and the kernel profiler. Memory comes from allocator.cpp. Every kernel and
// copy runs on the legacy default stream, so they execute in issue order and a copy to the host
// waits for the kernels before it.
//
// Copies to the device do not wait: a copy from pageable memory would (cudaMemcpy first waits
// for all the work queued before it, and the host could not run ahead to queue the next
// micro-batch's kernels). The bytes go through a ring of pinned staging buffers instead, copied
// there on the host, then by cudaMemcpyAsync; a buffer is used again once the event recorded
// after its copy has passed, which it has long done in a training step (the ring holds 32).
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tensor/cuda/common.h"

namespace saobp::cuda {

namespace {

std::atomic<uint64_t> waits{0};
std::atomic<int64_t> wait_ns{0};

// One wait of the host for the GPU: counted, and its time added up (host_wait_seconds).
class Wait {
 public:
  Wait() { ++waits; }
  ~Wait() {
    wait_ns +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
  }
  Wait(const Wait&) = delete;
  Wait& operator=(const Wait&) = delete;

 private:
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

constexpr size_t kStages = 32, kStageMax = size_t{16} << 20;  // larger copies wait (model loads)

struct Stage {
  void* host = nullptr;
  size_t capacity = 0;
  cudaEvent_t done = nullptr;
  bool in_flight = false;
};

class StagingRing {
 public:
  // Copies n bytes to dst on the current device `device` without waiting for the GPU.
  void copy(void* dst, const void* src, size_t n, int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Stage>& ring = rings_[device];
    if (ring.empty()) ring.resize(kStages);
    size_t& next = next_[device];
    Stage& s = ring[next];
    next = (next + 1) % kStages;
    if (s.in_flight) {
      const cudaError_t q = cudaEventQuery(s.done);
      if (q == cudaErrorNotReady) {
        Wait w;
        check(cudaEventSynchronize(s.done), "cuda.memcpy");
      } else {
        check(q, "cuda.memcpy");
      }
    }
    if (s.capacity < n) {
      if (s.host) check(cudaFreeHost(s.host), "cuda.memcpy");
      s.host = nullptr;
      s.capacity = std::max<size_t>(n, size_t{64} << 10);
      check(cudaHostAlloc(&s.host, s.capacity, cudaHostAllocDefault), "cuda.memcpy");
    }
    if (!s.done) check(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming), "cuda.memcpy");
    std::memcpy(s.host, src, n);
    check(cudaMemcpyAsync(dst, s.host, n, cudaMemcpyHostToDevice, cudaStreamLegacy), "cuda.memcpy");
    check(cudaEventRecord(s.done, cudaStreamLegacy), "cuda.memcpy");
    s.in_flight = true;
  }

 private:
  std::mutex mutex_;
  std::map<int, std::vector<Stage>> rings_;
  std::map<int, size_t> next_;
};

// Never destroyed: the CUDA runtime may be gone during static destruction.
StagingRing& staging() {
  static StagingRing* r = new StagingRing;
  return *r;
}

// ---- the profiler: a start and a stop event around each timed kernel call ---------------------
struct Timed {
  std::string op;
  bool detail;
  double flops;
  cudaEvent_t start, stop;
};
class Profiler {
 public:
  std::atomic<bool> on{false};

  size_t begin(std::string op, bool detail = false, double flops = 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    Timed t{std::move(op), detail, flops, event(), event()};
    check(cudaEventRecord(t.start, cudaStreamLegacy), "profile");
    calls_.push_back(t);
    return calls_.size() - 1;
  }
  void end(size_t slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (slot < calls_.size()) check(cudaEventRecord(calls_[slot].stop, cudaStreamLegacy), "profile");
  }
  std::vector<OpTime> report() {
    std::lock_guard<std::mutex> lock(mutex_);
    check(cudaDeviceSynchronize(), "profile");
    std::map<std::pair<bool, std::string>, OpTime> by_op;
    for (const Timed& t : calls_) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, t.start, t.stop), "profile");
      OpTime& o = by_op[{t.detail, t.op}];
      o.op = t.op, o.detail = t.detail, ++o.calls, o.ms += ms, o.flops += t.flops;
      free_.push_back(t.start), free_.push_back(t.stop);
    }
    calls_.clear();
    std::vector<OpTime> out;
    for (auto& [name, o] : by_op) out.push_back(o);
    std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
    return out;
  }

 private:
  cudaEvent_t event() {
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "profile");
    return e;
  }
  std::mutex mutex_;
  std::vector<Timed> calls_;
  std::vector<cudaEvent_t> free_;
};
Profiler& profiler() {
  static Profiler* p = new Profiler;
  return *p;
}

}  // namespace

bool built() { return true; }

bool available() {
  static const bool present = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // no driver or no device: clear the error, report "not available"
      return false;
    }
    return n > 0;
  }();
  return present;
}

void use_device(int index, const char* op) { check(cudaSetDevice(index), op); }

int device_count() {
  if (!available()) return 0;
  int n = 0;
  check(cudaGetDeviceCount(&n), "cuda.device_count");
  return n;
}

std::string device_name(int index) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), "cuda.device_name");
  return prop.name;
}

DeviceProperties device_properties(int index) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), "cuda.device_properties");
  DeviceProperties d;
  d.name = prop.name;
  d.total_bytes = prop.totalGlobalMem;
  d.major = prop.major, d.minor = prop.minor;
  d.multiprocessors = prop.multiProcessorCount;
  use_device(index, "cuda.device_properties");
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cuda.device_properties");
  d.free_bytes = free;
  check(cudaDriverGetVersion(&d.driver_version), "cuda.device_properties");
  check(cudaRuntimeGetVersion(&d.runtime_version), "cuda.device_properties");
  return d;
}

void memcpy_to_device(void* dst, const void* src, size_t nbytes, int index) {
  use_device(index, "cuda.memcpy");
  if (nbytes == 0) return;
  if (nbytes <= kStageMax) return staging().copy(dst, src, nbytes, index);
  Wait w;
  check(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice), "cuda.memcpy");
}

void memcpy_to_host(void* dst, const void* src, size_t nbytes, int index) {
  use_device(index, "cuda.memcpy");
  {
    Wait w;
    check(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost), "cuda.memcpy");
  }
  check_deferred_indices(index);
}

void memcpy_device(void* dst, const void* src, size_t nbytes, int index) {
  use_device(index, "cuda.memcpy");
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, cudaStreamLegacy), "cuda.memcpy");
}

void synchronize(int index) {
  use_device(index, "cuda.synchronize");
  {
    Wait w;
    check(cudaDeviceSynchronize(), "cuda.synchronize");
  }
  check_deferred_indices(index);
}

uint64_t host_waits() { return waits.load(); }
double host_wait_seconds() { return 1e-9 * static_cast<double>(wait_ns.load()); }

bool profiling() { return profiler().on.load(std::memory_order_relaxed); }
void set_profiling(bool on) {
  if (on) profile_report();  // start from nothing
  profiler().on = on;
}
std::vector<OpTime> profile_report() { return available() ? profiler().report() : std::vector<OpTime>{}; }
EventTimer::EventTimer(int index) : index_(index) {
  use_device(index, "cuda.timer");
  cudaEvent_t a = nullptr, b = nullptr;
  check(cudaEventCreate(&a), "cuda.timer");
  check(cudaEventCreate(&b), "cuda.timer");
  start_ = a, stop_ = b;
}
EventTimer::~EventTimer() {
  cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}
void EventTimer::start() {
  use_device(index_, "cuda.timer");
  check(cudaEventRecord(static_cast<cudaEvent_t>(start_), cudaStreamLegacy), "cuda.timer");
}
void EventTimer::stop() {
  use_device(index_, "cuda.timer");
  check(cudaEventRecord(static_cast<cudaEvent_t>(stop_), cudaStreamLegacy), "cuda.timer");
}
double EventTimer::seconds() {
  {
    Wait w;
    check(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)), "cuda.timer");
  }
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)),
        "cuda.timer");
  return 1e-3 * ms;
}

size_t OpTimer::begin(const char* op) { return profiler().begin(op); }
void OpTimer::end(size_t slot) { profiler().end(slot); }
size_t DetailTimer::begin(const std::string& label, double flops) {
  return profiler().begin(label, true, flops);
}
void DetailTimer::end(size_t slot) { profiler().end(slot); }

}  // namespace saobp::cuda

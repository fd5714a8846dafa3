// What the build and the machine offer: whether the CUDA backend is compiled in and which GPUs
// it sees (`saobp info`, the tests' device list). Defined by src/tensor/cuda/runtime.cpp, or in a
// CPU-only build by src/tensor/no_cuda/runtime.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace saobp::cuda {
bool available();    // built with CUDA and a device is present
bool built();        // built with CUDA (whether or not a device is present)
int device_count();  // the GPUs the CUDA runtime sees; 0 without CUDA, a driver or a device
std::string device_name(int index);

// What `saobp info` and the out-of-memory errors report of GPU `index`.
struct DeviceProperties {
  std::string name;
  size_t total_bytes = 0, free_bytes = 0;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  int driver_version = 0, runtime_version = 0;  // CUDA's encoding: 1000 major + 10 minor
};
DeviceProperties device_properties(int index);
// The most bytes this process's tensors held on GPU `index` at once (the caching allocator's
// live blocks, rounded to its buckets); 0 without CUDA.
size_t memory_peak_bytes(int index);
// Holds the caching allocator of GPU `index` to `bytes` from the driver (0: no limit beyond the
// card's; train.memory_limit_gib): past it, cached blocks are released, then an allocation fails
// as one past the card's memory does, naming the key. Nothing without CUDA.
void set_memory_limit(int index, size_t bytes);

// The times the host waited for a GPU: copies to the host, synchronize(), a copy to the device
// too large for the staging buffers, a staging buffer still in flight. A training step's count
// is fixed (docs/performance.md); 0 without CUDA.
uint64_t host_waits();
// The seconds the host spent in those waits; 0 without CUDA. A step's wall time less these is
// the host's own time (queuing kernels, autograd): `saobp bench` prints both, so a step the
// host's pace bounds shows as one whose host time is near its GPU time.
double host_wait_seconds();

// GPU time per kernel (the kern:: dispatchers' CUDA twins, timed by CUDA events around each
// call) while profiling is on: `saobp bench --profile`. profile_report() waits for the GPU,
// returns the totals since profiling was switched on, largest first, and starts counting anew.
struct OpTime {
  std::string op;
  int64_t calls = 0;
  double ms = 0;
  // A detail entry: one library call inside an op, timed under its shape (the GEMMs' cuBLAS and
  // cuBLASLt calls, labelled like "bf16 nt 16384x1536x512"), with its FLOPs: already counted in
  // its op's entry, so not to be added to the ops' total.
  bool detail = false;
  double flops = 0;
};
void set_profiling(bool on);
std::vector<OpTime> profile_report();

// GPU time between start() and stop() on the default stream of GPU `index` (CUDA events):
// `saobp bench`'s step times on a GPU. seconds() waits for the stop event.
class EventTimer {
 public:
  explicit EventTimer(int index);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();
  void stop();
  double seconds();

 private:
  int index_;
  void* start_ = nullptr;
  void* stop_ = nullptr;
};
}  // namespace saobp::cuda

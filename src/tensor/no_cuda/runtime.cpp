// CPU-only build: the device runtime with no device (the twin of src/tensor/cuda/runtime.cpp and
// allocator.cpp). `saobp info` and the tests ask it what the build offers; making a CUDA tensor
// throws "built without CUDA". The kernels need no stubs: their dispatchers answer a CUDA
// tensor (SAOBP_ON_DEVICE, src/tensor/backend.h).
#include "tensor/backend.h"

namespace saobp::cuda {

bool available() { return false; }
bool built() { return false; }
int device_count() { return 0; }
std::string device_name(int) { fail("cuda", "built without CUDA"); }
DeviceProperties device_properties(int) { fail("cuda", "built without CUDA"); }
size_t memory_peak_bytes(int) { return 0; }
void set_memory_limit(int, size_t) {}
void* allocate(size_t, int) { fail("cuda.allocate", "built without CUDA"); }
void deallocate(void*, size_t, int) {}
void memcpy_to_device(void*, const void*, size_t, int) { fail("cuda.memcpy", "built without CUDA"); }
void memcpy_to_host(void*, const void*, size_t, int) { fail("cuda.memcpy", "built without CUDA"); }
void memcpy_device(void*, const void*, size_t, int) { fail("cuda.memcpy", "built without CUDA"); }
void synchronize(int) {}
uint64_t host_waits() { return 0; }
double host_wait_seconds() { return 0; }
bool profiling() { return false; }
void set_profiling(bool) {}
std::vector<OpTime> profile_report() { return {}; }
EventTimer::EventTimer(int index) : index_(index) { fail("cuda", "built without CUDA"); }
EventTimer::~EventTimer() = default;
void EventTimer::start() {}
void EventTimer::stop() {}
double EventTimer::seconds() { return 0; }

}  // namespace saobp::cuda

// The emulated device of the emulated backend (SAOBP_CUDA=EMU, README.md): the CUDA runtime calls
// of the backend's host halves, on host memory. One device, "saobp CUDA emulator", whose memory
// is host memory up to SAOBP_EMU_DEVICE_GIB (16 by default): past it cudaMalloc fails as a full
// card does, so the out-of-memory paths run too. Kernels and copies run when they are issued, so
// every event has passed by the time it is recorded and a copy is done when it returns.
//
// Each device block is a mapping of its own that ends against an inaccessible guard page: a
// kernel or copy that runs past the end of its block faults at once (SIGSEGV, which Catch
// reports as the failing test's fatal error), as compute-sanitizer's memcheck would report it,
// instead of writing over the host's heap. Blocks start 256-byte aligned, as cudaMalloc's do, so
// the last (size rounded up to 256) - size bytes before the guard go unchecked.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>

#include "emu.h"

namespace saobp::cuda {

struct EmuEvent {
  std::chrono::steady_clock::time_point at;
  bool timing = true, recorded = false;
};

namespace {

using emu::set_last_error;

constexpr int kVersion = 13000;  // what the emulator answers for the driver's and runtime's versions

size_t device_bytes() {
  static const size_t bytes = [] {
    const char* v = std::getenv("SAOBP_EMU_DEVICE_GIB");
    const double gib = v ? std::atof(v) : 16.0;
    return static_cast<size_t>((gib > 0 ? gib : 16.0) * double(size_t{1} << 30));
  }();
  return bytes;
}

struct Memory {
  std::mutex mutex;
  std::map<const void*, size_t> device, host;  // live blocks and their sizes
  size_t used = 0;
};
Memory& memory() {
  static Memory* m = new Memory;  // never destroyed: tensors may be freed during static destruction
  return *m;
}

// Pinned host memory: 256-byte aligned.
void* aligned(size_t bytes) {
  return ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{256}, std::nothrow);
}
void release(void* p) { ::operator delete (p, std::align_val_t{256}); }

size_t page() {
  static const auto p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}
size_t rounded(size_t bytes) { return (std::max<size_t>(bytes, 1) + 255) / 256 * 256; }
size_t whole_pages(size_t bytes) { return (rounded(bytes) + page() - 1) / page() * page(); }
// A device block: whole pages, then a PROT_NONE guard page against which the block ends (its
// start 256-byte aligned). nullptr when the mapping fails.
void* map_block(size_t bytes) {
  const size_t pages = whole_pages(bytes);
  void* base = mmap(nullptr, pages + page(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  if (mprotect(static_cast<char*>(base) + pages, page(), PROT_NONE) != 0) {
    munmap(base, pages + page());
    return nullptr;
  }
  return static_cast<char*>(base) + pages - rounded(bytes);
}
void unmap_block(void* p, size_t bytes) {
  munmap(static_cast<char*>(p) + rounded(bytes) - whole_pages(bytes), whole_pages(bytes) + page());
}

}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return set_last_error(device == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return set_last_error(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "saobp CUDA emulator", sizeof prop->name - 1);
  prop->totalGlobalMem = device_bytes();
  prop->major = 9, prop->minor = 0;
  prop->multiProcessorCount = 132;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* version) {
  *version = kVersion;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = kVersion;
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  *total = device_bytes();
  *free = device_bytes() - m.used;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  *p = nullptr;
  if (bytes > device_bytes() - m.used) return set_last_error(cudaErrorMemoryAllocation);
  void* q = map_block(bytes);
  if (!q) return set_last_error(cudaErrorMemoryAllocation);
  m.device[q] = bytes;
  m.used += bytes;
  *p = q;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  const auto it = m.device.find(p);
  if (it == m.device.end()) return set_last_error(cudaErrorInvalidValue);
  m.used -= it->second;
  unmap_block(p, it->second);
  m.device.erase(it);
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  *p = aligned(bytes);
  if (!*p) return set_last_error(cudaErrorMemoryAllocation);
  m.host[*p] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  if (m.host.erase(p) == 0) return set_last_error(cudaErrorInvalidValue);
  release(p);
  return cudaSuccess;
}
// Mapped pinned memory: the device sees the host's bytes at the same address.
cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  if (!m.host.count(host)) return set_last_error(cudaErrorInvalidValue);
  *device = host;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  *e = new EmuEvent;
  (*e)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
  if (!e) return set_last_error(cudaErrorInvalidResourceHandle);
  e->at = std::chrono::steady_clock::now();
  e->recorded = true;
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  return e ? cudaSuccess : set_last_error(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return cudaEventQuery(e); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) {
  if (!start || !stop || !start->timing || !stop->timing || !start->recorded || !stop->recorded)
    return set_last_error(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(stop->at - start->at).count();
  return cudaSuccess;
}

}  // namespace saobp::cuda

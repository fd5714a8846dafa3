// The caching device allocator behind saobp::cuda::allocate / deallocate.
//
// Sizes are rounded up to a bucket (512 B steps up to 1 MiB, 2 MiB steps above) and a freed
// block goes onto the free list of its (device, bucket); the next request for that bucket takes
// it back without cudaMalloc, so a training step's allocations stop reaching the driver after
// the first step. Blocks are never split or merged. When cudaMalloc runs out of memory the
// device's cached blocks are released and the request is retried once; if that fails too, the
// error says how much was asked for and how much the device has free, and which keys to lower.
// The bytes of live blocks are counted per device, with their peak (memory_peak_bytes), and so
// are the bytes held from the driver (live and cached): under a limit (set_memory_limit,
// train.memory_limit_gib) a request that would hold more releases the cached blocks first, then
// fails as out of memory, naming the key.
//
// Reuse is safe without events because all work runs on the legacy default stream: a block
// freed while a queued kernel still reads it is handed only to work queued after that kernel.
#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "tensor/cuda/common.h"
#include "tensor/device_info.h"

namespace saobp::cuda {

namespace {

constexpr size_t kSmallLimit = size_t{1} << 20, kSmallStep = 512, kLargeStep = size_t{2} << 20;
constexpr double kGiB = double(size_t{1} << 30);

size_t bucket(size_t nbytes) {
  const size_t step = nbytes <= kSmallLimit ? kSmallStep : kLargeStep;
  return (nbytes + step - 1) / step * step;
}

class Cache {
 public:
  void* allocate(size_t nbytes, int device) {
    const size_t size = bucket(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<void*>& list = free_[{device, size}];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      count(device, size);
      return p;
    }
    use_device(device, "cuda.allocate");
    const size_t limit = limit_[device];
    if (limit > 0 && held_[device] + size > limit) release_cached(device);
    if (limit > 0 && held_[device] + size > limit)
      fail("cuda.allocate",
           "out of GPU memory on cuda:{} under train.memory_limit_gib = {:.2f}: asked for {:.2f} GiB with "
           "{:.2f} GiB held by this run's tensors; lower train.batch_size or train.seq_len (or the model's "
           "size; model.tiled=true keeps the attention in O(T) memory per head), or raise "
           "train.memory_limit_gib",
           device, static_cast<double>(limit) / kGiB, static_cast<double>(size) / kGiB,
           static_cast<double>(in_use_[device]) / kGiB);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_cached(device);
      e = cudaMalloc(&p, size);
    }
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      cudaGetLastError();
      fail("cuda.allocate",
           "out of GPU memory on cuda:{}: asked for {:.2f} GiB, {:.2f} GiB free of {:.2f} GiB ({:.2f} GiB "
           "held by this run's tensors); lower train.batch_size or train.seq_len (or the model's size; "
           "model.tiled=true keeps the attention in O(T) memory per head)",
           device, static_cast<double>(size) / kGiB, static_cast<double>(free) / kGiB,
           static_cast<double>(total) / kGiB, static_cast<double>(in_use_[device]) / kGiB);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      fail("cuda.allocate", "cannot allocate {} bytes on cuda:{}: {}", size, device, cudaGetErrorString(e));
    }
    held_[device] += size;
    count(device, size);
    return p;
  }

  void set_limit(int device, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    limit_[device] = bytes;
  }

  size_t peak(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_[device];
  }

  void deallocate(void* p, size_t nbytes, int device) {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t size = bucket(nbytes);
    free_[{device, size}].push_back(p);
    in_use_[device] -= size;
  }

 private:
  // Caller holds mutex_ and has made `device` current.
  void release_cached(int device) {
    for (auto& [key, list] : free_) {
      if (key.first != device) continue;
      std::vector<void*> blocks;
      blocks.swap(list);
      for (void* p : blocks) check(cudaFree(p), "cuda.allocate");
      held_[device] -= key.second * blocks.size();
    }
  }

  // Caller holds mutex_.
  void count(int device, size_t size) {
    in_use_[device] += size;
    peak_[device] = std::max(peak_[device], in_use_[device]);
  }

  std::mutex mutex_;
  std::map<std::pair<int, size_t>, std::vector<void*>> free_;  // (device, bucket) -> blocks
  std::map<int, size_t> in_use_, peak_;                        // bytes of live blocks per device
  std::map<int, size_t> held_, limit_;  // bytes from cudaMalloc (live and cached); 0: no limit
};

// Never destroyed: tensors freed during static destruction may outlive the CUDA runtime.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

}  // namespace

void* allocate(size_t nbytes, int index) { return cache().allocate(nbytes, index); }

void deallocate(void* p, size_t nbytes, int index) { cache().deallocate(p, nbytes, index); }

size_t memory_peak_bytes(int index) { return cache().peak(index); }

void set_memory_limit(int index, size_t bytes) { cache().set_limit(index, bytes); }

}  // namespace saobp::cuda

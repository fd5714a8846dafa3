// saobp::cuda embedding_forward / embedding_backward and check_index_range: the host halves of
// embedding.cu. CPU twin: src/tensor/cpu/embedding.cpp.
#include <map>
#include <mutex>
#include <vector>

#include "tensor/checks.h"
#include "tensor/cuda/common.h"

namespace saobp::cuda {

// Index checks without waiting for the GPU. A check launches a kernel that raises a flag in
// pinned host memory mapped into the device, and is kept (the ids tensor with its limits) until
// the host next waits for that device anyway (a copy to the host, synchronize: runtime.cpp):
// the flag is then read there, with no copy of its own, and a raised flag finds the first
// offender on the host for the CPU's message. The trainer waits once a step to read its losses,
// so a bad id or target in a batch stops the run at the end of that step, before the update;
// until then the kernels read no memory outside their tables (embedding.cu, loss.cu).
namespace {

constexpr size_t kMaxDeferred = 4096;  // more checks than that without a wait: wait for them

struct Deferred {
  Tensor idx;
  int64_t limit, ignore;
  const char* op;
  const char* what;
};
struct DeviceChecks {
  int32_t* host = nullptr;  // the flag, pinned and mapped
  int32_t* device = nullptr;
  std::vector<Deferred> pending;
};

std::mutex checks_mutex;
std::map<int, DeviceChecks>& all_checks() {
  static auto* m = new std::map<int, DeviceChecks>;  // never destroyed (as the allocator's cache)
  return *m;
}

// Caller holds checks_mutex; device `index` is current.
DeviceChecks& checks_of(int index) {
  DeviceChecks& c = all_checks()[index];
  if (!c.host) {
    void* p = nullptr;
    check(cudaHostAlloc(&p, sizeof(int32_t), cudaHostAllocMapped), "check_indices");
    c.host = static_cast<int32_t*>(p);
    *c.host = 0;
    void* d = nullptr;
    check(cudaHostGetDevicePointer(&d, p, 0), "check_indices");
    c.device = static_cast<int32_t*>(d);
  }
  return c;
}

}  // namespace

// idx: contiguous i32 on the device.
void check_index_range(const Tensor& idx, int64_t limit, int64_t ignore, const char* op, const char* what) {
  const int index = idx.device().index;
  use_device(index, op);
  size_t pending = 0;
  {
    std::lock_guard<std::mutex> lock(checks_mutex);
    DeviceChecks& c = checks_of(index);
    check(launch_flag_bad_indices(idx.data<int32_t>(), idx.numel(), limit, ignore, c.device), op);
    c.pending.push_back({idx, limit, ignore, op, what});
    pending = c.pending.size();
  }
  if (pending >= kMaxDeferred) synchronize(index);
}

void check_deferred_indices(int index) {
  std::vector<Deferred> done;
  {
    std::lock_guard<std::mutex> lock(checks_mutex);
    auto it = all_checks().find(index);
    if (it == all_checks().end() || it->second.pending.empty()) return;
    done.swap(it->second.pending);
    volatile int32_t* flag = it->second.host;
    if (*flag == 0) return;
    *flag = 0;
  }
  // Error path: the first offender, on the host (these copies find no checks pending).
  for (const Deferred& d : done) {
    const std::vector<int32_t> v = d.idx.to_vector<int32_t>();
    check_index_values(v.data(), d.idx.numel(), d.limit, d.ignore, d.op, d.what);
  }
  fail(done.front().op, "an index was out of range (the tensor it was in has changed since)");
}

// weight: (V,C)  ids: (N) i32  out: (N,C)
void embedding_forward(const Tensor& weight, const Tensor& ids, Tensor& out) {
  use_device_of(out, "embedding");
  const int64_t C = weight.size(1), N = ids.numel();
  if (out.numel() == 0) return;
  dispatch_float(weight.dtype(), "embedding", [&](auto tag) {
    using T = decltype(tag);
    check(launch_embedding_forward<T>(weight.data<T>(), ids.data<int32_t>(), out.data<T>(), N, C,
                                      weight.size(0)),
          "embedding");
  });
}

// gweight[ids[n]] += gout[n]; deterministic (one writer per element, n in order: embedding.cu).
void embedding_backward(const Tensor& ids, const Tensor& gout, Tensor& gweight) {
  use_device_of(gweight, "embedding_backward");
  const int64_t V = gweight.size(0), C = gweight.size(1), N = ids.numel();
  if (gout.numel() == 0) return;
  if (N > INT32_MAX) fail("embedding_backward", "{} ids exceed the sort's int32 positions", N);
  const size_t bytes = embedding_backward_scratch_bytes(N, V);
  const Tensor scratch = Tensor::empty({static_cast<int64_t>((bytes + 7) / 8)}, DType::f64, gweight.device());
  dispatch_float(gweight.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    check(launch_embedding_backward<T>(ids.data<int32_t>(), gout.data<T>(), gweight.data<T>(), N, C, V,
                                       scratch.data<double>(), bytes),
          "embedding_backward");
  });
}

}  // namespace saobp::cuda

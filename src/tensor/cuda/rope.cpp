// saobp::cuda rope: the angle table (built on the host, cached on the device), then the kernel
// of rope.cu.
// CPU twin: src/tensor/cpu/rope.cpp (same table, so the angles match).
#include <bit>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "tensor/cuda/common.h"
#include "tensor/rope_table.h"

namespace saobp::cuda {

namespace {

// The angle tables on the device, built once per (device, N, HS, base) and kept for the life of
// the process: a training step rotates q and k of every layer, forward and backward, with the
// same table (a few KB for T = 512, HS = 64). N is the power of two at or above the positions
// asked for: a table's rows do not depend on its length (rope_table.h), so generation, which
// asks for one more position at each token, reuses a handful of tables instead of adding one per
// token.
struct Tables {
  Tensor cs, sn;
};
const Tables& tables(int device, int64_t T, int64_t HS, double base) {
  static std::mutex mutex;
  static auto* cache = new std::map<std::tuple<int, int64_t, int64_t, double>, Tables>;  // never freed
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(device, T, HS, base);
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  std::vector<double> cs, sn;
  rope_table(T, HS, base, cs, sn);
  const Tables t{Tensor::from_vector(cs, {T, HS / 2}, Device::cuda(device)),
                 Tensor::from_vector(sn, {T, HS / 2}, Device::cuda(device))};
  return cache->emplace(key, t).first->second;
}

}  // namespace

// x, y: (B,NH,T,HS) contiguous, HS even.
void rope(const Tensor& x, double base, bool inverse, Tensor& y, int64_t offset) {
  use_device_of(y, "rope");
  const int64_t T = x.size(2), HS = x.size(3), rows = x.numel() / std::max<int64_t>(HS, 1);
  if (rows == 0 || HS == 0) return;
  const Tables& t = tables(x.device().index,
                           static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(offset + T))), HS, base);
  const int64_t first = offset * (HS / 2);  // row `offset` of the table is row 0's
  dispatch_float(x.dtype(), "rope", [&](auto tag) {
    using F = decltype(tag);
    check(launch_rope<F>(x.data<F>(), t.cs.data<double>() + first, t.sn.data<double>() + first, inverse,
                         y.data<F>(), rows, T, HS),
          "rope");
  });
}

}  // namespace saobp::cuda

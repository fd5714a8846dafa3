// CPU-only build: the CUDA backend's entry points, each throwing "[op] built without CUDA".
#include "tensor/backend.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

namespace saobp::cuda {

#define SAOBP_STUB_KERNEL(name, dev, params, args) \
  void name params { fail(#name, "built without CUDA (reconfigure with -DSAOBP_CUDA=ON)"); }
SAOBP_KERNELS(SAOBP_STUB_KERNEL)
#undef SAOBP_STUB_KERNEL

bool available() { return false; }
bool built() { return false; }
std::string device_name(int) { fail("cuda", "built without CUDA"); }
void* allocate(size_t, int) { fail("cuda.allocate", "built without CUDA"); }
void deallocate(void*, size_t, int) {}
void memcpy_to_device(void*, const void*, size_t, int) { fail("cuda.memcpy", "built without CUDA"); }
void memcpy_to_host(void*, const void*, size_t, int) { fail("cuda.memcpy", "built without CUDA"); }
void memcpy_device(void*, const void*, size_t, int) { fail("cuda.memcpy", "built without CUDA"); }
void synchronize(int) {}

}  // namespace saobp::cuda

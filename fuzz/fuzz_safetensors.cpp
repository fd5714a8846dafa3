// The safetensors reader (src/model/safetensors.h): the input is the whole file.
#include "harness.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  const std::string path =
      fuzz::put(fuzz::fresh_case(), "model.safetensors", {reinterpret_cast<const char*>(data), size});
  fuzz::check([&] {
    const SafetensorsFile f = load_safetensors(path);
    for (const NamedTensor& t : f.tensors) (void)f.get(t.name);
  });
  fuzz::check([&] { (void)load_safetensors_widened(path); });
  return 0;
}

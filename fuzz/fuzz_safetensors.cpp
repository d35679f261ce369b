// Safetensors header and shard index from hostile bytes. The first byte picks the input:
// even: the bytes are a model.safetensors file (header length, JSON header, data);
// odd: the rest is a model.safetensors.index.json beside a valid one-tensor shard.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"

namespace {

namespace fs = std::filesystem;

const fs::path& index_dir() {
  static const fs::path dir = [] {
    const fs::path d = lathe::fuzz::scratch_dir() / "index";
    fs::create_directories(d);
    lathe::fuzz::write_text(d / "config.json", R"({"architectures": ["LlamaForCausalLM"]})");
    // One F32 tensor "w" of shape [2] (8 bytes), header padded to 8 bytes as writers do.
    std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    while (header.size() % 8) header += ' ';
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    file += header + std::string(8, '\0');
    lathe::fuzz::write_text(d / "model-00001-of-00001.safetensors", file);
    return d;
  }();
  return dir;
}

}  // namespace

// Loads the fixed data once, before the first input (so it does not count against -timeout).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  index_dir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  try {
    if (data[0] % 2 == 0) {
      const fs::path file = lathe::fuzz::scratch_dir() / "model.safetensors";
      lathe::fuzz::write_bytes(file, data + 1, size - 1);
      const auto st = lathe::SafetensorsFile::open(file);
      for (const auto& [name, e] : st.entries()) {
        try {
          (void)st.tensor(name);
        } catch (const lathe::Error&) {
        }
      }
    } else {
      const fs::path& dir = index_dir();
      lathe::fuzz::write_bytes(dir / "model.safetensors.index.json", data + 1, size - 1);
      const auto ckpt = lathe::Checkpoint::open(dir);
      for (const auto& name : ckpt.tensor_names()) (void)ckpt.tensor(name);
      (void)ckpt.total_tensor_bytes();
    }
  } catch (const lathe::Error&) {
  }
  return 0;
}

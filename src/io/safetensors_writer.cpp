#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace lathe {

void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", std::string(dtype_name(t.dtype()))},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data section is 8-byte aligned
  const auto tmp = std::filesystem::path(path.string() + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(tmp.string(), ": cannot open for writing");
    uint64_t len = text.size();
    char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<char>(len >> (8 * i) & 0xff);
    out.write(le, 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, t] : tensors)
      out.write(t.data<char>(), static_cast<std::streamsize>(t.nbytes()));
    out.flush();
    if (!out) fail(tmp.string(), ": write failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail(path.string(), ": cannot rename the finished file into place: ", ec.message());
}

}  // namespace lathe

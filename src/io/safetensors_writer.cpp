#include "core/error.h"
#include "io/durable.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace lathe {

void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    const bool raw = !t.stored_dtype.empty();
    const uint64_t bytes = raw ? t.stored.size() : t.tensor.nbytes();
    header[t.name] = {{"dtype", raw ? t.stored_dtype : std::string(dtype_name(t.tensor.dtype()))},
                      {"shape", raw ? t.stored_shape : t.tensor.shape()},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data section is 8-byte aligned
  // Written under a temporary name and renamed into place: a failure (a full disk, a folder
  // at `path`) leaves no partial file and no temporary one.
  AtomicFile out(path);
  uint64_t len = text.size();
  char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<char>(len >> (8 * i) & 0xff);
  out.write({le, 8});
  out.write(text);
  for (const NamedTensor& t : tensors) {
    if (t.stored_dtype.empty())
      out.write({t.tensor.data<char>(), t.tensor.nbytes()});
    else
      out.write({reinterpret_cast<const char*>(t.stored.data()), t.stored.size()});
  }
  out.commit();
}

}  // namespace lathe

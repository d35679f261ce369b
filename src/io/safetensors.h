// The safetensors format: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and [begin, end) byte offsets into the data that follows.
// Files are memory-mapped; tensors are views into the mapping, never copied.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace lathe {

// Largest header accepted (the reference implementation's limit is 100 MB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsEntry {
  std::string dtype_name;  // as written; may be one lathe cannot compute with (e.g. F8_E4M3)
  Shape shape;
  uint64_t begin = 0, end = 0;  // offsets into the data section
};

class FileMapping;  // safetensors.cpp

class SafetensorsFile {
 public:
  // Maps and validates the file: header length within the file, well-formed JSON, every
  // entry's offsets inside the data section and not overlapping, byte count equal to
  // shape x dtype size. Throws lathe::Error naming the file and the tensor.
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }

  // A view of the named tensor. Throws if it is absent or of a dtype lathe does not support.
  Tensor tensor(const std::string& name) const;
  // The named tensor's bytes as stored, whatever its dtype (packed quantized data such as
  // MXFP4 blocks, U8), valid while the file is open. Throws if it is absent or was released.
  std::span<const uint8_t> bytes(const std::string& name) const;
  // Gives the tensor's pages of the mapping back to the system (after it was converted to
  // another dtype, so that the source and the copy are not both held). No view of it may be
  // alive; a later tensor(name) maps its bytes again.
  void release(const std::string& name) const;

 private:
  std::filesystem::path path_;
  std::shared_ptr<FileMapping> mapping_;  // the whole file, unmapped when the last view dies
  const uint8_t* data_ = nullptr;         // start of the data section
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors to a safetensors file (atomically: a temporary file renamed into place).
struct NamedTensor {
  std::string name;
  Tensor tensor;
  // Or, when `stored_dtype` is set, bytes of a dtype lathe does not compute in (F8_E4M3
  // codes of an FP8 fixture), written as they are with the shape `stored_shape`.
  std::string stored_dtype = {};
  Shape stored_shape = {};
  std::vector<uint8_t> stored = {};
};
void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace lathe

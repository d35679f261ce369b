// Tensors: a dtype, a shape and a pointer to row-major data on a device, in a buffer that is
// either owned (an aligned heap block), shared (a view into a memory-mapped checkpoint or
// another tensor, kept alive by its owner), or borrowed (an arena slot, see wrap()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace lathe {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& shape);  // "[2, 3]"
int64_t shape_numel(const Shape& shape);

// Where a tensor's memory lives. Host memory only, until a device backend exists.
enum class Device : uint8_t { Cpu };

class Tensor {
 public:
  Tensor() = default;

  // A new zero-filled tensor owning 64-byte aligned storage (2 MiB-aligned, on huge pages
  // where the kernel allows, from 2 MiB up: core/pages.h).
  static Tensor zeros(DType dtype, Shape shape);
  // A read-only view of `data`; `owner` keeps the underlying memory (e.g. a mapping) alive.
  static Tensor view(DType dtype, Shape shape, const void* data, std::shared_ptr<const void> owner);
  // A writable view of memory that something else owns and outlives it (a slot of an
  // execution arena, a caller's buffer).
  static Tensor wrap(DType dtype, Shape shape, void* data);

  bool defined() const { return data_ != nullptr || numel() == 0; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int64_t numel() const { return shape_numel(shape_); }
  // Bytes of the data: rows of the last dimension, sized by the dtype's blocks.
  size_t nbytes() const;
  bool owned() const { return writable_; }
  Device device() const { return Device::Cpu; }
  // What keeps the memory alive (null for borrowed memory).
  const std::shared_ptr<const void>& buffer() const { return owner_; }

  template <class T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }
  // Writable access; only for owned tensors (mapped views are read-only memory).
  template <class T>
  T* mut();

  // Points a view made by wrap() at other memory of the same size, without allocating (step
  // inputs rebound at every execution of a planned graph).
  void rebind(void* data) { data_ = data; }

  // Rows [begin, begin + count) of the first dimension: a view sharing this tensor's buffer,
  // no copy (a row block of a mapped fused weight).
  Tensor rows(int64_t begin, int64_t count) const;

  // The same data under another shape with the same element count (no copy).
  Tensor reshape(Shape shape) const;
  // A deep copy in owned storage (as zeros() allocates it).
  Tensor clone() const;
  // Converts to `dtype` (a copy), or returns *this when it already has that dtype.
  Tensor to(DType dtype) const;

 private:
  DType dtype_ = DType::F32;
  Shape shape_;
  const void* data_ = nullptr;
  bool writable_ = false;
  std::shared_ptr<const void> owner_;
};

}  // namespace lathe

#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "core/pages.h"

namespace lathe {

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// Owned storage for a tensor of `bytes`, rounded up to whole 64-byte lines; the caller fills
// [0, bytes) and the rest is zero.
std::shared_ptr<const void> allocate_storage(size_t bytes) {
  const size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  std::shared_ptr<void> p = allocate_pages(rounded);
  if (!p) throw OutOfMemory(cat("out of memory allocating a tensor of ", bytes, " bytes"));
  std::memset(static_cast<uint8_t*>(p.get()) + bytes, 0, rounded - bytes);
  return p;
}

}  // namespace

Tensor Tensor::zeros(DType dtype, Shape shape) {
  for (int64_t d : shape)
    if (d < 0) fail("internal: negative dimension in shape ", shape_str(shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = allocate_storage(t.nbytes());
  t.data_ = t.owner_.get();
  t.writable_ = true;
  std::memset(t.mut<void>(), 0, t.nbytes());
  return t;
}

Tensor Tensor::view(DType dtype, Shape shape, const void* data, std::shared_ptr<const void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.owner_ = std::move(owner);
  return t;
}

Tensor Tensor::wrap(DType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.writable_ = true;
  return t;
}

template <class T>
T* Tensor::mut() {
  if (!writable_) fail("internal: writing to a read-only tensor view");
  return static_cast<T*>(const_cast<void*>(data_));
}
template float* Tensor::mut<float>();
template uint16_t* Tensor::mut<uint16_t>();
template int32_t* Tensor::mut<int32_t>();
template void* Tensor::mut<void>();
template uint8_t* Tensor::mut<uint8_t>();

size_t Tensor::nbytes() const {
  if (shape_.empty()) return row_bytes(dtype_, 1);
  const int64_t last = shape_.back();
  return last == 0 ? 0 : static_cast<size_t>(numel() / last) * row_bytes(dtype_, last);
}

Tensor Tensor::rows(int64_t begin, int64_t count) const {
  if (shape_.empty() || begin < 0 || count < 0 || begin + count > shape_[0])
    fail("internal: rows [", begin, ", ", begin + count, ") of ", shape_str(shape_));
  Tensor t = *this;
  t.shape_[0] = count;
  const size_t row = shape_[0] == 0 ? 0 : nbytes() / static_cast<size_t>(shape_[0]);
  t.data_ = static_cast<const uint8_t*>(data_) + static_cast<size_t>(begin) * row;
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  if (shape_numel(shape) != numel())
    fail("internal: cannot reshape ", shape_str(shape_), " to ", shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor out = *this;
  out.owner_ = allocate_storage(nbytes());  // not zeroed first: the copy writes every byte
  out.data_ = out.owner_.get();
  out.writable_ = true;
  std::memcpy(out.mut<void>(), data_, nbytes());
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor out = zeros(dtype, shape_);
  const size_t n = static_cast<size_t>(numel());
  if (dtype_ == DType::F32) {
    convert_from_f32(dtype, data<float>(), out.mut<void>(), n);
  } else if (dtype == DType::F32) {
    convert_to_f32(dtype_, data_, out.mut<float>(), n);
  } else {
    Tensor f = to(DType::F32);
    convert_from_f32(dtype, f.data<float>(), out.mut<void>(), n);
  }
  return out;
}

}  // namespace lathe

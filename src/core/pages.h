// Giving back the pages of a mapped checkpoint that a copy has replaced (a quantized matrix,
// a rank's slice), so they stop counting in this process's resident memory.
#pragma once

#include <cstddef>

namespace lathe {

// Gives back the whole pages of [p, p + n) when they are a private file mapping (a view of a
// checkpoint): MADV_DONTNEED drops them from this process, and a later read faults them in
// again from the file. Never on anonymous memory, which MADV_DONTNEED would zero.
void page_out(const void* p, size_t n);

}  // namespace lathe

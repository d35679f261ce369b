// The CPU backends (graph/backend.h): the portable reference kernels, and the fast kernels of
// this machine's instruction set.
#pragma once

#include "graph/backend.h"

namespace lathe {

// `reference` runs the portable reference kernels (plain loops, a fixed summation order: the
// numbers every other backend is tested against); otherwise the fast vectorised, threaded
// kernels where they exist.
const Backend& cpu_backend(bool reference);

}  // namespace lathe

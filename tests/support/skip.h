// Skipping a test whose inputs are absent (the SmolLM2 checkpoint, the ../shared folder): on
// a user's machine a skip with the reason; in CI (CI=true) a failure, so that a missing input
// can never make the suite green by skipping.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace lathe::testing {

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::strcmp(ci, "true") == 0;
}

}  // namespace lathe::testing

// A macro, as GTEST_SKIP and FAIL are: both return from the test body.
#define LATHE_SKIP_OUTSIDE_CI(message)                                         \
  do {                                                                         \
    if (::lathe::testing::in_ci()) FAIL() << "cannot skip in CI: " << message; \
    GTEST_SKIP() << message;                                                   \
  } while (0)

// Errors: exceptions inside the library, one message and an exit code at the CLI boundary.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace lathe {

// A failure the user can act on (bad input, unsupported model, missing file). The message
// names the file, tensor or field, and the sizes involved. The CLI prints it on one line
// and exits with code 1.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An allocation that failed (the lab records it as `oom`, not as an error).
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

// A command-line usage mistake (unknown flag, missing argument): exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates any streamable values into one string: cat("tensor ", name, " has ", n).
template <class... Parts>
std::string cat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

// Throws lathe::Error with the concatenated message.
template <class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  throw Error(cat(std::forward<Parts>(parts)...));
}

}  // namespace lathe

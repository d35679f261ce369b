// A small command-line parser: --name VALUE, --name=VALUE, boolean --flag, positionals,
// and --help text generated from the same table. Mistakes throw UsageError (exit code 2).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lathe {

struct OptionSpec {
  std::string name;        // without the leading dashes
  std::string value_name;  // empty for a boolean flag
  std::string help;
};

class Args {
 public:
  Args(std::string command, std::string summary, std::vector<std::string> positionals,
       std::vector<OptionSpec> options);

  // Parses argv[first..]. Sets help() when --help or -h is present. A last positional named
  // "NAME..." takes any number of values, none included (shown as [NAME ...]).
  void parse(int argc, char** argv, int first);
  bool help() const { return help_; }
  std::string usage() const;

  const std::vector<std::string>& positionals() const { return positional_values_; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  bool flag(const std::string& name) const { return has(name); }
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  int64_t get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;
  // A finite number (nan and inf are usage errors), within [min, max] (min excluded when
  // `min_open`).
  double get_double(const std::string& name, double fallback,
                    double min = -std::numeric_limits<double>::infinity(),
                    double max = std::numeric_limits<double>::infinity(),
                    bool min_open = false) const;

 private:
  const OptionSpec* find(const std::string& name) const;
  std::string positional_usage() const;  // " A B [C ...]"

  std::string command_, summary_;
  std::vector<std::string> positional_names_;
  std::vector<OptionSpec> options_;
  std::vector<std::string> positional_values_;
  std::map<std::string, std::string> values_;
  bool help_ = false;
};

}  // namespace lathe

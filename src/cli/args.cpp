#include "cli/args.h"

#include <charconv>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "core/error.h"

namespace lathe {

Args::Args(std::string command, std::string summary, std::vector<std::string> positionals,
           std::vector<OptionSpec> options)
    : command_(std::move(command)),
      summary_(std::move(summary)),
      positional_names_(std::move(positionals)),
      options_(std::move(options)) {}

const OptionSpec* Args::find(const std::string& name) const {
  for (const auto& o : options_)
    if (o.name == name) return &o;
  return nullptr;
}

void Args::parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      return;
    }
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_values_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    const OptionSpec* spec = find(name);
    if (!spec)
      throw UsageError(cat("lathe ", command_, ": unknown option --", name, " (see --help)"));
    if (spec->value_name.empty()) {
      if (inline_value) throw UsageError(cat("lathe ", command_, ": --", name, " takes no value"));
    } else if (!inline_value) {
      if (i + 1 >= argc)
        throw UsageError(
            cat("lathe ", command_, ": --", name, " needs a value ", spec->value_name));
      value = argv[++i];
    }
    values_[name] = value;
  }
  const bool variadic = !positional_names_.empty() && positional_names_.back().ends_with("...");
  const size_t fixed = positional_names_.size() - (variadic ? 1 : 0);
  if (variadic ? positional_values_.size() < fixed
               : positional_values_.size() != positional_names_.size()) {
    const std::string names = positional_usage();
    throw UsageError(cat("lathe ", command_, ": expected", names.empty() ? " no arguments" : names,
                         ", got ", positional_values_.size(), " argument(s) (see --help)"));
  }
}

namespace {

constexpr size_t kHelpColumns = 100;  // help lines are wrapped to this width
constexpr size_t kHelpIndent = 28;    // where an option's description starts

// `text` wrapped at word boundaries into lines of at most `width` columns, every line after
// the first indented by `indent` spaces (the first continues a line that holds as many).
std::string wrap(const std::string& text, size_t indent, size_t width) {
  std::istringstream words(text);
  std::string out, line, word;
  while (words >> word) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

}  // namespace

std::string Args::positional_usage() const {
  // A last positional named "NAME..." takes any number of values, none included.
  std::string out;
  for (const auto& p : positional_names_)
    out += " " + (p.ends_with("...") ? "[" + p.substr(0, p.size() - 3) + " ...]" : p);
  return out;
}

std::string Args::usage() const {
  std::ostringstream out;
  out << "usage: lathe " << command_ << positional_usage() << " [options]\n\n"
      << wrap(summary_, 0, kHelpColumns) << "\n\noptions:\n";
  auto option = [&](const std::string& left, const std::string& help) {
    out << left;
    if (left.size() < kHelpIndent)
      out << std::string(kHelpIndent - left.size(), ' ');
    else
      out << "\n" << std::string(kHelpIndent, ' ');
    out << wrap(help, kHelpIndent, kHelpColumns) << "\n";
  };
  for (const auto& o : options_)
    option("  --" + o.name + (o.value_name.empty() ? "" : " " + o.value_name), o.help);
  option("  --help", "show this help");
  return out.str();
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

int64_t Args::get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  auto v = get(name);
  if (!v) return fallback;
  int64_t out = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || end != v->data() + v->size())
    throw UsageError(cat("lathe ", command_, ": --", name, " needs an integer, got \"", *v, "\""));
  if (out < min || out > max)
    throw UsageError(cat("lathe ", command_, ": --", name, " must be between ", min, " and ", max,
                         ", got ", out));
  return out;
}

double Args::get_double(const std::string& name, double fallback, double min, double max,
                        bool min_open) const {
  auto v = get(name);
  if (!v) return fallback;
  double d = 0;
  try {
    size_t used = 0;
    d = std::stod(*v, &used);
    if (used != v->size()) throw std::invalid_argument("trailing characters");
  } catch (const std::out_of_range&) {
    d = std::numeric_limits<double>::infinity();  // beyond a double: refused below
  } catch (const std::exception&) {
    throw UsageError(cat("lathe ", command_, ": --", name, " needs a number, got \"", *v, "\""));
  }
  if (!std::isfinite(d))
    throw UsageError(
        cat("lathe ", command_, ": --", name, " needs a finite number, got \"", *v, "\""));
  if (d < min || d > max || (min_open && d == min)) {
    const bool bounded = max != std::numeric_limits<double>::infinity();
    std::ostringstream range;
    if (bounded)
      range << "in " << (min_open ? "(" : "[") << min << ", " << max << "]";
    else
      range << (min_open ? "> " : ">= ") << min;
    throw UsageError(cat("lathe ", command_, ": --", name, " must be ", range.str(), ", got ", *v));
  }
  return d;
}

}  // namespace lathe

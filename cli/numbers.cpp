#include "cli/numbers.h"

#include <fmt/format.h>

namespace walcut::cli {

std::optional<uint64_t> ParseDecimal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  uint64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::string RangeText(NumberRange r) { return fmt::format("{}..{}", r.lo, r.hi); }

std::string RangeMessage(std::string_view name, NumberRange r) {
  return fmt::format("{}: must be {}", name, RangeText(r));
}

std::optional<uint64_t> ParseInRange(std::string_view name, std::string_view text, NumberRange r, std::string& error) {
  const std::optional<uint64_t> v = ParseDecimal(text);
  if (!v || *v < r.lo || *v > r.hi) {
    error = RangeMessage(name, r);
    return std::nullopt;
  }
  return v;
}

namespace {

// The name an error message gives the option: its long name, else its
// short one.
std::string DisplayName(const std::string& names) {
  std::string shortest;
  size_t from = 0;
  while (from <= names.size()) {
    const size_t comma = std::min(names.find(',', from), names.size());
    const std::string name = names.substr(from, comma - from);
    if (name.starts_with("--")) return name;
    if (shortest.empty()) shortest = name;
    from = comma + 1;
  }
  return shortest;
}

uint64_t ParseOrThrow(const std::string& name, const std::string& text, NumberRange r) {
  std::string error;
  const std::optional<uint64_t> v = ParseInRange(name, text, r, error);
  if (!v) throw CLI::ValidationError(error);
  return *v;
}

std::string WithRange(const std::string& description, NumberRange r) {
  return fmt::format("{} [{}]", description, RangeText(r));
}

}  // namespace

CLI::Option* AddNumberOption(CLI::App* cmd, const std::string& names, std::function<void(uint64_t)> set, NumberRange r,
                             const std::string& description) {
  const std::string name = DisplayName(names);
  return cmd
      ->add_option_function<std::string>(
          names, [name, r, set = std::move(set)](const std::string& text) { set(ParseOrThrow(name, text, r)); },
          WithRange(description, r))
      ->type_name("UINT");
}

CLI::Option* AddNumber(CLI::App* cmd, const std::string& names, int& target, NumberRange r,
                       const std::string& description) {
  if (r.hi > static_cast<uint64_t>(std::numeric_limits<int>::max()))
    throw std::logic_error(names + ": range beyond its type");
  return AddNumberOption(
      cmd, names, [&target](uint64_t v) { target = static_cast<int>(v); }, r, description);
}

CLI::Option* AddNumberList(CLI::App* cmd, const std::string& names, std::vector<uint32_t>& target, NumberRange r,
                           const std::string& description) {
  if (r.hi > std::numeric_limits<uint32_t>::max()) throw std::logic_error(names + ": range beyond its type");
  const std::string name = DisplayName(names);
  return cmd
      ->add_option_function<std::vector<std::string>>(
          names,
          [name, r, &target](const std::vector<std::string>& texts) {
            target.clear();
            for (const auto& t : texts) target.push_back(static_cast<uint32_t>(ParseOrThrow(name, t, r)));
          },
          WithRange(description, r))
      ->type_name("UINT")
      ->delimiter(',');
}

}  // namespace walcut::cli

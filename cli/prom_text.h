// The Prometheus text exposition format (version 0.0.4), as node_exporter's
// textfile collector reads it: for each metric family a # HELP and a # TYPE
// line, then its samples, one per line. Label values are byte strings made
// text by walfmt::EscapeBytes (README: "Byte strings in JSON, JUnit and SVG"),
// then escaped as the format asks (\\, \", \n).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace walcut::cli {

using PromLabels = std::vector<std::pair<std::string, std::string>>;

class PromText {
 public:
  // Starts a family; the samples added next belong to it. `type` is "gauge"
  // or "counter". A name already used is a programming error (asserted).
  void Family(std::string name, std::string type, std::string help);
  // One sample of the current family, with the Common() labels ahead of its own.
  void Add(const PromLabels& labels, uint64_t value);
  void Add(const PromLabels& labels, double value);
  // Labels every sample carries, ahead of its own.
  void Common(PromLabels labels) { common_ = std::move(labels); }
  std::string Text() const { return text_; }

 private:
  void Sample(const PromLabels& labels, const std::string& value);
  std::string text_;
  std::string family_;
  std::vector<std::string> names_;
  PromLabels common_;
};

// A label value as the format writes it between its quotes.
std::string PromLabelValue(std::string_view bytes);
// Seconds with microsecond precision from microseconds ("1796040000.123456").
double MicrosToSeconds(uint64_t us);

}  // namespace walcut::cli

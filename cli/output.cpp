#include "cli/output.h"

#include <sys/ioctl.h>
#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <vector>

#include <cstdlib>
#include <string_view>

#include <cstdio>

#include <fmt/format.h>

#include "cli/command.h"

namespace walcut::cli {

void AddFormatOption(CLI::App* cmd, Format& f) {
  cmd->add_option_function<std::string>(
         "--format", [&f](const std::string& v) { f = v == "json" ? Format::kJson : Format::kText; },
         "Output format: text for people (default), json for machines (versioned schema)")
      ->check(CLI::IsMember({"text", "json"}))
      ->type_name("text|json");
}

nlohmann::json ProblemJson(const walfmt::Problem& p) {
  nlohmann::json j{{"kind", std::string(walfmt::ProblemKindName(p.kind))},
                   {"finding", p.fatal},
                   {"file", p.file},
                   {"segment", p.segment},
                   {"offset", p.offset},
                   {"lsn", p.lsn().ToString()},
                   {"length", p.length},
                   {"detail", p.detail},
                   {"message", p.ToString()}};
  j["node"] = p.node_known ? nlohmann::json(p.node) : nlohmann::json(nullptr);
  if (!p.expected.empty() || !p.actual.empty()) {
    j["expected"] = p.expected;
    j["actual"] = p.actual;
  }
  return j;
}

namespace {
std::atomic<bool> quiet{false};
}  // namespace

void SetQuiet(bool q) { quiet = q; }
bool Quiet() { return quiet; }

void PrintProblem(const walfmt::Problem& p) {
  if (Quiet() && !p.fatal && p.kind != walfmt::ProblemKind::kIo) return;
  ClearProgressLine();
  std::fflush(stdout);
  if (p.kind == walfmt::ProblemKind::kIo) {
    fmt::print(stderr, "walcut: {}\n", p.ToString());  // "<path>: <OS error>", as every command says it
    return;
  }
  fmt::print(stderr, "walcut: {}: {}\n", p.fatal ? "corruption" : "note", p.ToString());
}

void PrintError(const std::string& message) {
  ClearProgressLine();
  std::fflush(stdout);
  fmt::print(stderr, "walcut: {}\n", message);
}

std::string HumanBytes(uint64_t n) {
  if (n < 1024) return fmt::format("{} B", n);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

int ExitCode(walfmt::Outcome outcome) {
  switch (outcome) {
    case walfmt::Outcome::kOk:
      return kExitOk;
    case walfmt::Outcome::kFindings:
      return kExitFindings;
    case walfmt::Outcome::kUsage:
      return kExitUsage;
    case walfmt::Outcome::kIo:
      return kExitIo;
  }
  return kExitIo;
}

int ExitForStatus(const walfmt::Status& st) { return ExitCode(walfmt::OutcomeOf(st)); }

namespace {
std::atomic<ProgressWhen> progress_when{ProgressWhen::kAuto};
// The one progress line on the screen: guarded by progress_mu, which also
// orders the writes of the line and of its clearing.
std::mutex progress_mu;
bool progress_shown = false;

void WriteStderr(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}

void ClearLocked() {
  if (!progress_shown) return;
  WriteStderr("\r\033[K");
  progress_shown = false;
}

std::string Clock(double seconds) {
  const uint64_t s = static_cast<uint64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

// Milliseconds between redraws: 200, or WALCUT_PROGRESS_INTERVAL_MS (tests).
std::chrono::milliseconds RedrawInterval() {
  static const std::chrono::milliseconds ms = [] {
    const char* e = std::getenv("WALCUT_PROGRESS_INTERVAL_MS");
    if (e == nullptr || *e == '\0') return std::chrono::milliseconds(200);
    return std::chrono::milliseconds(std::strtoul(e, nullptr, 10));
  }();
  return ms;
}
}  // namespace

void SetProgressWhen(ProgressWhen w) { progress_when = w; }

void AddProgressOptions(CLI::App* cmd) {
  cmd->add_flag_callback(
      "--progress", [] { SetProgressWhen(ProgressWhen::kAlways); },
      "Show progress on stderr even when it is not a terminal");
  cmd->add_flag_callback(
      "--no-progress", [] { SetProgressWhen(ProgressWhen::kNever); },
      "No progress on stderr (default: shown when stderr is a terminal)");
}

void ClearProgressLine() {
  std::lock_guard<std::mutex> lock(progress_mu);
  ClearLocked();
}

std::string ProgressLine(const std::string& stage, uint64_t done, uint64_t total, double seconds) {
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  const std::string rate_text = rate > 0 ? fmt::format(", {}/s", HumanBytes(static_cast<uint64_t>(rate))) : "";
  if (total == 0) return fmt::format("{} {}{}", stage, HumanBytes(done), rate_text);
  const uint64_t shown = std::min(done, total);
  std::string eta;
  if (rate > 0) eta = fmt::format(", ETA {}", Clock(static_cast<double>(total - shown) / rate));
  return fmt::format("{} {}% ({}/{}{}{})", stage, shown * 100 / total, HumanBytes(shown), HumanBytes(total), rate_text,
                     eta);
}

bool Progress::Wanted() {
  return !Quiet() && (progress_when == ProgressWhen::kAlways ||
                      (progress_when == ProgressWhen::kAuto && isatty(STDERR_FILENO) == 1));
}

Progress::Progress(std::string stage, uint64_t total_bytes)
    : enabled_(Wanted()), stage_(std::move(stage)), total_(total_bytes), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { Finish(); }

void Progress::Finish() {
  std::lock_guard<std::mutex> lock(progress_mu);
  enabled_ = false;
  ClearLocked();
}

void Progress::SetTotal(uint64_t total_bytes) {
  std::lock_guard<std::mutex> lock(progress_mu);
  total_ = total_bytes;
}

void Progress::Stage(std::string stage, uint64_t total_bytes) {
  std::lock_guard<std::mutex> lock(progress_mu);
  stage_ = std::move(stage);
  total_ = total_bytes;
  done_ = 0;
  start_ = std::chrono::steady_clock::now();
  drawn_once_ = false;  // the new stage's name shows at its first update
}

void Progress::Update(uint64_t bytes_done) {
  std::lock_guard<std::mutex> lock(progress_mu);
  if (!enabled_) return;
  done_ = std::max(done_, bytes_done);
  const auto now = std::chrono::steady_clock::now();
  // The first line after one interval too: a command that ends sooner
  // draws nothing, and the rate is measured over a useful time.
  if (now - (drawn_once_ ? last_ : start_) < RedrawInterval()) return;
  DrawLocked(now);
}

void Progress::DrawLocked(std::chrono::steady_clock::time_point now) {
  last_ = now;
  drawn_once_ = true;
  std::string line = ProgressLine(stage_, done_, total_, std::chrono::duration<double>(now - start_).count());
  struct winsize ws {};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && line.size() >= static_cast<size_t>(ws.ws_col)) {
    line.resize(ws.ws_col - 1u);  // a line that wraps would not be cleared by \r\x1b[K
  }
  WriteStderr("\r\033[K" + line);
  progress_shown = true;
}

uint64_t DataBytes(const std::vector<walfmt::NodeSegments>& nodes) {
  uint64_t total = 0;
  for (const auto& n : nodes) {
    for (const auto& f : n.segments) total += walfmt::SegmentDataBytes(f.path, f.compressed);
  }
  return total;
}

}  // namespace walcut::cli

namespace walcut::cli {
std::string OutputInsideInput(const std::string& option, const std::string& path,
                              const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  if (path.empty()) return {};
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return {};  // reported by whatever then tries to write it
  for (const auto& in : inputs) {
    if (in.empty()) continue;
    std::error_code ec2;
    const fs::path root = fs::weakly_canonical(fs::absolute(in, ec2), ec2);
    if (ec2) continue;
    const auto [r, t] = std::mismatch(root.begin(), root.end(), target.begin(), target.end());
    if (r == root.end()) {
      return fmt::format("{} {} is inside the input {}; walcut never writes to its input", option, path, in);
    }
  }
  return {};
}

std::string BaseNameOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}
}  // namespace walcut::cli

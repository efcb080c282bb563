#include "cli/output.h"

#include <vector>
#include <filesystem>
#include <algorithm>
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

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
  std::fflush(stdout);
  if (p.kind == walfmt::ProblemKind::kIo) {
    fmt::print(stderr, "walcut: {}\n", p.ToString());  // "<path>: <OS error>", as every command says it
    return;
  }
  fmt::print(stderr, "walcut: {}: {}\n", p.fatal ? "corruption" : "note", p.ToString());
}

void PrintError(const std::string& message) {
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

int ExitForStatus(const walfmt::Status& st) {
  switch (st.code()) {
    case walfmt::ErrorCode::kOk: return 0;
    case walfmt::ErrorCode::kCorruption: return 1;
    case walfmt::ErrorCode::kInvalidArgument:
    case walfmt::ErrorCode::kNotFound: return 2;
    case walfmt::ErrorCode::kIo:
    case walfmt::ErrorCode::kInternal: return 3;
  }
  return 3;
}

void ProblemTally::Add(const walfmt::Problem& p) {
  if (p.kind == walfmt::ProblemKind::kIo) {
    ++io;
  } else if (p.fatal) {
    ++findings;
  } else {
    ++notices;
  }
}

int ProblemTally::ExitCode() const {
  if (io > 0) return 3;
  if (findings > 0) return 1;
  return 0;
}

Progress::Progress(std::string what, uint64_t total_units)
    : enabled_(isatty(STDERR_FILENO) == 1 && !Quiet()), what_(std::move(what)), total_(total_units) {}

Progress::~Progress() {
  if (enabled_ && drawn_) fmt::print(stderr, "\r\033[K");
}

void Progress::Update(uint64_t units_done, uint64_t bytes_done) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(200) && units_done < total_) return;
  last_ = now;
  drawn_ = true;
  if (total_ == 0) {
    fmt::print(stderr, "\r\033[K{}: {}", what_, HumanBytes(bytes_done));  // no unit count known
  } else {
    fmt::print(stderr, "\r\033[K{}: {}/{} segments, {}", what_, units_done, total_, HumanBytes(bytes_done));
  }
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

// walcut snapshot check REPO [NAME] [--restore]: the repository form of
// `snapshot check` (cli/cmd_snapshot.cpp dispatches here when its argument
// holds the repository marker). Text / JSON / JUnit, exit codes as walcut check.
#include <chrono>

#include <fmt/format.h>

#include "cli/check_report.h"
#include "cli/command.h"
#include "cli/metrics.h"
#include "cli/output.h"
#include "cli/repo_commands.h"
#include "repo/repository.h"
#include "walfmt/file_io.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {
using nlohmann::json;

std::string Evidence(const repo::RepoFinding& f) {
  std::vector<std::string> parts;
  if (!f.artifact.empty()) parts.push_back("artifact " + f.artifact);
  if (!f.file.empty()) parts.push_back("file " + f.file);
  if (f.node) parts.push_back(fmt::format("node {}", *f.node));
  if (!f.expected.empty()) parts.push_back("expected " + f.expected);
  if (!f.found.empty()) parts.push_back("found " + f.found);
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}

std::string Verdict(const repo::RepoCheckReport& r, int rc) {
  if (rc == 3) return fmt::format("ERROR ({} tool failure{})", r.errors.size(), r.errors.size() == 1 ? "" : "s");
  if (rc == 1) return fmt::format("FAILED ({} findings in {} checks of {})", r.Findings(), r.Failed(), r.items.size());
  return fmt::format("OK ({} checks)", r.items.size());
}

std::string Text(const repo::RepoCheckReport& r, int rc) {
  std::string s = fmt::format("walcut snapshot check {}: repository, {} artifact{}\n", r.dir, r.artifacts.size(),
                              r.artifacts.size() == 1 ? "" : "s");
  for (const auto& it : r.items) {
    for (const auto& f : it.findings) {
      s += fmt::format("FINDING [{} {}: {}] {}\n", it.level, it.group, it.name, f.message);
      const std::string ev = Evidence(f);
      if (!ev.empty()) s += fmt::format("    evidence: {}\n", ev);
    }
  }
  for (const auto& n : r.notes) s += fmt::format("NOTE {}\n", n);
  for (const auto& e : r.errors) s += fmt::format("ERROR {}\n", e);
  for (const char* level : {"files", "chain", "cuts", "restore"}) {
    uint64_t n = 0, failed = 0, skipped = 0;
    for (const auto& it : r.items) {
      if (it.level != level) continue;
      ++n;
      failed += it.failed;
      skipped += it.skipped;
    }
    if (n == 0) continue;
    std::string extra;
    if (std::string(level) == "files")
      extra = fmt::format(" ({} files, {} read)", r.files_checked, HumanBytes(r.bytes_checked));
    if (std::string(level) == "restore") extra = fmt::format(" ({} restored)", r.restores);
    s += fmt::format("{}: {} checks{}, {} failed{}\n", level, n, extra, failed,
                     skipped ? fmt::format(", {} skipped", skipped) : "");
  }
  s += fmt::format("checked {}: {}\n", r.dir, Verdict(r, rc));
  return s;
}

json Json(const repo::RepoCheckReport& r, int rc) {
  json items = json::array();
  for (const auto& it : r.items) {
    json fs = json::array();
    for (const auto& f : it.findings) {
      fs.push_back({{"check", f.check},
                    {"artifact", f.artifact},
                    {"file", f.file.empty() ? json(nullptr) : json(f.file)},
                    {"node", f.node ? json(*f.node) : json(nullptr)},
                    {"expected", f.expected},
                    {"found", f.found},
                    {"message", f.message}});
    }
    items.push_back({{"level", it.level},
                     {"group", it.group},
                     {"name", it.name},
                     {"outcome", it.failed    ? "fail"
                                 : it.skipped ? "skipped"
                                              : "pass"},
                     {"note", it.note},
                     {"findings", fs}});
  }
  return {{"schema", "walcut.snapshot.repo-check/1"},
          {"repo", r.dir},
          {"artifacts", r.artifacts},
          {"items", items},
          {"notes", r.notes},
          {"errors", r.errors},
          {"summary",
           {{"checks", r.items.size()},
            {"failed", r.Failed()},
            {"findings", r.Findings()},
            {"files", r.files_checked},
            {"bytes", r.bytes_checked},
            {"restores", r.restores},
            {"exit_code", rc},
            {"verdict", Verdict(r, rc)}}}};
}

std::string Junit(const repo::RepoCheckReport& r, int rc) {
  std::string body;
  uint64_t total = 0, total_failed = 0;
  for (const char* level : {"files", "chain", "cuts", "restore"}) {
    std::string cases;
    uint64_t n = 0, failed = 0, skipped = 0;
    for (const auto& it : r.items) {
      if (it.level != level) continue;
      ++n;
      cases += fmt::format("    <testcase classname=\"{}\" name=\"{}\"",
                           XmlEscape(fmt::format("walcut.repo.{}.{}", level, it.group)), XmlEscape(it.name));
      if (it.failed) {
        ++failed;
        std::string text;
        for (const auto& f : it.findings) text += f.message + "\n    evidence: " + Evidence(f) + "\n";
        cases += fmt::format(">\n      <failure message=\"{}\" type=\"CHECK\">{}</failure>\n    </testcase>\n",
                             XmlEscape(it.findings.front().message), XmlEscape(text));
      } else if (it.skipped) {
        ++skipped;
        cases += fmt::format(">\n      <skipped message=\"{}\"/>\n    </testcase>\n", XmlEscape(it.note));
      } else {
        cases += "/>\n";
      }
    }
    if (n == 0) continue;
    total += n;
    total_failed += failed;
    body += fmt::format(
        "  <testsuite name=\"walcut.repo.{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">\n{}  "
        "</testsuite>\n",
        level, n, failed, skipped, cases);
  }
  if (!r.errors.empty()) {
    std::string cases;
    for (const auto& e : r.errors) {
      cases += fmt::format(
          "    <testcase classname=\"walcut.errors\" name=\"tool\">\n      <error message=\"{}\"/>\n    </testcase>\n",
          XmlEscape(e));
    }
    body += fmt::format(
        "  <testsuite name=\"walcut.errors\" tests=\"{}\" failures=\"0\" errors=\"{}\" skipped=\"0\">\n{}  "
        "</testsuite>\n",
        r.errors.size(), r.errors.size(), cases);
  }
  (void)rc;
  // junit-10.xsd: testsuites carries no skipped count (each testsuite does).
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" "
      "errors=\"{}\">\n{}</testsuites>\n",
      XmlEscape(fmt::format("walcut snapshot check {}", r.dir)), total + r.errors.size(), total_failed, r.errors.size(),
      body);
}

}  // namespace

bool IsRepositoryDir(const std::string& dir) { return repo::IsRepository(dir); }

int RunRepoCheck(const RepoCheckCliOptions& o) {
  const auto loc = RepoLocationOf(o.repo);
  if (!loc) return kExitUsage;
  repo::RepoCheckOptions ro;
  ro.repo = loc->s3 ? loc->url : loc->dir;
  ro.name = o.name;
  ro.restore = o.restore;
  ro.jobs = o.jobs;
  for (const auto& [option, path] :
       {std::pair<const char*, std::string>{"--output", o.output}, {"--metrics", o.metrics}}) {
    if (const std::string p = loc->s3 ? "" : OutputInsideInput(option, path, {o.repo}); !p.empty()) {
      PrintError(p);
      return kExitUsage;
    }
  }
  int key_rc = 0;
  const auto remote = RemoteFor(o.access, *loc, o.jobs, key_rc);
  if (!remote) return key_rc;
  const auto started = std::chrono::steady_clock::now();
  auto r = repo::CheckAt(*loc, ro, *remote);
  if (!r.ok()) {
    PrintError(r.status().message());
    switch (r.status().code()) {
      case walfmt::ErrorCode::kNotFound:
      case walfmt::ErrorCode::kInvalidArgument:
        return kExitUsage;
      default:
        return kExitIo;
    }
  }
  const int rc = ExitCode(repo::RepoCheckOutcome(*r));
  std::string doc = o.format == "json"    ? walfmt::DumpJson(Json(*r, rc), 2) + "\n"
                    : o.format == "junit" ? Junit(*r, rc)
                                          : Text(*r, rc);
  if (!o.output.empty()) {
    if (auto st = walfmt::WriteFileAtomic(o.output, doc); !st.ok()) {
      PrintError(st.message());
      return kExitIo;
    }
    fmt::print("checked {}: {}; report in {}\n", r->dir, Verdict(*r, rc), o.output);
  } else {
    fmt::print("{}", doc);
  }
  if (o.metrics.empty()) return rc;
  auto listing = repo::ListAt(*loc, *remote);
  if (!listing.ok()) {
    PrintError(listing.status().message());
    return kExitIo;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const int mrc = WriteMetrics(o.metrics, RepoMetrics(*r, *listing, rc, secs, NowUnixMicros()));
  return mrc != 0 ? mrc : rc;
}

}  // namespace walcut::cli

// walcut history check DIR HISTORY: a real cluster's consistent cuts against
// the clients' history (walcut load --history); the rules are in
// recovery/history.h. A line per cut, then one for the whole history's
// outcomes; --format json: schema walcut.history-check/1. Exit 0 when every
// consistent cut and the outcomes pass, 1 on findings, 2 usage (a malformed
// history, a cluster without an epoch, a pruned WAL), 3 I/O.

#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/output.h"
#include "recovery/history.h"
#include "walfmt/duration.h"

namespace walcut::cli {
namespace {

using walfmt::Status;
using Json = nlohmann::ordered_json;

constexpr uint64_t kMaxSlackUs = uint64_t{3600} * 1000000;

struct HistoryOpts {
  std::string dir;
  std::string history;
  std::string clock_slack = "1ms";
  Format format = Format::kText;
};

int Fail(const Status& st) {
  PrintError(st.message());
  return ExitForStatus(st);
}

Json FindingJson(const recovery::HistoryFinding& f) {
  Json j;
  j["rule"] = recovery::HistoryRuleNumber(f.rule);
  j["check"] = recovery::HistoryRuleName(f.rule);
  if (f.cut) j["cut"] = f.cut;
  if (f.node) j["node"] = *f.node;
  if (f.tx) {
    j["tx"] = f.tx->ToString();
    j["tx_readable"] = f.tx->Readable();
  }
  if (f.line) j["history_line"] = *f.line;
  if (!f.key.empty()) j["key"] = f.key;
  if (!f.expected.empty()) j["expected"] = f.expected;
  if (!f.found.empty()) j["found"] = f.found;
  j["message"] = f.message;
  return j;
}

Json FindingsJson(const std::vector<recovery::HistoryFinding>& fs) {
  Json a = Json::array();
  for (const auto& f : fs) a.push_back(FindingJson(f));
  return a;
}

void PrintJson(const HistoryOpts& o, uint64_t slack_us, const recovery::HistoryReport& r) {
  Json j;
  j["schema"] = recovery::kHistoryCheckSchema;
  j["cluster"] = o.dir;
  j["history"] = o.history;
  j["clock_slack_us"] = slack_us;
  j["pass"] = r.ok();
  j["history_transactions"] = {{"committed", r.committed},
                               {"aborted", r.aborted},
                               {"in_doubt", r.in_doubt},
                               {"refused", r.refused},
                               {"unknown", r.unknown}};
  j["wal_committed"] = r.wal_committed;
  j["wal_committed_not_in_history"] = r.unnamed;
  j["outcomes"] = {{"pass", r.total_outcome_findings == 0},
                   {"findings", FindingsJson(r.outcome_findings)},
                   {"total_findings", r.total_outcome_findings}};
  Json cuts = Json::array();
  for (const auto& c : r.cuts) {
    Json x;
    x["cut"] = c.cut;
    x["status"] = c.status;
    x["checked"] = c.checked;
    if (!c.checked) {
      if (!c.reason.empty()) x["reason"] = c.reason;
      cuts.push_back(std::move(x));
      continue;
    }
    x["pass"] = c.pass();
    x["start_unix_us"] = c.start_unix_us;
    x["finish_unix_us"] = c.finish_unix_us;
    x["history_in_cut"] = c.history_in_cut;
    x["unacknowledged_in_cut"] = c.unacknowledged_in_cut;
    x["acknowledged_before"] = c.acknowledged_before;
    x["started_after"] = c.started_after;
    x["keys"] = c.keys;
    x["findings"] = FindingsJson(c.findings);
    x["total_findings"] = c.total_findings;
    cuts.push_back(std::move(x));
  }
  j["cuts_checked"] = r.cuts_checked;
  j["cuts_failed"] = r.cuts_failed;
  j["cuts"] = std::move(cuts);
  fmt::print("{}\n", j.dump(2));
}

void PrintFindings(const std::vector<recovery::HistoryFinding>& fs, uint64_t total) {
  for (const auto& f : fs) {
    fmt::print("  rule {} {}: {}\n", recovery::HistoryRuleNumber(f.rule), recovery::HistoryRuleName(f.rule), f.message);
  }
  if (total > fs.size()) fmt::print("  ... and {} more findings\n", total - fs.size());
}

void PrintText(const HistoryOpts& o, const recovery::HistoryReport& r) {
  fmt::print(
      "history {}: {} committed, {} aborted, {} in doubt, {} refused, {} unanswered; WAL: {} "
      "committed, {} not in the history\n",
      o.history, r.committed, r.aborted, r.in_doubt, r.refused, r.unknown, r.wal_committed, r.unnamed);
  for (const auto& c : r.cuts) {
    if (!c.checked) {
      fmt::print("cut {}: not checked ({}{}{})\n", c.cut, c.status, c.reason.empty() ? "" : ": ", c.reason);
    } else if (c.pass()) {
      fmt::print(
          "cut {}: pass ({} acknowledged transactions and {} others in it; {} acknowledged before it started, {} "
          "started after it finished; {} keys)\n",
          c.cut, c.history_in_cut, c.unacknowledged_in_cut, c.acknowledged_before, c.started_after, c.keys);
    } else {
      fmt::print("cut {}: FAIL, {} finding{}\n", c.cut, c.total_findings, c.total_findings == 1 ? "" : "s");
      PrintFindings(c.findings, c.total_findings);
    }
  }
  if (r.total_outcome_findings == 0) {
    fmt::print("outcomes: pass\n");
  } else {
    fmt::print("outcomes: FAIL, {} finding{}\n", r.total_outcome_findings, r.total_outcome_findings == 1 ? "" : "s");
    PrintFindings(r.outcome_findings, r.total_outcome_findings);
  }
  const uint64_t skipped = r.cuts.size() - r.cuts_checked;
  fmt::print("{}: {} consistent cut{} checked, {} failed; {} not consistent, not checked\n", r.ok() ? "pass" : "FAIL",
             r.cuts_checked, r.cuts_checked == 1 ? "" : "s", r.cuts_failed, skipped);
}

int RunHistoryCheck(const HistoryOpts& o) {
  auto slack = walfmt::ParseDuration(o.clock_slack);
  if (!slack.ok()) return Fail(Status::InvalidArgument("--clock-slack: " + slack.status().message()));
  if (*slack > kMaxSlackUs) {
    return Fail(Status::InvalidArgument(fmt::format("--clock-slack: '{}': at most 1h", o.clock_slack)));
  }
  auto h = recovery::LoadHistory(o.history);
  if (!h.ok()) {
    // A history that cannot be found is a usage error, like a malformed one.
    if (h.status().code() == walfmt::ErrorCode::kNotFound) {
      return Fail(Status::InvalidArgument(fmt::format("{}: no such file", o.history)));
    }
    return Fail(h.status());
  }
  recovery::HistoryCheckOptions opt;
  opt.clock_slack_us = *slack;
  auto r = recovery::CheckClusterHistory(o.dir, std::move(*h), opt);
  if (!r.ok()) return Fail(r.status());
  if (o.format == Format::kJson) {
    PrintJson(o, *slack, *r);
  } else {
    PrintText(o, *r);
  }
  return r->ok() ? kExitOk : kExitFindings;
}

void RegisterHistory(CLI::App& root, Registry& reg) {
  CLI::App* hist = root.add_subcommand("history", "Check a real cluster against its clients' history (history check)");
  hist->require_subcommand(1);
  auto o = std::make_shared<HistoryOpts>();
  CLI::App* check = hist->add_subcommand(
      "check",
      "Check every consistent cut of a real cluster (walcut cluster up) against the clients' history\n"
      "(walcut load --history FILE): a transaction acknowledged before the cut started is in it on every\n"
      "participant; one started after the cut finished is in it nowhere; every transaction is all-or-nothing;\n"
      "the restore of the cut equals the initial data plus the writes of the history's transactions in it;\n"
      "the workload's invariants hold. Exit 0 all pass, 1 findings, 2 usage error, 3 I/O error.");
  check->add_option("dir", o->dir, "Cluster directory")->required();
  check->add_option("history", o->history, "The history (JSON lines, walcut load --history)")->required();
  check
      ->add_option("--clock-slack", o->clock_slack,
                   "Clock difference allowed between clients and nodes, taken in the safe direction (a duration)")
      ->capture_default_str();
  AddFormatOption(check, o->format);
  reg.Add(check, [o] { return RunHistoryCheck(*o); });
}

const CommandRegistrar kRegister{54, RegisterHistory};
}  // namespace

}  // namespace walcut::cli

// Level cuts of `walcut check` (recovery/check.h): from the reconstructed
// cuts, one item per check per cut and node, one status item per cut, and one
// item per node for what its WAL says outside any cut.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "recovery/check_internal.h"

namespace walcut::recovery::check_detail {
namespace {

// The checks reported per cut and node, and the cut::Finding::check that
// belongs to each.
struct CutCheckItem {
  const char* name;
  cut::Check finding;
  bool cut::CutChecks::*flag;
};
constexpr CutCheckItem kCutChecks[] = {
    {"atomicity", cut::Check::kAtomicity, &cut::CutChecks::atomicity},
    {"monotonicity", cut::Check::kMonotonicity, &cut::CutChecks::monotonicity},
    {"shape", cut::Check::kShape, &cut::CutChecks::shape},
    {"rollback", cut::Check::kRollback, &cut::CutChecks::rollback},
    {"completeness", cut::Check::kCompleteness, &cut::CutChecks::completeness},
    {"markers", cut::Check::kMarker, &cut::CutChecks::markers},
};

CheckFinding FromCutFinding(const cut::Finding& f) {
  CheckFinding c;
  c.check = cut::CheckName(f.check);
  c.node = f.node;
  if (f.cut) c.cut = f.cut;
  if (f.has_position) c.position = f.position;
  if (f.has_tx) c.tx = f.tx.ToString();
  c.expected = f.expected;
  c.found = f.found;
  c.message = f.message;
  return c;
}

// The last cut of a live cluster may simply not have finished everywhere
// yet: not a finding, unless it was asked for by name or a node's WAL stops
// at damage (then the WAL is what is wrong, and the cut cannot finish).
bool Excused(const cut::ClusterCuts& cc, const cut::GlobalCut& g, bool selected, bool last) {
  bool damaged = false;
  for (size_t i = 0; i < g.nodes.size() && i < cc.nodes.size(); ++i) {
    const bool finished = g.nodes[i] != nullptr && g.nodes[i]->finished;
    damaged = damaged || (!finished && cc.nodes[i].damaged);
  }
  return g.status == cut::CutStatus::kIncomplete && last && !selected && !damaged;
}

// One item per check and node, with the cut's findings of that check on that
// node; `used` marks the findings taken.
void NodeCheckItems(const cut::ClusterCuts& cc, const cut::GlobalCut& g, const std::string& group, bool excused,
                    std::vector<bool>& used, CheckReport& rep) {
  for (const CutCheckItem& cn : kCutChecks) {
    for (size_t i = 0; i < cc.nodes.size(); ++i) {
      CheckItem it = MakeItem(CheckLevel::kCuts, group, fmt::format("node {}: {}", i, cn.name));
      for (size_t f = 0; f < g.findings.size(); ++f) {
        if (g.findings[f].check == cn.finding && g.findings[f].node == i) {
          it.findings.push_back(FromCutFinding(g.findings[f]));
          used[f] = true;
        }
      }
      if (excused && std::string(cn.name) == "completeness") {
        for (const auto& f : it.findings) it.note += (it.note.empty() ? "" : "; ") + f.message;
        it.findings.clear();
      }
      it.outcome = it.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
      rep.items.push_back(std::move(it));
    }
  }
}

// The finding of a cut whose status is a finding, with its reason and the
// nearest consistent cuts.
CheckFinding StatusFinding(const cut::GlobalCut& g) {
  CheckFinding c;
  c.check = "status";
  c.cut = g.cut_id;
  c.expected = "consistent";
  c.found = cut::CutStatusName(g.status);
  c.consistent_before = g.consistent_before;
  c.consistent_after = g.consistent_after;
  c.message = fmt::format("cut {} is {}: {}; nearest consistent cut before: {}, after: {}", g.cut_id,
                          cut::CutStatusName(g.status), g.reason.empty() ? "no reason recorded" : g.reason,
                          g.consistent_before ? std::to_string(*g.consistent_before) : "none",
                          g.consistent_after ? std::to_string(*g.consistent_after) : "none");
  return c;
}

// The cut as a whole: its status, with the reason and the nearest
// consistent cuts; findings no per-node check took (the WAL ends before the
// cut finished, ...) and failed checks without a per-node finding land here.
CheckItem StatusItem(const cut::GlobalCut& g, const std::string& group, bool selected, bool excused,
                     const std::vector<bool>& used) {
  CheckItem st = MakeItem(CheckLevel::kCuts, group, "status");
  st.note = cut::CutStatusName(g.status);
  // An unavailable cut (its evidence lay in removed segments) is a note, not
  // a finding, unless it was asked for by name: then it cannot be checked.
  const bool bad = g.status == cut::CutStatus::kInconsistent || (g.status == cut::CutStatus::kIncomplete && !excused) ||
                   (g.status == cut::CutStatus::kUnavailable && selected);
  for (size_t f = 0; f < g.findings.size(); ++f) {
    if (!used[f]) st.findings.push_back(FromCutFinding(g.findings[f]));
  }
  if (g.status == cut::CutStatus::kUnavailable && !bad) {
    st.note = fmt::format("unavailable (not a finding; its evidence lies in removed segments): {}", g.reason);
  } else if (g.status == cut::CutStatus::kIncomplete && !bad) {
    // The last cut of a live cluster has not finished everywhere yet: that is
    // not a finding (it says so), unless it was asked for by name.
    st.note = fmt::format("incomplete (the last cut, still open; not a finding): {}", g.reason);
    st.findings.clear();
  } else if (bad) {
    st.findings.insert(st.findings.begin(), StatusFinding(g));
  }
  for (const CutCheckItem& cn : kCutChecks) {
    bool named = false;
    for (const auto& f : g.findings) named = named || f.check == cn.finding;
    if (!(g.checks.*cn.flag) && !named) {
      CheckFinding c;
      c.check = cn.name;
      c.cut = g.cut_id;
      c.expected = "pass";
      c.found = "fail";
      c.message = fmt::format("cut {}: check {} failed", g.cut_id, cn.name);
      st.findings.push_back(std::move(c));
    }
  }
  // Findings attached to a cut that is otherwise fine still fail it.
  st.outcome = st.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
  return st;
}

void CutItems(const cut::ClusterCuts& cc, const cut::GlobalCut& g, bool selected, bool last, CheckReport& rep) {
  const std::string group = fmt::format("cut-{}", g.cut_id);
  std::vector<bool> used(g.findings.size(), false);
  const bool excused = Excused(cc, g, selected, last);
  NodeCheckItems(cc, g, group, excused, used, rep);
  rep.items.push_back(StatusItem(g, group, selected, excused, used));
}

void ClusterWalItems(const cut::ClusterCuts& cc, CheckReport& rep) {
  for (const auto& s : cc.nodes) {
    CheckItem it = MakeItem(CheckLevel::kCuts, "cluster", fmt::format("node {}: wal", s.node));
    bool has_wal_finding = false;
    for (const auto& f : cc.findings) {
      if (f.node != s.node) continue;
      it.findings.push_back(FromCutFinding(f));
      has_wal_finding = has_wal_finding || f.check == cut::Check::kWal;
    }
    if (s.damaged && !has_wal_finding) {
      CheckFinding c;
      c.check = "wal";
      c.node = s.node;
      c.position = s.damage_at;
      c.message = s.damage;
      it.findings.insert(it.findings.begin(), std::move(c));
    }
    if (s.torn_tail) {
      it.note =
          fmt::format("ends in a torn record at {} ({} bytes; a crash artefact)", s.torn_at.ToString(), s.torn_bytes);
    }
    it.outcome = it.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
    rep.items.push_back(std::move(it));
  }
  // Findings about a node that is not in the summaries (should not happen).
  for (const auto& f : cc.findings) {
    if (f.node < cc.nodes.size()) continue;
    CheckItem it = MakeItem(CheckLevel::kCuts, "cluster", fmt::format("node {}: wal", f.node));
    it.outcome = ItemOutcome::kFail;
    it.findings.push_back(FromCutFinding(f));
    rep.items.push_back(std::move(it));
  }
}

}  // namespace

void RunCuts(const CheckOptions& opt, const cut::ClusterCuts& cc, CheckReport& rep) {
  rep.has_cuts = true;
  rep.window = cc.window;
  rep.epoch_unix_us = cc.epoch_unix_us;
  if (cc.window.any) {
    if (const auto* g = cc.Find(cc.window.earliest)) rep.window_earliest_time_us = g->finish_time_us;
    if (const auto* g = cc.Find(cc.window.latest)) rep.window_latest_time_us = g->finish_time_us;
  }
  for (const auto& g : cc.cuts) {
    ++rep.cuts_total;
    if (g.status == cut::CutStatus::kConsistent) ++rep.cuts_consistent;
    if (g.status == cut::CutStatus::kInconsistent) ++rep.cuts_inconsistent;
    if (g.status == cut::CutStatus::kIncomplete) ++rep.cuts_incomplete;
    if (g.status == cut::CutStatus::kUnavailable) ++rep.cuts_unavailable;
  }
  ClusterWalItems(cc, rep);
  for (size_t i = 0; i < cc.cuts.size(); ++i) {
    const auto& g = cc.cuts[i];
    if (opt.cut && g.cut_id != *opt.cut) continue;
    CutItems(cc, g, opt.cut.has_value(), i + 1 == cc.cuts.size(), rep);
  }
}

}  // namespace walcut::recovery::check_detail

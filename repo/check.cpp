// `walcut snapshot check REPO [NAME] [--restore]`: every file against its
// checksum, the chains, the continuity of the segments inside and across
// artifacts, the cut re-derived from each increment's own segments, and with
// --restore a trial restore through each chain with the workload invariants.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "recovery/invariants.h"
#include "recovery/state_set.h"
#include "repo/repository.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/file_io.h"
#include "walfmt/snapshot.h"
#include "walfmt/strings.h"
#include "walfmt/workload.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using walfmt::Result;
using walfmt::Status;

namespace {

RepoCheckItem& Add(RepoCheckReport& r, std::string level, std::string group, std::string name) {
  r.items.push_back(RepoCheckItem{std::move(level), std::move(group), std::move(name), false, false, "", {}});
  return r.items.back();
}

void Fail(RepoCheckItem& it, RepoFinding f) {
  it.failed = true;
  if (f.artifact.empty()) f.artifact = it.group;
  it.findings.push_back(std::move(f));
}

RepoFinding Finding(std::string check, std::string message) {
  RepoFinding f;
  f.check = std::move(check);
  f.message = std::move(message);
  return f;
}

void CheckFiles(const Artifact& a, RepoCheckReport& r) {
  std::set<std::string> listed;
  for (const auto& f : a.m.files) {
    listed.insert(f.path);
    RepoCheckItem& it = Add(r, "files", a.name, "file " + f.path);
    const std::string path = walfmt::JoinPath(a.dir, f.path);
    uint64_t bytes = 0;
    auto sum = Xxh3File(path, &bytes);
    if (!sum.ok()) {
      RepoFinding x = Finding(sum.status().code() == walfmt::ErrorCode::kNotFound ? "missing-file" : "read",
                              sum.status().code() == walfmt::ErrorCode::kNotFound
                                  ? fmt::format("{}: listed in the manifest but missing", path)
                                  : sum.status().message());
      x.file = path;
      Fail(it, std::move(x));
      continue;
    }
    ++r.files_checked;
    r.bytes_checked += bytes;
    if (bytes != f.bytes || *sum != f.xxh3_128) {
      RepoFinding x =
          Finding("checksum", fmt::format("{}: {} bytes with xxh3-128 {}, the manifest says {} bytes with {}", path,
                                          bytes, *sum, f.bytes, f.xxh3_128));
      x.file = path;
      x.expected = f.xxh3_128;
      x.found = *sum;
      Fail(it, std::move(x));
    }
  }
  RepoCheckItem& it = Add(r, "files", a.name, "no unlisted files");
  std::error_code ec;
  for (auto e = fs::recursive_directory_iterator(a.dir, ec); !ec && e != fs::recursive_directory_iterator();
       e.increment(ec)) {
    if (e->is_directory(ec)) continue;
    const std::string rel = fs::relative(e->path(), a.dir, ec).string();
    if (rel == kManifestFile || listed.count(rel)) continue;
    RepoFinding x =
        Finding("unlisted-file", fmt::format("{}: not listed in the manifest", walfmt::JoinPath(a.dir, rel)));
    x.file = walfmt::JoinPath(a.dir, rel);
    Fail(it, std::move(x));
  }
}

void CheckSnapFiles(const Artifact& a, RepoCheckReport& r) {
  RepoCheckItem& it = Add(r, "files", a.name, "snapshot files");
  for (const auto& n : a.m.nodes) {
    const std::string path =
        walfmt::JoinPath(a.dir, n.snap_file.empty() ? fmt::format("node-{}.snap", n.node) : n.snap_file);
    auto snap = walfmt::ReadSnapshotFile(path, [](std::string_view, std::string_view) {});
    if (!snap.ok()) {
      RepoFinding x = Finding("snapshot", fmt::format("{}: {}", path, snap.status().message()));
      x.file = path;
      x.node = n.node;
      Fail(it, std::move(x));
      continue;
    }
    if (snap->node_id != n.node || snap->fingerprint != n.fingerprint) {
      RepoFinding x =
          Finding("snapshot", fmt::format("{}: node {} fingerprint {:016x}, the manifest says node {} {:016x}", path,
                                          snap->node_id, snap->fingerprint, n.node, n.fingerprint));
      x.file = path;
      x.node = n.node;
      Fail(it, std::move(x));
    }
  }
}

void CheckContinuity(const Artifact& a, const RepoListing& l, RepoCheckReport& r) {
  RepoCheckItem& it = Add(r, "chain", a.name, "segments continuous");
  const Artifact* p = l.Find(a.m.parent);
  for (const auto& n : a.m.nodes) {
    std::vector<uint64_t> idx;
    for (const auto& s : n.segments) idx.push_back(std::strtoull(s.c_str(), nullptr, 16));
    auto bad = [&](std::string msg) {
      RepoFinding x = Finding("continuity", std::move(msg));
      x.node = n.node;
      Fail(it, std::move(x));
    };
    if (!n.has_wal || idx.empty()) {
      bad(fmt::format("node {}: the increment holds no WAL", n.node));
      continue;
    }
    if (idx.front() != n.wal_from.segment || idx.back() != n.wal_to.segment || n.first_segment != idx.front() ||
        n.last_segment != idx.back()) {
      bad(fmt::format("node {}: segments {:016X}..{:016X} do not cover the range {}..{}", n.node, idx.front(),
                      idx.back(), n.wal_from.ToString(), n.wal_to.ToString()));
    }
    for (size_t i = 1; i < idx.size(); ++i) {
      if (idx[i] != idx[i - 1] + 1) {
        bad(fmt::format("node {}: Missed WAL segment(s) {:016X}..{:016X} inside the artifact", n.node, idx[i - 1] + 1,
                        idx[i] - 1));
      }
    }
    if (p && p->status.ok()) {
      if (n.node >= p->m.nodes.size()) {
        bad(fmt::format("node {}: the parent {} has no such node", n.node, p->name));
      } else if (p->m.nodes[n.node].continue_from != n.wal_from) {
        bad(fmt::format("node {}: the WAL starts at {}, but the parent {} continues from {}", n.node,
                        n.wal_from.ToString(), p->name, p->m.nodes[n.node].continue_from.ToString()));
      }
    }
  }
}

void CheckCut(const Artifact& a, const RepoListing& l, RepoCheckReport& r, unsigned jobs) {
  const uint64_t k = *a.m.cut;
  const std::string group = a.name;
  cut::ClusterLayout layout;
  layout.dir = a.dir;
  layout.has_cluster_json = true;
  layout.cluster_id = a.m.cluster_id;
  for (size_t i = 0; i < a.m.nodes.size(); ++i)
    layout.wal_dirs.push_back(walfmt::JoinPath(a.dir, fmt::format("node-{}/wal", i)));
  cut::LoadOptions lo;
  lo.jobs = jobs;
  RepoCheckItem& st = Add(r, "cuts", group, fmt::format("cut {}: status", k));
  auto sums = cut::ScanCluster(layout, lo);
  if (!sums.ok()) {
    Fail(st, Finding("cut", fmt::format("{}: the artifact's WAL cannot be read: {}", a.dir, sums.status().message())));
    return;
  }
  // The parent's cut was verified when the parent was made: the increment's
  // WAL is checked against it (only what cut K adds to it is compared).
  cut::ReconstructOptions ro;
  const Artifact* parent = l.Find(a.m.parent);
  if (parent && parent->status.ok()) ro.attested_cut = parent->m.cut;
  auto cc = cut::Reconstruct(std::move(sums.value()), ro);
  if (!cc.ok()) {
    Fail(st, Finding("cut", fmt::format("{}: {}", a.dir, cc.status().message())));
    return;
  }
  const cut::GlobalCut* g = cc->Find(k);
  if (!g) {
    Fail(st, Finding("cut", fmt::format("cut {} is not in the artifact's own segments", k)));
    return;
  }
  if (g->status != cut::CutStatus::kConsistent) {
    RepoFinding x = Finding("cut", fmt::format("cut {} re-derived from the artifact's segments is {}: {}", k,
                                               cut::CutStatusName(g->status), g->reason));
    x.expected = "consistent";
    x.found = cut::CutStatusName(g->status);
    Fail(st, std::move(x));
  }
  struct CutCheck {
    const char* name;
    cut::Check finding;
    bool ok;
  };
  const CutCheck checks[] = {{"atomicity", cut::Check::kAtomicity, g->checks.atomicity},
                             {"monotonicity", cut::Check::kMonotonicity, g->checks.monotonicity},
                             {"shape", cut::Check::kShape, g->checks.shape},
                             {"rollback", cut::Check::kRollback, g->checks.rollback},
                             {"completeness", cut::Check::kCompleteness, g->checks.completeness},
                             {"markers", cut::Check::kMarker, g->checks.markers}};
  for (const auto& [name, finding, ok] : checks) {
    RepoCheckItem& it = Add(r, "cuts", group, fmt::format("cut {}: {}", k, name));
    if (ok) continue;
    for (const auto& f : g->findings) {
      if (f.check != finding) continue;
      RepoFinding x = Finding(name, f.message);
      x.node = f.node;
      x.expected = f.expected;
      x.found = f.found;
      Fail(it, std::move(x));
    }
    if (!it.failed) Fail(it, Finding(name, fmt::format("cut {}: check {} fails", k, name)));
  }
  RepoCheckItem& ev = Add(r, "cuts", group, fmt::format("cut {}: evidence", k));
  for (size_t i = 0; i < a.m.nodes.size() && i < g->nodes.size(); ++i) {
    const ArtifactNode& n = a.m.nodes[i];
    const cut::NodeCut* nc = g->nodes[i];
    if (!nc) {
      Fail(ev, Finding("evidence", fmt::format("node {}: no record of cut {} in the artifact", i, k)));
      continue;
    }
    auto cmp = [&](const char* what, const std::string& want, const std::string& got) {
      if (want == got) return;
      RepoFinding x =
          Finding("evidence",
                  fmt::format("node {}: {} is {} in the artifact's WAL, the manifest recorded {}", i, what, got, want));
      x.node = static_cast<uint32_t>(i);
      x.expected = want;
      x.found = got;
      Fail(ev, std::move(x));
    };
    cmp("CUT_START", n.cut_start.ToString(), nc->start.ToString());
    cmp("CUT_FINISH", n.cut_finish.ToString(), nc->finish.ToString());
    cmp("|before|", std::to_string(n.before), std::to_string(nc->before.size()));
    cmp("|after|", std::to_string(n.after), std::to_string(nc->after.size()));
  }
}

// The states restored through a chain against a synthetic full of the same cut
// (two independent ways to cut K must give the same fingerprints).
void CrossCheckFingerprints(const RepoListing& l, const Artifact& step, const std::string& dir, RepoCheckReport& r) {
  if (!step.m.cut) return;
  for (const auto& f : l.artifacts) {
    if (!f.status.ok() || f.name == step.name || f.m.source != "restore" || f.m.cut != step.m.cut ||
        f.m.cluster_id != step.m.cluster_id) {
      continue;
    }
    RepoCheckItem& it = Add(r, "restore", step.name, "fingerprints against " + f.name);
    for (const auto& n : f.m.nodes) {
      const std::string path = walfmt::JoinPath(dir, fmt::format("node-{}.snap", n.node));
      auto snap = walfmt::ReadSnapshotFile(path, [](std::string_view, std::string_view) {});
      if (!snap.ok()) {
        Fail(it, Finding("fingerprint", snap.status().message()));
        continue;
      }
      if (snap->fingerprint != n.fingerprint) {
        RepoFinding x = Finding("fingerprint",
                                fmt::format("node {}: cut {} restored through the chain of {} has "
                                            "fingerprint {:016x}, the synthetic full {} has {:016x}",
                                            n.node, *step.m.cut, step.name, snap->fingerprint, f.name, n.fingerprint));
        x.node = n.node;
        x.expected = walfmt::Hex16(n.fingerprint);
        x.found = walfmt::Hex16(snap->fingerprint);
        Fail(it, std::move(x));
      }
    }
  }
}

Status CheckInvariantsOf(const Artifact& last, const std::string& dir, RepoCheckItem& it) {
  auto cj = walfmt::ReadWholeFile(walfmt::JoinPath(last.dir, "cluster.json"), 64u << 20);
  if (!cj.ok()) return cj.status();
  auto info = walfmt::ParseClusterInfo(*cj, walfmt::JoinPath(last.dir, "cluster.json"));
  if (!info.ok()) return info.status();
  recovery::LoadOptions lo;
  lo.expected_nodes = info->nodes;
  auto set = recovery::LoadStateSet(dir, lo);
  if (!set.ok()) {
    Fail(it, Finding("restore", set.status().message()));
    return Status::Ok();
  }
  const auto rep = recovery::CheckInvariants(*info, recovery::StatesOf(*set), recovery::OptionsFor(info->workload));
  for (const auto& f : rep.findings) {
    RepoFinding x = Finding("invariants", f.message);
    x.node = f.node;
    x.expected = f.expected;
    x.found = f.found;
    Fail(it, std::move(x));
  }
  if (rep.ok()) {
    it.note = rep.bank_total ? fmt::format("invariants hold (bank total {})", *rep.bank_total) : "invariants hold";
  }
  return Status::Ok();
}

}  // namespace

uint64_t RepoCheckReport::Failed() const {
  uint64_t n = 0;
  for (const auto& i : items) n += i.failed;
  return n;
}

uint64_t RepoCheckReport::Findings() const {
  uint64_t n = 0;
  for (const auto& i : items) n += i.findings.size();
  return n;
}

walfmt::Outcome RepoCheckOutcome(const RepoCheckReport& r) {
  if (!r.errors.empty()) return walfmt::Outcome::kIo;
  return r.Failed() ? walfmt::Outcome::kFindings : walfmt::Outcome::kOk;
}

namespace {

// The artifacts to check: NAME and the chain it needs, else every one.
Result<std::vector<const Artifact*>> SelectArtifacts(const RepoListing& l, const RepoCheckOptions& o) {
  std::vector<const Artifact*> selected;
  if (o.name.empty()) {
    for (const auto& a : l.artifacts) selected.push_back(&a);
    return selected;
  }
  const Artifact* a = l.Find(o.name);
  if (!a) return Status::NotFound(fmt::format("{}: no artifact {}", o.repo, o.name));
  // The artifact and the chain it needs.
  std::set<std::string> seen;
  for (const Artifact* x = a; x && !seen.count(x->name);
       x = x->status.ok() && !x->m.full() ? l.Find(x->m.parent) : nullptr) {
    seen.insert(x->name);
    selected.insert(selected.begin(), x);
  }
  return selected;
}

// The checks of one artifact: its manifest and files, its chain, and its
// snapshot files (a full) or its continuity and cut (an increment). Whether
// every one passed.
bool CheckArtifact(const Artifact& a, const RepoListing& l, const RepoCheckOptions& o, RepoCheckReport& r) {
  r.artifacts.push_back(a.name);
  const size_t first_item = r.items.size();
  RepoCheckItem& man = Add(r, "files", a.name, "manifest");
  if (!a.status.ok()) {
    RepoFinding x = Finding("manifest", a.status.message());
    x.file = walfmt::JoinPath(a.dir, kManifestFile);
    Fail(man, std::move(x));
    return false;
  }
  CheckFiles(a, r);
  RepoCheckItem& ch = Add(r, "chain", a.name, "chain complete");
  auto chain = ChainOf(l, a.name);
  if (!chain.ok()) {
    Fail(ch, Finding("chain", chain.status().message()));
  } else {
    ch.note = "";
    for (const auto* c : *chain) ch.note += (ch.note.empty() ? "" : " <- ") + c->name;
  }
  const bool files_ok = std::none_of(r.items.begin() + static_cast<long>(first_item), r.items.end(),
                                     [](const RepoCheckItem& i) { return i.failed && i.level == "files"; });
  if (a.m.full()) {
    if (files_ok) CheckSnapFiles(a, r);
  } else {
    CheckContinuity(a, l, r);
    if (files_ok) {
      CheckCut(a, l, r, o.jobs);
    } else {
      RepoCheckItem& sk = Add(r, "cuts", a.name, fmt::format("cut {}: status", a.m.cut.value_or(0)));
      sk.skipped = true;
      sk.note = "skipped: the artifact's files fail their checksums";
    }
  }
  return std::none_of(r.items.begin() + static_cast<long>(first_item), r.items.end(),
                      [](const RepoCheckItem& i) { return i.failed; });
}

// A trial restore through the chain of `a` into a temporary directory, the
// invariants checked at each step not checked yet (`done`).
void TrialRestore(const Artifact& a, const RepoListing& l, const RepoCheckOptions& o, std::set<std::string>& done,
                  RepoCheckReport& r) {
  static std::atomic<int> counter{0};
  const std::string tmp =
      (fs::temp_directory_path() / fmt::format("walcut-repo-check-{}-{}", ::getpid(), counter.fetch_add(1))).string();
  std::error_code ec;
  fs::create_directories(tmp, ec);
  RepoRestoreRequest rq;
  rq.repo = o.repo;
  rq.name = a.name;
  rq.out = walfmt::JoinPath(tmp, "out");
  rq.jobs = o.jobs;
  rq.after_step = [&](const ChainStep& step, const std::string& dir) -> Status {
    if (done.count(step.artifact)) return Status::Ok();
    done.insert(step.artifact);
    RepoCheckItem& it = Add(r, "restore", step.artifact, "restore and invariants");
    ++r.restores;
    const Artifact& s = *l.Find(step.artifact);
    if (Status st = CheckInvariantsOf(s, dir, it); !st.ok()) return st;
    if (!s.m.full()) CrossCheckFingerprints(l, s, dir, r);
    return Status::Ok();
  };
  auto res = RestoreFromRepository(rq);
  if (!res.ok()) {
    if (res.status().code() == walfmt::ErrorCode::kIo || res.status().code() == walfmt::ErrorCode::kInternal) {
      r.errors.push_back(res.status().message());
    } else {
      RepoCheckItem& it = Add(r, "restore", a.name, "restore");
      Fail(it, Finding("restore", res.status().message()));
    }
  }
  fs::remove_all(tmp, ec);
}

// Restore every chain once, from its full through each increment, checking
// the invariants at each step: leaves (artifacts no selected one builds on),
// or NAME alone.
void TrialRestores(const std::vector<const Artifact*>& selected, const std::set<std::string>& healthy,
                   const RepoListing& l, const RepoCheckOptions& o, RepoCheckReport& r) {
  std::set<std::string> parents;
  for (const Artifact* a : selected) {
    if (a->status.ok() && !a->m.parent.empty()) parents.insert(a->m.parent);
  }
  std::set<std::string> done;
  for (const Artifact* a : selected) {
    if (parents.count(a->name) && o.name.empty()) continue;
    if (!o.name.empty() && a->name != o.name) continue;
    auto chain = ChainOf(l, a->name);
    bool chain_ok = chain.ok();
    if (chain_ok) {
      for (const auto* c : *chain) chain_ok = chain_ok && healthy.count(c->name);
    }
    if (!chain_ok) {
      RepoCheckItem& sk = Add(r, "restore", a->name, "restore");
      sk.skipped = true;
      sk.note = "skipped: the chain is broken or an artifact in it fails its checks";
      continue;
    }
    TrialRestore(*a, l, o, done, r);
  }
}

}  // namespace

Result<RepoCheckReport> CheckRepository(const RepoCheckOptions& o) {
  auto l = ListRepository(o.repo);
  if (!l.ok()) return l.status();
  RepoCheckReport r;
  r.dir = o.repo;
  auto selected = SelectArtifacts(*l, o);
  if (!selected.ok()) return selected.status();
  for (const auto& left : l->leftovers) {
    r.notes.push_back(
        fmt::format("{}: left by a create or expire that did not finish; not an artifact (ignored)", left));
  }
  std::set<std::string> healthy;  // artifacts whose own checks passed
  for (const Artifact* a : *selected) {
    if (CheckArtifact(*a, *l, o, r)) healthy.insert(a->name);
  }
  if (o.restore) TrialRestores(*selected, healthy, *l, o, r);
  return r;
}

}  // namespace walcut::repo

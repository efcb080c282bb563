// The base of a restore: the one a request names, checked against the WAL
// (genesis, a full snapshot, an earlier restore), the one chosen when none
// is named, and the verdict read from less than the whole WAL when the base
// allows it (recovery/restore.h).
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cut/evidence.h"
#include "recovery/restore.h"
#include "recovery/restore_node.h"
#include "walfmt/file_io.h"
#include "walfmt/snapshot.h"
#include "walfmt/text_escape.h"

namespace walcut::recovery {
namespace fs = std::filesystem;
using nlohmann::json;
using walfmt::Lsn;
using walfmt::Status;

namespace detail {

namespace {

walfmt::Result<std::string> ReadText(const std::string& path) {
  return walfmt::ReadWholeFile(path, walfmt::kMaxJsonFileBytes);
}

// The base rule of a partial restore: a restore output of a subset serves
// only a restore of the same subset (it lacks every other key); a whole
// one serves any, filtered as it is read.
Status CheckBaseSubset(const json& m, const std::string& origin, const std::string& base, const KeySubset& subset) {
  auto held = SubsetFromJson(m.contains("subset") || !m.contains("restore") ? m : m.at("restore"), origin);
  if (!held.ok()) return held.status();
  return BaseServesSubset(base, *held, subset);
}

// A restore output directory as the base: its manifest, its cut J (before
// the requested cut, consistent in this WAL) and where each node reads from.
Status ResolveRestored(const cut::ClusterCuts& cc, const RestoreRequest& req, const KeySubset& subset, BaseInfo& b,
                       std::vector<std::optional<CutRule>>& base_rules) {
  auto text = ReadText((fs::path(req.base) / "manifest.json").string());
  if (!text.ok()) return text.status();
  json m = walfmt::UnescapeJsonStrings(json::parse(*text, nullptr, false));
  const std::string origin = (fs::path(req.base) / "manifest.json").string();
  if (!IsRestoreManifest(m)) {
    return Status::Corruption(fmt::format("{}: not a walcut restore manifest", origin));
  }
  if (m.contains("forced") && m["forced"].get<bool>()) {
    return Status::InvalidArgument(
        fmt::format("{}: a forced restore of a cut that was not consistent cannot serve as a base", req.base));
  }
  if (Status st = CheckBaseSubset(m, origin, req.base, subset); !st.ok()) return st;
  b.kind = BaseKind::kRestored;
  b.cut = m["cut"].get<uint64_t>();
  b.name = fmt::format("cut-{}", b.cut);
  b.dir = req.base;
  if (b.cut >= req.cut) {
    return Status::InvalidArgument(
        fmt::format("base {} is a restore of cut {}, not before cut {}", req.base, b.cut, req.cut));
  }
  const cut::GlobalCut* g = cc.Find(b.cut);
  // A cut that cannot be checked here because older segments were removed
  // still serves when all of its evidence is present: the restore that
  // made the base checked it.
  if (!g || !(g->status == cut::CutStatus::kConsistent ||
              (g->status == cut::CutStatus::kUnavailable && cc.EvidenceComplete(*g)))) {
    return Status::InvalidArgument(
        fmt::format("base {} restored cut {}, which is not a consistent cut of this WAL", req.base, b.cut));
  }
  for (size_t i = 0; i < cc.nodes.size(); ++i) {
    base_rules[i] = RuleOf(*g->nodes[i]);
    b.position[i] = g->nodes[i]->ContinueFrom();
  }
  return Status::Ok();
}

// Reads every node's base file once (checked here, before anything is
// written; each node's job reads it again): the node's, the cluster's, and
// for a full snapshot the one the WAL recorded (same position, same
// fingerprint), which gives the position the node reads from.
Status CheckBaseFiles(const cut::ClusterCuts& cc, BaseInfo& b, std::vector<BaseFile>& files) {
  for (size_t i = 0; i < cc.nodes.size(); ++i) {
    const std::string file = (fs::path(b.dir) / fmt::format("node-{}.snap", i)).string();
    uint64_t entries = 0;
    auto snap = walfmt::ReadSnapshotFile(file, [&entries](std::string_view, std::string_view) { ++entries; });
    if (!snap.ok()) return Status::Corruption(snap.status().message());
    if (snap->node_id != i) {
      return Status::Corruption(fmt::format("{}: holds node {}, expected node {}", file, snap->node_id, i));
    }
    if (cc.nodes[i].cluster_known && snap->cluster_id != cc.nodes[i].cluster_id) {
      return Status::Corruption(fmt::format("{}: from cluster {:016x}, the WAL is from {:016x}", file, snap->cluster_id,
                                            cc.nodes[i].cluster_id));
    }
    if (b.kind == BaseKind::kFull && b.name.empty()) b.name = snap->name;
    if (b.kind == BaseKind::kFull) {
      const cut::SnapshotMark* mark = nullptr;
      for (const auto& s : cc.nodes[i].snapshots) {
        if (s.name == b.name && s.at == snap->wal_position) mark = &s;
      }
      if (!mark) {
        return Status::Corruption(fmt::format("{}: node {}'s WAL has no SNAPSHOT({}) record at {}", file, i, b.name,
                                              snap->wal_position.ToString()));
      }
      if (mark->fingerprint != snap->fingerprint) {
        return Status::Corruption(fmt::format("{}: fingerprint {:016x}, the SNAPSHOT record at {} says {:016x}", file,
                                              snap->fingerprint, mark->at.ToString(), mark->fingerprint));
      }
      b.position[i] = snap->wal_position;
    }
    files[i] = BaseFile{file, snap->fingerprint, entries};
  }
  return Status::Ok();
}

}  // namespace

walfmt::Result<BaseInfo> ResolveBase(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout,
                                     const RestoreRequest& req, const KeySubset& subset, std::vector<BaseFile>& files,
                                     std::vector<std::optional<CutRule>>& base_rules) {
  const size_t n = cc.nodes.size();
  BaseInfo b;
  b.position.assign(n, Lsn{});
  files.assign(n, {});
  base_rules.assign(n, std::nullopt);
  if (req.base.empty() || req.base == "genesis") {
    for (size_t i = 0; i < n; ++i) {
      if (cc.nodes[i].pruned) {
        return Status::InvalidArgument(fmt::format(
            "base genesis needs every node's WAL from 0/00000000, but node {}'s WAL starts at {} (segments before it "
            "were removed); use a full snapshot or an earlier restore as the base",
            i, cc.nodes[i].wal_start.ToString()));
      }
    }
    b.kind = BaseKind::kGenesis;
    b.name = "genesis";
    return b;
  }
  std::error_code ec;
  const fs::path named = fs::path(layout.dir) / "snapshots" / req.base;
  if (fs::exists(fs::path(req.base) / "manifest.json", ec)) {
    if (Status st = ResolveRestored(cc, req, subset, b, base_rules); !st.ok()) return st;
  } else if (req.base.find('/') == std::string::npos && fs::is_directory(named, ec)) {
    b.kind = BaseKind::kFull;
    b.name = req.base;
    b.dir = named.string();
  } else if (fs::is_directory(req.base, ec) && fs::exists(fs::path(req.base) / "node-0.snap", ec)) {
    // A snapshot directory given by its path: the name comes from node 0's file.
    b.kind = BaseKind::kFull;
    b.dir = req.base;
  } else {
    return Status::NotFound(fmt::format("base '{}': no snapshot {} and no restore output (manifest.json) at that path",
                                        req.base, named.string()));
  }
  if (Status st = CheckBaseFiles(cc, b, files); !st.ok()) return st;
  return b;
}

}  // namespace detail

const char* VerdictScanName(VerdictScan s) {
  switch (s) {
    case VerdictScan::kWhole:
      return "whole";
    case VerdictScan::kToCut:
      return "to-cut";
    case VerdictScan::kFromBase:
      return "from-base";
  }
  return "unknown";
}

namespace {

uint64_t BytesScanned(const cut::ClusterCuts& cc) {
  uint64_t b = 0;
  for (const auto& s : cc.nodes) b += s.bytes;
  return b;
}

bool ConsistentIn(const cut::ClusterCuts& cc, uint64_t k) {
  const cut::GlobalCut* g = cc.Find(k);
  return g != nullptr && g->status == cut::CutStatus::kConsistent;
}

// The WAL read from the base's positions confirms the base: its cut is there
// with all of its evidence, starts where the base's node files say, and
// continues from where the manifest says.
bool ConfirmsBase(const cut::ClusterCuts& cc, const RestoredBase& b) {
  const cut::GlobalCut* j = cc.Find(b.cut);
  if (j == nullptr || !cc.EvidenceComplete(*j) || j->nodes.size() != b.cut_start.size()) return false;
  if (j->status != cut::CutStatus::kConsistent && j->status != cut::CutStatus::kUnavailable) return false;
  for (size_t i = 0; i < j->nodes.size(); ++i) {
    if (j->nodes[i]->start != b.cut_start[i] || j->nodes[i]->ContinueFrom() != b.continue_from[i]) return false;
  }
  return true;
}

}  // namespace

std::optional<CutVerdict> ScanToCut(const cut::ClusterLayout& layout, uint64_t k, const std::string& base,
                                    const cut::LoadOptions& lo) {
  if (k == 0) return std::nullopt;
  const size_t n = layout.wal_dirs.size();
  cut::ReconstructOptions ro;
  ro.attested_cut = RestoredBaseCut(base);
  cut::LoadOptions opt = lo;
  opt.settle_cut = k;
  if (ro.attested_cut && *ro.attested_cut < k) {
    const auto b = ReadRestoredBase(base);
    if (b && b->continue_from.size() == n) {
      opt.from = b->continue_from;
      auto sums = cut::ScanCluster(layout, opt);
      if (sums.ok()) {
        auto cc = cut::Reconstruct(std::move(sums.value()), ro);
        if (cc.ok() && ConfirmsBase(*cc, *b)) {
          // Decided from the base on: consistent, or read again whole.
          if (!ConsistentIn(*cc, k)) return std::nullopt;
          const uint64_t bytes = BytesScanned(*cc);
          return CutVerdict{std::move(cc.value()), VerdictScan::kFromBase, bytes};
        }
      }
      opt.from.clear();
    }
  }
  auto sums = cut::ScanCluster(layout, opt);
  if (!sums.ok()) return std::nullopt;
  auto v = detail::VerdictOfScan(std::move(sums.value()), layout, ro);
  if (v && v->scan == VerdictScan::kToCut && !ConsistentIn(v->cuts, k)) return std::nullopt;
  return v;
}

std::optional<CutVerdict> detail::VerdictOfScan(std::vector<cut::NodeSummary> sums, const cut::ClusterLayout& layout,
                                                const cut::ReconstructOptions& ro) {
  // No node's scan stopped early: this was the whole WAL's scan (cut k is
  // the last, not in the WAL, or something before it stays unfinished).
  const bool whole = std::none_of(sums.begin(), sums.end(), [](const cut::NodeSummary& s) { return s.settled_cut; });
  auto cc = cut::Reconstruct(std::move(sums), ro);
  if (!cc.ok()) return std::nullopt;
  const uint64_t bytes = BytesScanned(*cc);
  // As `walcut cuts` reads a cluster directory (cut::ReadCuts): the
  // transactions behind a disagreement named.
  if (whole && !cut::NameDisagreements(*cc, layout).ok()) return std::nullopt;
  return CutVerdict{std::move(cc.value()), whole ? VerdictScan::kWhole : VerdictScan::kToCut, bytes};
}

walfmt::Result<BaseChoice> ChooseBaseFromSummaries(
    const cut::ClusterCuts& cc, uint64_t k, const std::function<std::string(const std::string&)>& files_missing) {
  const cut::GlobalCut* g = cc.Find(k);
  if (!g) return Status::NotFound(fmt::format("cut {} is not in the WAL", k));
  const size_t n = cc.nodes.size();
  std::string skipped;  // why the newest snapshot that could have served did not
  for (auto it = cc.snapshots.rbegin(); it != cc.snapshots.rend(); ++it) {
    const cut::SnapshotUse& u = *it;
    if (!u.usable) continue;
    bool before_start = true;
    for (size_t i = 0; i < n; ++i) {
      before_start &= g->nodes[i] != nullptr && g->nodes[i]->started && u.at[i] < g->nodes[i]->start;
    }
    if (!before_start) continue;
    if (files_missing) {
      if (const std::string missing = files_missing(u.name); !missing.empty()) {
        if (skipped.empty()) skipped = fmt::format("; full snapshot {} is in the WAL but {}", u.name, missing);
        continue;
      }
    }
    return BaseChoice{u.name,
                      fmt::format("the newest full snapshot taken before cut {} on every node, so the least WAL "
                                  "to read{}",
                                  k, skipped)};
  }
  if (!cc.pruned) {
    return BaseChoice{"genesis",
                      fmt::format("no full snapshot precedes cut {} on every node; the whole WAL from genesis "
                                  "is present{}",
                                  k, skipped)};
  }
  const cut::NodeSummary* first = nullptr;
  for (const auto& s : cc.nodes) {
    if (s.pruned && (!first || first->wal_start < s.wal_start)) first = &s;
  }
  return Status::InvalidArgument(fmt::format(
      "cut {} cannot be restored from this WAL alone: node {}'s WAL starts at {} (segments before it were removed) "
      "and no full snapshot every node's WAL still holds precedes the cut{}; give --base with an earlier restore "
      "output",
      k, first->node, first->wal_start.ToString(), skipped));
}

walfmt::Result<BaseChoice> ChooseBase(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout, uint64_t k) {
  const size_t n = cc.nodes.size();
  return ChooseBaseFromSummaries(cc, k, [&](const std::string& name) -> std::string {
    std::error_code ec;
    const fs::path dir = fs::path(layout.dir) / "snapshots" / name;
    bool files = true;
    for (size_t i = 0; i < n; ++i) files &= fs::is_regular_file(dir / fmt::format("node-{}.snap", i), ec);
    return files ? "" : fmt::format("{} lacks its files", dir.string());
  });
}

}  // namespace walcut::recovery

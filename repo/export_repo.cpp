// `walcut export --repo` (repo/repository.h, ExportFromRepository): the
// change set between two artifacts' cuts, from the increments between them.
#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "repo/export_repo.h"
#include "repo/increment.h"
#include "repo/repository.h"
#include "walfmt/file_io.h"
#include "walfmt/snapshot.h"
#include "walfmt/staging.h"
#include "walfmt/strings.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using walfmt::Result;
using walfmt::Status;

namespace {

using Written = std::map<std::string, std::optional<std::string>, std::less<>>;

// The chain of cut B's artifact, and where cut A's artifact is in it.
struct Span {
  std::vector<const Artifact*> chain;
  size_t from = 0;  // chain[from] is A's artifact
};

Result<Span> FindSpan(const RepoListing& l, const recovery::ExportRequest& e) {
  if (e.from_cut > e.to_cut) {
    return Status::InvalidArgument(
        fmt::format("--from-cut {} is after --to-cut {}: the change set runs from the earlier cut to the later one",
                    e.from_cut, e.to_cut));
  }
  if (e.from_cut == 0) {
    return Status::InvalidArgument(
        "--from-cut 0: a repository holds no genesis; export from the cut of an artifact, or from the cluster "
        "directory");
  }
  RepoRestoreRequest sel;
  sel.repo = l.dir;
  sel.cut = e.to_cut;
  auto target = SelectTarget(l, sel);
  if (!target.ok()) return target.status();
  auto chain = ChainOf(l, (*target)->name);
  if (!chain.ok()) return chain.status();
  Span s;
  s.chain = std::move(chain.value());
  std::string cuts;
  for (size_t j = s.chain.size(); j-- > 0;) {
    const auto& c = s.chain[j]->m.cut;
    if (c) cuts += fmt::format("{}{} ({})", cuts.empty() ? "" : ", ", *c, s.chain[j]->name);
    if (c && *c == e.from_cut) {
      s.from = j;
      return s;
    }
  }
  return Status::InvalidArgument(
      fmt::format("--from-cut {}: no artifact of cut {} in the chain of {} (its cuts: {}); export between the cuts "
                  "of one chain's artifacts, or from the cluster directory",
                  e.from_cut, e.from_cut, (*target)->name, cuts));
}

// One increment's change set, from its parent's cut to its own.
Result<recovery::ExportResult> ExportIncrement(const Artifact& a, const Artifact& parent,
                                               const recovery::ExportRequest& e) {
  auto cc = IncrementCuts(a, parent.m.cut, e.jobs);
  if (!cc.ok()) return cc.status();
  recovery::ExportRequest sub = e;
  sub.from_cut = *parent.m.cut;
  sub.to_cut = *a.m.cut;
  sub.net = false;
  sub.keep_written = e.net;
  sub.from_attested = true;
  auto r = recovery::Export(*cc, LayoutOfIncrement(a), sub);
  if (!r.ok() && r.status().code() == walfmt::ErrorCode::kInvalidArgument) {
    // Inside a repository a refusal is a finding about the artifact, as for a restore.
    return Status::Corruption(fmt::format("artifact {}: {}", a.name, r.status().message()));
  }
  return r;
}

// The values at A of the keys written, node by node: A's artifact restored
// into a temporary directory, its node files read through, keeping only those keys.
Status OldValues(const RepoExportRequest& req, const Span& s, const std::vector<Written>& written,
                 const std::vector<uint32_t>& nodes, std::vector<std::map<std::string, std::string>>& old) {
  std::error_code ec;
  const std::string work = req.work.empty() ? fs::temp_directory_path(ec).string() : req.work;
  const std::string dir = walfmt::TempNameBeside(walfmt::JoinPath(work, "walcut-export-base"));
  walfmt::RegisterStaging(dir);
  RepoRestoreRequest rr;
  rr.repo = req.repo;
  rr.name = s.chain[s.from]->name;
  rr.out = dir;
  rr.jobs = req.exp.jobs;
  if (s.from > 0) rr.subset = req.exp.subset;  // a full alone is copied whole
  auto restored = RestoreFromRepository(rr);
  Status st = restored.status();
  for (size_t x = 0; st.ok() && x < nodes.size(); ++x) {
    if (written[x].empty()) continue;
    const std::string file = walfmt::JoinPath(dir, fmt::format("node-{}.snap", nodes[x]));
    auto snap = walfmt::ReadSnapshotFile(file, [&](std::string_view k, std::string_view v) {
      if (written[x].find(k) != written[x].end()) old[x].emplace(k, v);
    });
    st = snap.status();
  }
  walfmt::RemoveStaging(dir);
  return st;
}

// Adds one increment's counts, keys and transactions to the whole.
void Join(recovery::ExportResult& part, recovery::ExportResult& r, std::vector<Written>& written,
          std::vector<recovery::ExportTx>& txs) {
  if (r.nodes.empty()) {
    for (const auto& n : part.nodes) {
      auto& ne = r.nodes.emplace_back();
      ne.node = n.node;
      ne.from = n.from;
    }
    written.resize(r.nodes.size());
  }
  for (size_t x = 0; x < part.nodes.size() && x < r.nodes.size(); ++x) {
    auto& n = part.nodes[x];
    auto& ne = r.nodes[x];
    ne.to = n.to;
    ne.txs += n.txs;
    ne.writes += n.writes;
    ne.bytes_read += n.bytes_read;
    for (auto& [k, v] : n.written) written[x].insert_or_assign(k, std::move(v));
  }
  r.bytes_read += part.bytes_read;
  txs.insert(txs.end(), std::make_move_iterator(part.txs.begin()), std::make_move_iterator(part.txs.end()));
}

}  // namespace

Result<recovery::ExportResult> ExportFromRepository(const RepoExportRequest& req) {
  const recovery::ExportRequest& e = req.exp;
  if (IsEncryptedRepository(req.repo)) {
    return Status::InvalidArgument(fmt::format(
        "export --repo {}: the repository is encrypted, and export reads increments' segments where they lie without "
        "decrypting them; export from the cluster's WAL instead (restore --repo --encrypt-key-file reads it)",
        req.repo));
  }
  auto l = ListRepository(req.repo);
  if (!l.ok()) return l.status();
  auto span = FindSpan(*l, e);
  if (!span.ok()) return span.status();
  recovery::ExportResult r;
  r.from_cut = e.from_cut;
  r.to_cut = e.to_cut;
  r.subset = e.subset;
  r.base_a.kind = recovery::BaseKind::kRestored;
  r.base_a.name = span->chain[span->from]->name;
  r.base_why = "the artifact of the cut in the repository";
  std::vector<Written> written;
  std::vector<recovery::ExportTx> txs;
  for (size_t j = span->from + 1; j < span->chain.size(); ++j) {
    auto part = ExportIncrement(*span->chain[j], *span->chain[j - 1], e);
    if (!part.ok()) return part.status();
    Join(*part, r, written, txs);
  }
  std::vector<uint32_t> nodes;
  for (const auto& ne : r.nodes) nodes.push_back(ne.node);
  for (size_t x = 0; x < r.nodes.size(); ++x) r.nodes[x].keys_written = written[x].size();
  if (e.net && !nodes.empty()) {
    std::vector<std::map<std::string, std::string>> old(nodes.size());
    if (Status st = OldValues(req, *span, written, nodes, old); !st.ok()) return st;
    for (size_t x = 0; x < nodes.size(); ++x) {
      for (auto& [key, now] : written[x]) {
        std::optional<std::string> was;
        if (auto it = old[x].find(key); it != old[x].end()) was = it->second;
        if (was != now) r.nodes[x].changes.push_back({key, std::move(was), std::move(now)});
      }
    }
  }
  if (e.by_transaction) {
    // An increment's transactions, merged over its nodes; those of the
    // increments after it can share a transaction id only if it committed on
    // some node in each, which a consistent cut rules out.
    auto order = recovery::OrderTransactions(txs);
    if (!order.ok()) return order.status();
    r.order = *order;
    r.txs = std::move(txs);
  }
  return r;
}

}  // namespace walcut::repo

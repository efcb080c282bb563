#include "recovery/part.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "recovery/restore_node.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/duration.h"
#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"
#include "walfmt/reader.h"
#include "walfmt/segment.h"
#include "walfmt/snapshot.h"
#include "walfmt/source.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"

namespace walcut::recovery {
namespace fs = std::filesystem;
using nlohmann::json;
using walfmt::Lsn;
using walfmt::Status;
using walfmt::TxId;

namespace {

// The header of the first segment of a WAL directory: whose WAL it is.
walfmt::Result<walfmt::SegmentHeader> FirstHeader(const walfmt::SegmentFile& seg) {
  auto src = walfmt::OpenSegmentSource(seg.path, seg.compressed);
  if (!src.ok()) return src.status();
  const uint8_t* p = nullptr;
  size_t got = 0;
  if (Status st = (*src)->Get(0, walfmt::kSegmentHeaderSize, p, got); !st.ok()) return st;
  walfmt::SegmentHeader h;
  walfmt::HeaderError err;
  if (got < walfmt::kSegmentHeaderSize || !DecodeSegmentHeader({p, got}, h, err)) {
    return Status::Corruption(fmt::format("{}: segment header unusable: {}", seg.path,
                                          got < walfmt::kSegmentHeaderSize ? "file too short" : err.what));
  }
  return h;
}

// The records the verdict places in [from, to] on this node, by position.
std::vector<detail::ExpectedRecord> Expectations(const Verdict& v, const VerdictNode& n, Lsn from, Lsn to) {
  std::vector<detail::ExpectedRecord> out;
  auto in_range = [&](Lsn at) { return !(at < from) && !(to < at); };
  if (v.base_kind == BaseKind::kFull) {
    detail::ExpectedRecord e;
    e.at = n.from;
    e.type = walfmt::RecordType::kSnapshot;
    e.snapshot = v.base_name;
    e.fingerprint = n.snapshot_fingerprint;
    e.what = fmt::format("SNAPSHOT({}) with fingerprint {}", v.base_name, walfmt::Hex16(n.snapshot_fingerprint));
    out.push_back(std::move(e));
  }
  if (n.started && in_range(n.start)) {
    detail::ExpectedRecord e;
    e.at = n.start;
    e.type = walfmt::RecordType::kCutStart;
    e.cut = v.cut;
    e.what = fmt::format("CUT_START({})", v.cut);
    out.push_back(std::move(e));
  }
  if (n.finished && in_range(n.finish)) {
    detail::ExpectedRecord e;
    e.at = n.finish;
    e.type = walfmt::RecordType::kCutFinish;
    e.cut = v.cut;
    for (const auto& t : n.before) e.before.push_back(t.tx);
    for (const auto& t : n.after) e.after.push_back(t.tx);
    std::sort(e.before.begin(), e.before.end());
    std::sort(e.after.begin(), e.after.end());
    e.what = fmt::format("CUT_FINISH({}) tracking {} before / {} after", v.cut, e.before.size(), e.after.size());
    out.push_back(std::move(e));
  }
  for (const auto* list : {&n.before, &n.after}) {
    for (const auto& t : *list) {
      if (t.committed && in_range(t.commit)) {
        detail::ExpectedRecord e;
        e.at = t.commit;
        e.type = walfmt::RecordType::kTxCommit;
        e.tx = t.tx;
        e.marker = t.marker;
        e.what = fmt::format("TX_COMMIT of {} (marker {})", t.tx.Readable(), t.marker);
        out.push_back(std::move(e));
      }
      if (t.rolled_back && in_range(t.commit)) {
        detail::ExpectedRecord e;
        e.at = t.commit;
        e.type = walfmt::RecordType::kTxRollback;
        e.tx = t.tx;
        e.what = fmt::format("TX_ROLLBACK of {}", t.tx.Readable());
        out.push_back(std::move(e));
      }
      if ((t.committed || t.rolled_back) && !(t.first_seen == cut::kFirstSeenPruned) && in_range(t.first_seen)) {
        detail::ExpectedRecord e;
        e.at = t.first_seen;
        e.data_or_prepare = true;
        e.tx = t.tx;
        e.what = fmt::format("the first record (TX_DATA or TX_PREPARE) of {}", t.tx.Readable());
        out.push_back(std::move(e));
      }
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const detail::ExpectedRecord& a, const detail::ExpectedRecord& b) { return a.at < b.at; });
  // One expectation per position (a record cannot be two things; the first wins).
  out.erase(std::unique(out.begin(), out.end(),
                        [](const detail::ExpectedRecord& a, const detail::ExpectedRecord& b) { return a.at == b.at; }),
            out.end());
  return out;
}

walfmt::Result<std::string> ReadText(const std::string& path) {
  return walfmt::ReadWholeFile(path, walfmt::kMaxJsonFileBytes);
}

// The verdict covers node I, says cut K is consistent (or forced), and the
// node started (and finished) it; OUT is new.
Status CheckPartRequest(const PartRequest& req) {
  const Verdict& v = *req.verdict;
  const size_t n = v.nodes.size();
  if (req.node >= n) {
    return Status::InvalidArgument(
        fmt::format("the verdict (cut {}) covers nodes 0..{}; there is no node {}", v.cut, n - 1, req.node));
  }
  if (v.status != cut::CutStatus::kConsistent && !req.force) {
    return Status::Corruption(fmt::format("cut {} is {}: {}; refusing to restore it without --force", v.cut,
                                          cut::CutStatusName(v.status), v.reason));
  }
  const VerdictNode& vn = v.nodes[req.node];
  if (!vn.started) {
    return Status::InvalidArgument(
        fmt::format("cut {} has no CUT_START on node {}: there is nothing to restore that node to", v.cut, req.node));
  }
  if (!vn.finished && !req.force) {
    return Status::InvalidArgument(fmt::format("cut {} has no CUT_FINISH on node {}", v.cut, req.node));
  }
  std::error_code ec;
  if (!req.dry_run && !req.out.empty() && fs::exists(req.out, ec)) {
    return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", req.out));
  }
  return Status::Ok();
}

// This node's WAL: node I's, from the verdict's cluster, holding the range.
// Returns its first segment's header.
walfmt::Result<walfmt::SegmentHeader> CheckNodeWal(const PartRequest& req) {
  const Verdict& v = *req.verdict;
  const VerdictNode& vn = v.nodes[req.node];
  std::vector<walfmt::Problem> problems;
  auto listed = walfmt::ListSegments(req.wal_dir, [&](const walfmt::Problem& p) { problems.push_back(p); });
  if (!listed.ok()) return listed.status();
  if (listed->empty()) return Status::NotFound(fmt::format("{}: no WAL segments", req.wal_dir));
  auto head = FirstHeader(listed->front());
  if (!head.ok()) return head.status();
  if (head->node_id != req.node) {
    return Status::InvalidArgument(fmt::format("{}: holds node {}'s WAL (segment {}), not node {}'s", req.wal_dir,
                                               head->node_id, listed->front().path, req.node));
  }
  if (v.cluster_known && head->cluster_id != v.cluster_id) {
    return Status::InvalidArgument(fmt::format("{}: the WAL is from cluster {}, the verdict is for cluster {}",
                                               req.wal_dir, walfmt::Hex16(head->cluster_id),
                                               walfmt::Hex16(v.cluster_id)));
  }
  if (listed->front().index > vn.from.segment) {
    return Status::InvalidArgument(
        fmt::format("{}: node {}'s WAL starts at segment {}, but the restore of cut {} from base {} reads from {}",
                    req.wal_dir, req.node, listed->front().index, v.cut, v.base_name, vn.from.ToString()));
  }
  return head;
}

// A full base: node I's file in req.base_dir, the snapshot the verdict
// names (node, cluster, name, position, fingerprint). A file that is not
// there is kNotFound (a path that names nothing), naming it.
Status CheckPartBase(const PartRequest& req, const walfmt::SegmentHeader& head, detail::NodeJob& job) {
  const Verdict& v = *req.verdict;
  const VerdictNode& vn = v.nodes[req.node];
  if (req.base_dir.empty()) {
    return Status::InvalidArgument(fmt::format(
        "the verdict's base is full snapshot {}: give the directory holding its node-{}.snap", v.base_name, req.node));
  }
  const std::string file = (fs::path(req.base_dir) / fmt::format("node-{}.snap", req.node)).string();
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    return Status::NotFound(
        fmt::format("{}: no such file (the base file of node {}: full snapshot {})", file, req.node, v.base_name));
  }
  uint64_t entries = 0;
  auto snap = walfmt::ReadSnapshotFile(file, [&entries](std::string_view, std::string_view) { ++entries; });
  if (!snap.ok()) return Status::Corruption(snap.status().message());
  if (snap->node_id != req.node) {
    return Status::InvalidArgument(fmt::format("{}: holds node {}, expected node {}", file, snap->node_id, req.node));
  }
  if (snap->cluster_id != head.cluster_id) {
    return Status::InvalidArgument(fmt::format("{}: from cluster {}, the WAL is from {}", file,
                                               walfmt::Hex16(snap->cluster_id), walfmt::Hex16(head.cluster_id)));
  }
  if (snap->name != v.base_name || snap->wal_position != vn.from) {
    return Status::InvalidArgument(fmt::format("{}: snapshot {} taken at {}, the verdict's base is {} at {}", file,
                                               snap->name, snap->wal_position.ToString(), v.base_name,
                                               vn.from.ToString()));
  }
  if (snap->fingerprint != vn.snapshot_fingerprint) {
    return Status::InvalidArgument(fmt::format("{}: fingerprint {}, the verdict's SNAPSHOT record says {}", file,
                                               walfmt::Hex16(snap->fingerprint),
                                               walfmt::Hex16(vn.snapshot_fingerprint)));
  }
  job.base_file = file;
  job.base_fingerprint = snap->fingerprint;
  job.out.base_entries = entries;
  return Status::Ok();
}

// Node I's job: cut K's rule, the range, what the WAL must hold in it.
detail::NodeJob PlanPartJob(const PartRequest& req) {
  const Verdict& v = *req.verdict;
  const VerdictNode& vn = v.nodes[req.node];
  detail::NodeJob job;
  job.node = req.node;
  job.wal_dir = req.wal_dir;
  cut::NodeCut nc;
  nc.cut_id = v.cut;
  nc.started = vn.started;
  nc.start = vn.start;
  nc.finished = vn.finished;
  nc.finish = vn.finish;
  nc.before = vn.before;
  nc.after = vn.after;
  job.k = detail::RuleOf(nc);
  NodeRestore& o = job.out;
  o.node = req.node;
  o.from = vn.from;
  o.to = vn.finished ? vn.finish : vn.start;
  o.cut_start = vn.start;
  o.cut_start_time_us = vn.start_time_us;
  o.continue_from = nc.ContinueFrom();
  for (const auto& s : vn.segments) o.segments.push_back(s);
  job.expect = Expectations(v, vn, vn.from, o.to);
  job.origin = fmt::format("the verdict (cut {})", v.cut);
  job.check_identity = true;
  job.expect_cluster = v.cluster_known;
  job.cluster_id = v.cluster_id;
  job.keep_state = req.out.empty() && !req.dry_run;
  return job;
}

// The node file is staged beside OUT (locked) until WritePart.
Status StagePart(const PartRequest& req, RestoreResult& r, detail::NodeJob& job) {
  if (req.dry_run || req.out.empty()) return Status::Ok();
  const Verdict& v = *req.verdict;
  const VerdictNode& vn = v.nodes[req.node];
  auto staged = walfmt::BeginStagedDir(req.out);
  if (!staged.ok()) return staged.status();
  r.out_lock = staged->lock;
  const fs::path stage = staged->dir;
  r.stage_dir = stage.string();
  job.stage_file = (stage / fmt::format("node-{}.snap", req.node)).string();
  job.header.node_id = req.node;
  job.header.cluster_id = v.file_cluster_id;
  job.header.wal_position = vn.start;
  job.header.time_us = vn.start_time_us;
  job.header.name = fmt::format("cut-{}", v.cut);
  return Status::Ok();
}

}  // namespace

walfmt::Result<RestoreResult> RestorePart(const PartRequest& req) {
  if (Status st = CheckPartRequest(req); !st.ok()) return st;
  const Verdict& v = *req.verdict;
  const VerdictNode& vn = v.nodes[req.node];
  auto head = CheckNodeWal(req);
  if (!head.ok()) return head.status();

  RestoreResult r;
  r.cut = v.cut;
  r.status = v.status;
  r.reason = v.reason;
  r.base.kind = v.base_kind;
  r.base.name = v.base_name;
  r.base.position.assign(v.nodes.size(), Lsn{});
  r.base.position[req.node] = vn.from;
  r.cluster_json = v.cluster_json;

  detail::NodeJob job = PlanPartJob(req);
  if (v.base_kind == BaseKind::kFull && !(req.wal_only && req.dry_run)) {
    if (Status st = CheckPartBase(req, *head, job); !st.ok()) return st;
    r.base.dir = req.base_dir;
  }
  if (Status st = StagePart(req, r, job); !st.ok()) return st;
  auto drop_stage = [&] {
    if (!r.stage_dir.empty()) {
      walfmt::RemoveStaging(r.stage_dir);
      r.stage_dir.clear();
    }
  };
  Status st;
  try {
    st = detail::RunNode(job, req.dry_run, req.progress);
  } catch (...) {
    drop_stage();
    throw;
  }
  const NodeRestore& o = job.out;
  if (st.ok() && vn.has_transactions && v.status == cut::CutStatus::kConsistent && o.txs_applied != vn.transactions) {
    st = Status::InvalidArgument(fmt::format(
        "node {}: the WAL range {}..{} holds {} transactions of cut {}, the summaries count {}: they do not describe "
        "this WAL",
        req.node, o.from.ToString(), o.to.ToString(), o.txs_applied, v.cut, vn.transactions));
  }
  if (!st.ok()) {
    drop_stage();
    return st;
  }
  r.bytes_read = job.out.bytes_to_read;
  r.nodes.push_back(std::move(job.out));
  return r;
}

walfmt::Result<PartBaseArg> ReadPartBaseArg(const std::string& arg, uint32_t node, bool read_name) {
  PartBaseArg a;
  std::error_code ec;
  if (arg.empty() || arg == "genesis" || (arg.find('/') == std::string::npos && !fs::is_directory(arg, ec))) {
    a.name = arg;
    return a;
  }
  a.dir = arg;
  const std::string file = (fs::path(arg) / fmt::format("node-{}.snap", node)).string();
  if (!fs::exists(file, ec)) {
    return Status::NotFound(fmt::format("{}: no such file (--base {} holds no base file of node {})", file, arg, node));
  }
  if (!read_name) return a;
  auto snap = walfmt::ReadSnapshotFile(file, [](std::string_view, std::string_view) {});
  if (!snap.ok()) return Status::Corruption(snap.status().message());
  a.name = snap->name;
  return a;
}

walfmt::Result<std::string> PartBaseDir(const Verdict& v, const PartBaseArg& arg, const std::string& snapshots_root) {
  if (v.base_kind != BaseKind::kFull) {
    if (!arg.dir.empty() || (!arg.name.empty() && arg.name != "genesis")) {
      return Status::InvalidArgument(
          fmt::format("--base {}: the verdict's base is genesis", arg.dir.empty() ? arg.name : arg.dir));
    }
    return std::string();
  }
  if (!arg.dir.empty()) return arg.dir;
  if (!arg.name.empty() && arg.name != v.base_name) {
    return Status::InvalidArgument(
        fmt::format("--base {}: the verdict's base is full snapshot {}", arg.name, v.base_name));
  }
  return (fs::path(snapshots_root) / v.base_name).string();
}

walfmt::Status WritePart(RestoreResult& r, const Verdict& v, const std::string& out) {
  std::error_code ec;
  if (r.stage_dir.empty() || r.nodes.size() != 1) {
    return Status::Internal("WritePart: not the staged result of RestorePart");
  }
  auto fail = [&](Status st) {
    walfmt::RemoveStaging(r.stage_dir);
    r.stage_dir.clear();
    return st;
  };
  if (fs::exists(out, ec))
    return fail(Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", out)));
  const NodeRestore& nr = r.nodes.front();
  json m;
  m["schema"] = kPartSchema;
  m["cut"] = r.cut;
  m["status"] = cut::CutStatusName(r.status);
  m["forced"] = r.status != cut::CutStatus::kConsistent;
  if (r.status != cut::CutStatus::kConsistent) m["problem"] = r.reason;
  m["verdict"] = v.id;
  m["node"] = nr.node;
  m["nodes"] = v.nodes.size();
  m["cluster_id"] = walfmt::Hex16(v.file_cluster_id);
  m["base"] = {{"kind", BaseKindName(r.base.kind)}, {"name", r.base.name}};
  if (!r.base.dir.empty()) m["base"]["dir"] = r.base.dir;
  m["entry"] = detail::NodeEntryJson(nr);
  // The record time as UTC too when the cluster records its epoch, as in
  // the whole-cluster manifest (restore.cpp).
  if (!r.cluster_json.empty()) {
    auto ci = walfmt::ParseClusterInfo(r.cluster_json, "cluster.json");
    const walfmt::ClusterClock clock{ci.ok() ? ci->epoch_unix_us : std::nullopt};
    m["entry"]["cut_start_time"] = clock.Format(nr.cut_start_time_us);
  }
  m["bytes_read"] = nr.bytes_to_read;
  if (!r.cluster_json.empty()) m["cluster_json"] = r.cluster_json;
  const fs::path tmp(r.stage_dir);
  if (Status st = walfmt::WriteNewFile((tmp / "manifest.json").string(), walfmt::DumpJson(m, 2) + "\n"); !st.ok())
    return fail(st);
  if (Status st = walfmt::SyncDir(tmp.string()); !st.ok()) return fail(st);
  if (Status st = walfmt::CommitStaging(tmp.string(), fs::absolute(out, ec).string()); !st.ok()) return fail(st);
  r.stage_dir.clear();
  r.out_lock.reset();
  return Status::Ok();
}

namespace {

// One part as its manifest describes it.
struct Part {
  std::string dir;
  uint64_t cut = 0;
  std::string status;
  std::string problem;
  std::string verdict;
  uint32_t node = 0;
  uint64_t nodes = 0;
  std::string cluster_id;
  uint64_t cluster_id_value = 0;
  std::string base_kind;
  std::string base_name;
  std::string cluster_json;
  NodeRestore entry;
};

walfmt::Result<Part> ReadPart(const std::string& dir) {
  const std::string path = (fs::path(dir) / "manifest.json").string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound(fmt::format("{}: no such directory", dir));
  if (!fs::exists(path, ec)) {
    return Status::InvalidArgument(fmt::format("{}: not a per-node restore (no manifest.json)", dir));
  }
  auto text = ReadText(path);
  if (!text.ok()) return text.status();
  const json m = walfmt::UnescapeJsonStrings(json::parse(*text, nullptr, false));
  auto bad = [&](const std::string& what) { return Status::InvalidArgument(fmt::format("{}: {}", path, what)); };
  if (!m.is_object()) return bad("not JSON");
  if (m.value("schema", json()) != json(kPartSchema) && m.value("format", json()) != json(kPartFormatV1)) {
    const bool whole = m.value("schema", json()) == json(kRestoreManifestSchema) ||
                       m.value("format", json()) == json(kRestoreManifestFormatV1);
    return bad(fmt::format("not a per-node restore manifest (schema is not {}){}", kPartSchema,
                           whole ? ": it is a whole restore already" : ""));
  }
  Part p;
  p.dir = dir;
  walfmt::JsonFields f(path);
  p.cut = f.U64(m, "cut", "");
  p.status = f.String(m, "status", "");
  p.problem = f.OptionalString(m, "problem", "").value_or("");
  p.verdict = f.String(m, "verdict", "");
  p.node = f.U32(m, "node", "");
  p.nodes = f.U64(m, "nodes", "");
  p.cluster_id_value = f.Hex16(m, "cluster_id", "");
  p.cluster_id = walfmt::Hex16(p.cluster_id_value);
  if (const json* b = f.Object(m, "base", "")) {
    p.base_kind = f.String(*b, "kind", "base");
    p.base_name = f.String(*b, "name", "base");
  }
  p.cluster_json = f.OptionalString(m, "cluster_json", "").value_or("");
  if (const json* e = f.Object(m, "entry", "")) {
    NodeRestore& nr = p.entry;
    nr.node = f.U32(*e, "node", "entry");
    nr.fingerprint = f.Hex16(*e, "fingerprint", "entry");
    nr.entries = f.U64(*e, "entries", "entry");
    nr.from = f.Position(*e, "wal_from", "entry");
    nr.to = f.Position(*e, "wal_to", "entry");
    nr.cut_start = f.Position(*e, "cut_start", "entry");
    nr.cut_start_time_us = f.OptionalU64(*e, "cut_start_time_us", "entry").value_or(0);
    nr.continue_from = f.Position(*e, "continue_from", "entry");
    nr.txs_applied = f.U64(*e, "txs_applied", "entry");
    nr.txs_skipped = f.U64(*e, "txs_skipped", "entry");
    nr.writes_applied = f.U64(*e, "writes_applied", "entry");
  }
  if (!f.ok()) return Status::InvalidArgument(f.error());
  if (p.entry.node != p.node)
    return bad(fmt::format("names node {} and holds an entry of node {}", p.node, p.entry.node));
  if (p.node >= p.nodes) return bad(fmt::format("node {} of a cluster of {} nodes", p.node, p.nodes));
  return p;
}

}  // namespace

walfmt::Result<RestoreResult> AssembleParts(const std::vector<std::string>& parts, const std::string& out) {
  std::error_code ec;
  if (parts.empty()) return Status::InvalidArgument("no parts to assemble");
  if (fs::exists(out, ec))
    return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", out));
  std::vector<Part> read;
  for (const auto& d : parts) {
    auto p = ReadPart(d);
    if (!p.ok()) return p.status();
    read.push_back(std::move(p.value()));
  }
  const Part& first = read.front();
  std::map<uint32_t, const Part*> by_node;
  for (const auto& p : read) {
    auto differs = [&](const char* what, const std::string& a, const std::string& b) {
      return Status::InvalidArgument(
          fmt::format("{} and {} are not parts of one restore: {} {} against {}", first.dir, p.dir, what, a, b));
    };
    if (p.cut != first.cut) return differs("cut", std::to_string(first.cut), std::to_string(p.cut));
    if (p.cluster_id != first.cluster_id) return differs("cluster", first.cluster_id, p.cluster_id);
    if (p.nodes != first.nodes) return differs("node count", std::to_string(first.nodes), std::to_string(p.nodes));
    if (p.verdict != first.verdict) return differs("verdict", first.verdict, p.verdict);
    if (p.base_kind != first.base_kind || p.base_name != first.base_name) {
      return differs("base", first.base_name, p.base_name);
    }
    auto [it, inserted] = by_node.emplace(p.node, &p);
    if (!inserted) {
      return Status::InvalidArgument(
          fmt::format("node {} appears twice: in {} and in {}", p.node, it->second->dir, p.dir));
    }
  }
  if (by_node.size() != first.nodes) {
    std::vector<std::string> missing;
    for (uint32_t i = 0; i < first.nodes; ++i) {
      if (!by_node.count(i)) missing.push_back(std::to_string(i));
    }
    return Status::InvalidArgument(fmt::format("cut {} of a {}-node cluster: no part for node{} {}", first.cut,
                                               first.nodes, missing.size() > 1 ? "s" : "", fmt::join(missing, ", ")));
  }
  RestoreResult r;
  r.cut = first.cut;
  r.status = cut::CutStatus::kConsistent;
  for (auto s : {cut::CutStatus::kConsistent, cut::CutStatus::kInconsistent, cut::CutStatus::kIncomplete,
                 cut::CutStatus::kUnavailable}) {
    if (first.status == cut::CutStatusName(s)) r.status = s;
  }
  r.reason = first.problem;
  r.base.kind = first.base_kind == BaseKindName(BaseKind::kFull) ? BaseKind::kFull : BaseKind::kGenesis;
  r.base.name = first.base_name;
  r.cluster_json = first.cluster_json;
  const uint64_t cluster_id = first.cluster_id_value;

  auto staged = walfmt::BeginStagedDir(out);
  if (!staged.ok()) return staged.status();
  r.out_lock = staged->lock;
  const fs::path stage = staged->dir;
  r.stage_dir = stage.string();
  auto fail = [&](Status st) {
    walfmt::RemoveStaging(stage.string());
    return st;
  };
  for (const auto& [node, p] : by_node) {
    const std::string name = fmt::format("node-{}.snap", node);
    const std::string from = (fs::path(p->dir) / name).string();
    const std::string to = (stage / name).string();
    if (Status st = walfmt::CopyToNewFile(from, to); !st.ok()) {
      return fail(st.code() == walfmt::ErrorCode::kNotFound
                      ? Status::InvalidArgument(fmt::format("{}: the part has no {}", p->dir, name))
                      : st);
    }
    // Read back what was copied: the assembled file is what is checked.
    uint64_t entries = 0;
    auto snap = walfmt::ReadSnapshotFile(to, [&entries](std::string_view, std::string_view) { ++entries; });
    if (!snap.ok()) return fail(Status::Corruption(fmt::format("{}: {}", from, snap.status().message())));
    const NodeRestore& e = p->entry;
    std::string wrong;
    if (snap->node_id != node)
      wrong = fmt::format("holds node {}", snap->node_id);
    else if (snap->cluster_id != cluster_id)
      wrong = fmt::format("is from cluster {}, the part says {}", walfmt::Hex16(snap->cluster_id), first.cluster_id);
    else if (snap->fingerprint != e.fingerprint)
      wrong = fmt::format("has fingerprint {}, the part's manifest says {}", walfmt::Hex16(snap->fingerprint),
                          walfmt::Hex16(e.fingerprint));
    else if (entries != e.entries)
      wrong = fmt::format("holds {} keys, the part's manifest says {}", entries, e.entries);
    else if (snap->name != fmt::format("cut-{}", first.cut) || snap->wal_position != e.cut_start) {
      wrong = fmt::format("is {} at {}, not cut-{} at {}", snap->name, snap->wal_position.ToString(), first.cut,
                          e.cut_start.ToString());
    }
    if (!wrong.empty()) return fail(Status::Corruption(fmt::format("{}: {}", from, wrong)));
    r.nodes.push_back(e);
  }
  return r;
}

}  // namespace walcut::recovery

#include "cut/load.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cut/scan.h"
#include "walfmt/duration.h"
#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"
#include "walfmt/workers.h"

namespace walcut::cut {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A summary file (JSON), read whole.
walfmt::Result<std::string> ReadText(const std::string& path) {
  return walfmt::ReadWholeFile(path, walfmt::kMaxJsonFileBytes);
}

json TrackedJson(const TrackedTx& t) {
  json j = {{"tx", t.tx.ToString()}};
  if (t.committed) {
    j["commit"] = t.commit.ToString();
    j["marker"] = t.marker;
  }
  if (t.committed || t.rolled_back) {
    j["first_seen"] = t.first_seen.ToString();
    j["time_us"] = t.time_us;
  }
  if (t.rolled_back) {
    j["rolled_back"] = true;
    j["at"] = t.commit.ToString();
  }
  if (t.recovered) j["recovered"] = true;
  return j;
}

}  // namespace

json FindingToJson(const Finding& f) {
  json j = {{"check", CheckName(f.check)}, {"node", f.node}, {"message", f.message}};
  if (f.cut) j["cut"] = f.cut;
  if (f.has_position) j["position"] = f.position.ToString();
  if (f.has_tx) {
    j["tx"] = f.tx.ToString();
    j["tx_readable"] = f.tx.Readable();
  }
  if (!f.expected.empty()) j["expected"] = f.expected;
  if (!f.found.empty()) j["found"] = f.found;
  return j;
}

namespace {

// The parts of a summary file, each written into `j` (SummaryToJson).
void WalToJson(const NodeSummary& s, json& j) {
  j["node"] = s.node;
  if (s.cluster_known) j["cluster_id"] = walfmt::Hex16(s.cluster_id);
  if (s.epoch_unix_us) {
    j["epoch_unix_us"] = *s.epoch_unix_us;
    j["epoch"] = walfmt::FormatUtc(static_cast<int64_t>(*s.epoch_unix_us));
  }
  j["wal_dir"] = s.wal_dir;
  json segs = json::array();
  for (const auto& g : s.segments) {
    segs.push_back({{"index", g.index},
                    {"file", g.file},
                    {"compressed", g.compressed},
                    {"bytes", g.bytes},
                    {"records", g.records}});
  }
  j["segments"] = segs;
  if (s.pruned) {
    j["wal_start"] = s.wal_start.ToString();
    j["wal_start_time_us"] = s.wal_start_time_us;
  }
  j["end"] = s.end.ToString();
  j["records"] = s.records;
  j["bytes"] = s.bytes;
  j["commits"] = s.commits;
  j["rollbacks"] = s.rollbacks;
  j["recovered_commits"] = s.recovered_commits;
  j["peak_in_flight"] = s.peak_in_flight;
  if (s.torn_tail) j["torn_tail"] = {{"at", s.torn_at.ToString()}, {"bytes", s.torn_bytes}};
  if (s.damaged) j["damage"] = {{"at", s.damage_at.ToString()}, {"message", s.damage}};
  if (!s.notes.empty()) j["notes"] = s.notes;
}

json CutToJson(const NodeCut& c) {
  json jc = {{"cut", c.cut_id}, {"end", CutEndName(c.end)}};
  if (c.started) {
    jc["start"] = c.start.ToString();
    jc["start_time_us"] = c.start_time_us;
    jc["commits_before_start"] = c.commits_before_start;
  }
  if (c.finished) {
    jc["finish"] = c.finish.ToString();
    jc["finish_time_us"] = c.finish_time_us;
    jc["commits_before_finish"] = c.commits_before_finish;
  }
  json b = json::array(), a = json::array();
  for (const auto& t : c.before) b.push_back(TrackedJson(t));
  for (const auto& t : c.after) a.push_back(TrackedJson(t));
  jc["before"] = b;
  jc["after"] = a;
  if (c.restarted) jc["restarted"] = true;
  if (c.evidence_pruned) jc["evidence_pruned"] = true;
  json ab = json::array();
  for (const auto& x : c.aborts) {
    ab.push_back({{"at", x.at.ToString()},
                  {"time_us", x.time_us},
                  {"reason", std::string(walfmt::CutAbortReasonName(x.reason))},
                  {"reason_code", static_cast<unsigned>(x.reason)},
                  {"detail", x.detail}});
  }
  if (!ab.empty()) jc["aborts"] = ab;
  return jc;
}

json SnapshotToJson(const SnapshotMark& x) {
  json before = json::array();
  for (const auto& [peer, d] : x.shared_before) {
    before.push_back({{"peer", peer}, {"digest", walfmt::Hex16(d.x)}, {"count", d.n}});
  }
  return {{"name", x.name},
          {"at", x.at.ToString()},
          {"time_us", x.time_us},
          {"fingerprint", walfmt::Hex16(x.fingerprint)},
          {"committed_before", {{"count", x.committed_before.count}, {"owned", x.committed_before.owned}}},
          {"shared_before", before}};
}

void CountsToJson(const NodeSummary& s, json& j) {
  json fc = json::array();
  for (const auto& [f, c] : s.first_cut) fc.push_back({{"first_cut", f}, {"count", c.count}, {"owned", c.owned}});
  j["first_cut"] = fc;
  json sh = json::array();
  for (const auto& [peer, m] : s.shared) {
    for (const auto& [f, d] : m) {
      sh.push_back({{"peer", peer}, {"first_cut", f}, {"digest", walfmt::Hex16(d.x)}, {"count", d.n}});
    }
  }
  j["shared"] = sh;
  json fs_ = json::array();
  for (const auto& f : s.findings) fs_.push_back(FindingToJson(f));
  j["findings"] = fs_;
  j["findings_dropped"] = s.findings_dropped;
}

}  // namespace

std::string SummaryToJson(const NodeSummary& s) {
  json j;
  j["schema"] = "walcut.summary/1";
  WalToJson(s, j);
  json cuts = json::array();
  for (const auto& c : s.cuts) cuts.push_back(CutToJson(c));
  j["cuts"] = cuts;
  json snaps = json::array();
  for (const auto& x : s.snapshots) snaps.push_back(SnapshotToJson(x));
  j["snapshots"] = snaps;
  json starts = json::array();
  for (const auto& x : s.starts)
    starts.push_back({{"incarnation", x.incarnation}, {"at", x.at.ToString()}, {"time_us", x.time_us}});
  j["starts"] = starts;
  CountsToJson(s, j);
  return walfmt::DumpJson(j, 1) + "\n";
}

namespace {

using walfmt::JsonFields;

Finding FindingFrom(JsonFields& r, const json& j, const std::string& p) {
  Finding f;
  const std::string check = r.String(j, "check", p);
  if (auto c = ParseCheck(check)) {
    f.check = *c;
  } else if (r.ok()) {
    r.Fail(JsonFields::Member(p, "check"), fmt::format("{} is not a known check", JsonFields::Shown(json(check))));
  }
  f.node = r.U32(j, "node", p);
  f.cut = r.OptionalU64(j, "cut", p).value_or(0);
  f.message = r.String(j, "message", p);
  if (auto at = r.OptionalPosition(j, "position", p)) {
    f.has_position = true;
    f.position = *at;
  }
  if (auto t = r.OptionalTx(j, "tx", p)) {
    f.has_tx = true;
    f.tx = *t;
  }
  f.expected = r.OptionalString(j, "expected", p).value_or("");
  f.found = r.OptionalString(j, "found", p).value_or("");
  return f;
}

// The parts of a summary file, each read into `s`: the WAL as read, the cuts,
// the snapshots and starts, the first-cut buckets, the findings.
void WalFrom(JsonFields& r, const json& j, NodeSummary& s) {
  s.node = r.U32(j, "node", "");
  if (r.Find(j, "cluster_id", "")) {
    s.cluster_known = true;
    s.cluster_id = r.Hex16(j, "cluster_id", "");
  }
  if (auto epoch = r.OptionalU64(j, "epoch_unix_us", "")) {
    if (*epoch > walfmt::kMaxUnixMicros) {
      r.Fail("epoch_unix_us", fmt::format("{} is after 9999-12-31T23:59:59.999999Z", *epoch));
    }
    s.epoch_unix_us = epoch;
  }
  s.wal_dir = r.String(j, "wal_dir", "");
  if (auto start = r.OptionalPosition(j, "wal_start", "")) {
    s.pruned = true;
    s.wal_start = *start;
    s.wal_start_time_us = r.U64(j, "wal_start_time_us", "");
  }
  if (const json* a = r.Array(j, "segments", "")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i) {
      const std::string p = JsonFields::Element("segments", i);
      const json& e = (*a)[i];
      SegmentInfo g;
      g.index = r.U64(e, "index", p);
      g.file = r.String(e, "file", p);
      g.compressed = r.Bool(e, "compressed", p);
      g.bytes = r.U64(e, "bytes", p);
      g.records = r.U64(e, "records", p);
      s.segments.push_back(std::move(g));
    }
  }
  s.end = r.Position(j, "end", "");
  s.records = r.U64(j, "records", "");
  s.bytes = r.U64(j, "bytes", "");
  s.commits = r.U64(j, "commits", "");
  s.rollbacks = r.U64(j, "rollbacks", "");
  s.recovered_commits = r.U64(j, "recovered_commits", "");
  s.peak_in_flight = r.U64(j, "peak_in_flight", "");
  if (const json* t = r.Find(j, "torn_tail", "")) {
    s.torn_tail = true;
    s.torn_at = r.Position(*t, "at", "torn_tail");
    s.torn_bytes = r.U64(*t, "bytes", "torn_tail");
  }
  if (const json* d = r.Find(j, "damage", "")) {
    s.damaged = true;
    s.damage_at = r.Position(*d, "at", "damage");
    s.damage = r.String(*d, "message", "damage");
  }
  if (const json* a = r.OptionalArray(j, "notes", "")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i)
      s.notes.push_back(r.StringValue((*a)[i], JsonFields::Element("notes", i)));
  }
}

TrackedTx TrackedFrom(JsonFields& r, const json& t, const std::string& q) {
  TrackedTx tt;
  tt.tx = r.Tx(t, "tx", q);
  if (auto commit = r.OptionalPosition(t, "commit", q)) {
    tt.committed = true;
    tt.commit = *commit;
    tt.marker = r.U64(t, "marker", q);
  }
  tt.rolled_back = r.OptionalBool(t, "rolled_back", q).value_or(false);
  if (tt.committed || tt.rolled_back) {
    tt.first_seen = r.Position(t, "first_seen", q);
    tt.time_us = r.U64(t, "time_us", q);
  }
  if (tt.rolled_back) tt.commit = r.Position(t, "at", q);
  tt.recovered = r.OptionalBool(t, "recovered", q).value_or(false);
  return tt;
}

std::optional<CutEnd> ParseCutEnd(const std::string& name) {
  for (CutEnd x : {CutEnd::kFinished, CutEnd::kAborted, CutEnd::kOpen, CutEnd::kSuperseded, CutEnd::kDamaged,
                   CutEnd::kNotStarted}) {
    if (name == CutEndName(x)) return x;
  }
  return std::nullopt;
}

NodeCut CutFrom(JsonFields& r, const json& e, const std::string& p) {
  NodeCut c;
  c.cut_id = r.U64(e, "cut", p);
  const std::string end = r.String(e, "end", p);
  if (auto x = ParseCutEnd(end)) {
    c.end = *x;
  } else if (r.ok()) {
    r.Fail(JsonFields::Member(p, "end"), fmt::format("{} is not a known cut end", JsonFields::Shown(json(end))));
  }
  if (auto start = r.OptionalPosition(e, "start", p)) {
    c.started = true;
    c.start = *start;
    c.start_time_us = r.U64(e, "start_time_us", p);
    c.commits_before_start = r.U64(e, "commits_before_start", p);
  }
  if (auto finish = r.OptionalPosition(e, "finish", p)) {
    c.finished = true;
    c.finish = *finish;
    c.finish_time_us = r.U64(e, "finish_time_us", p);
    c.commits_before_finish = r.U64(e, "commits_before_finish", p);
  }
  for (const char* key : {"before", "after"}) {
    const json* l = r.Array(e, key, p);
    if (!l) continue;
    const std::string list = JsonFields::Member(p, key);
    auto& out = std::string_view(key) == "before" ? c.before : c.after;
    for (size_t x = 0; x < l->size() && r.ok(); ++x)
      out.push_back(TrackedFrom(r, (*l)[x], JsonFields::Element(list, x)));
  }
  c.restarted = r.OptionalBool(e, "restarted", p).value_or(false);
  c.evidence_pruned = r.OptionalBool(e, "evidence_pruned", p).value_or(false);
  if (const json* ab = r.OptionalArray(e, "aborts", p)) {
    const std::string list = JsonFields::Member(p, "aborts");
    for (size_t x = 0; x < ab->size() && r.ok(); ++x) {
      const std::string q = JsonFields::Element(list, x);
      CutAbortMark m;
      m.at = r.Position((*ab)[x], "at", q);
      m.time_us = r.U64((*ab)[x], "time_us", q);
      m.reason = static_cast<walfmt::CutAbortReason>(r.U64((*ab)[x], "reason_code", q, UINT16_MAX));
      m.detail = r.String((*ab)[x], "detail", q);
      c.aborts.push_back(std::move(m));
    }
  }
  return c;
}

SnapshotMark SnapshotFrom(JsonFields& r, const json& e, const std::string& p) {
  SnapshotMark m;
  m.name = r.String(e, "name", p);
  m.at = r.Position(e, "at", p);
  m.time_us = r.U64(e, "time_us", p);
  m.fingerprint = r.Hex16(e, "fingerprint", p);
  if (const json* cb = r.Object(e, "committed_before", p)) {
    const std::string q = JsonFields::Member(p, "committed_before");
    m.committed_before.count = r.U64(*cb, "count", q);
    m.committed_before.owned = r.U64(*cb, "owned", q);
  }
  if (const json* sb = r.Array(e, "shared_before", p)) {
    const std::string list = JsonFields::Member(p, "shared_before");
    for (size_t x = 0; x < sb->size() && r.ok(); ++x) {
      const std::string q = JsonFields::Element(list, x);
      auto& d = m.shared_before[r.U32((*sb)[x], "peer", q)];
      d.x = r.Hex16((*sb)[x], "digest", q);
      d.n = r.U64((*sb)[x], "count", q);
    }
  }
  return m;
}

void MarksFrom(JsonFields& r, const json& j, NodeSummary& s) {
  if (const json* a = r.Array(j, "cuts", "")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i)
      s.cuts.push_back(CutFrom(r, (*a)[i], JsonFields::Element("cuts", i)));
  }
  if (const json* a = r.Array(j, "snapshots", "")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i) {
      s.snapshots.push_back(SnapshotFrom(r, (*a)[i], JsonFields::Element("snapshots", i)));
    }
  }
  if (const json* a = r.Array(j, "starts", "")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i) {
      const std::string p = JsonFields::Element("starts", i);
      StartMark m;
      m.incarnation = r.U32((*a)[i], "incarnation", p);
      m.at = r.Position((*a)[i], "at", p);
      m.time_us = r.U64((*a)[i], "time_us", p);
      s.starts.push_back(m);
    }
  }
}

void CountsFrom(JsonFields& r, const json& j, NodeSummary& s) {
  if (const json* a = r.Array(j, "first_cut", "")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i) {
      const std::string p = JsonFields::Element("first_cut", i);
      auto& c = s.first_cut[r.U64((*a)[i], "first_cut", p)];
      c.count = r.U64((*a)[i], "count", p);
      c.owned = r.U64((*a)[i], "owned", p);
    }
  }
  if (const json* a = r.Array(j, "shared", "")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i) {
      const std::string p = JsonFields::Element("shared", i);
      const json& e = (*a)[i];
      auto& d = s.shared[r.U32(e, "peer", p)][r.U64(e, "first_cut", p)];
      d.x = r.Hex16(e, "digest", p);
      d.n = r.U64(e, "count", p);
    }
  }
  if (const json* a = r.Array(j, "findings", "")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i) {
      s.findings.push_back(FindingFrom(r, (*a)[i], JsonFields::Element("findings", i)));
    }
  }
  s.findings_dropped = r.U64(j, "findings_dropped", "");
}

}  // namespace

walfmt::Result<NodeSummary> SummaryFromJson(const std::string& text, const std::string& origin) {
  json j = walfmt::UnescapeJsonStrings(json::parse(text, nullptr, false));
  if (j.is_discarded()) return walfmt::Status::Corruption(fmt::format("{}: not JSON", origin));
  JsonFields r(origin);
  if (r.String(j, "schema", "") != "walcut.summary/1") {
    return walfmt::Status::Corruption(
        r.ok() ? fmt::format("{}: not a walcut summary (schema is not walcut.summary/1)", origin) : r.error());
  }
  NodeSummary s;
  WalFrom(r, j, s);
  MarksFrom(r, j, s);
  CountsFrom(r, j, s);
  if (!r.ok()) return r.status();
  std::sort(s.cuts.begin(), s.cuts.end(), [](const NodeCut& a, const NodeCut& b) { return a.cut_id < b.cut_id; });
  return s;
}

ScanProgress::ScanProgress(size_t nodes, std::function<void(uint64_t bytes)> report)
    : done_(nodes), report_(std::move(report)) {}

std::function<void(uint64_t bytes)> ScanProgress::ForNode(size_t i) {
  if (!report_) return {};
  return [this, i](uint64_t b) {
    done_[i].store(b, std::memory_order_relaxed);
    uint64_t total = 0;
    for (auto& d : done_) total += d.load(std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu_);
    report_(total);
  };
}

ScanOptions NodeScanOptions(const ClusterLayout& layout, const LoadOptions& opt, size_t i, ScanProgress& bytes) {
  ScanOptions so;
  so.node = static_cast<uint32_t>(i);
  so.expect_cluster = layout.has_cluster_json;
  so.cluster_id = layout.cluster_id;
  so.settle_cut = opt.settle_cut;
  if (i < opt.from.size()) so.from = opt.from[i];
  so.progress = bytes.ForNode(i);
  return so;
}

walfmt::Result<std::vector<NodeSummary>> ScanCluster(const ClusterLayout& layout, const LoadOptions& opt) {
  const size_t n = layout.wal_dirs.size();
  std::vector<walfmt::Result<NodeSummary>> results(n, walfmt::Status::Internal("not scanned"));
  ScanProgress bytes(n, opt.progress);
  std::vector<std::unique_ptr<NodeScan>> scans(n);
  // Nodes waiting for their next segment. A worker takes a node, scans one
  // segment of it and puts it back at the end: with more nodes than workers
  // every core stays busy to the end instead of the last node running alone.
  std::deque<size_t> ready;
  std::mutex ready_mu;
  for (size_t i = 0; i < n; ++i) {
    auto scan = NodeScan::Open(layout.wal_dirs[i], NodeScanOptions(layout, opt, i, bytes));
    if (!scan.ok()) {
      results[i] = scan.status();
      continue;
    }
    scans[i] = std::move(scan.value());
    ready.push_back(i);
  }
  unsigned jobs = opt.jobs ? opt.jobs : std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, std::max<size_t>(ready.size(), 1)));
  auto work = [&] {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(ready_mu);
        if (ready.empty()) return;
        i = ready.front();
        ready.pop_front();
      }
      scans[i]->Step();
      if (scans[i]->done()) {
        results[i] = scans[i]->Finish();
        scans[i].reset();
        continue;
      }
      std::lock_guard<std::mutex> lock(ready_mu);
      ready.push_back(i);
    }
  };
  walfmt::RunWorkers(jobs, work);
  std::vector<NodeSummary> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!results[i].ok()) return results[i].status();
    out.push_back(std::move(results[i].value()));
    out.back().epoch_unix_us = layout.epoch_unix_us;
  }
  return out;
}

walfmt::Result<std::vector<NodeSummary>> LoadInputs(const std::vector<std::string>& paths, const LoadOptions& opt) {
  std::error_code ec;
  if (paths.empty()) return walfmt::Status::InvalidArgument("no input");
  if (paths.size() == 1 && fs::is_directory(paths[0], ec)) {
    auto layout = FindClusterLayout(paths[0]);
    if (!layout.ok()) return layout.status();
    return ScanCluster(*layout, opt);
  }
  std::vector<NodeSummary> out;
  for (const auto& p : paths) {
    if (fs::is_directory(p, ec)) {
      return walfmt::Status::InvalidArgument(
          fmt::format("{}: a directory among several inputs; give one cluster directory or summary files", p));
    }
    if (!fs::exists(p, ec)) return walfmt::Status::NotFound(fmt::format("{}: no such file or directory", p));
    auto text = ReadText(p);
    if (!text.ok()) return text.status();
    auto s = SummaryFromJson(*text, p);
    if (!s.ok()) return walfmt::Status::InvalidArgument(s.status().message());  // not a summary: a usage error
    out.push_back(std::move(s.value()));
  }
  return out;
}

}  // namespace walcut::cut

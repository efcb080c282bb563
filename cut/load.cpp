#include "cut/load.h"

#include <algorithm>
#include <atomic>
#include <charconv>
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

// A tiny checked reader over the JSON document: the first problem wins and
// names the field.
class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  void Fail(const std::string& field, const std::string& what) {
    if (error_.empty()) error_ = fmt::format("{}: field '{}' {}", origin_, field, what);
  }
  const json* Get(const json& j, const char* key, const std::string& path, bool required = true) {
    if (!j.is_object()) {
      Fail(path, "is not an object");
      return nullptr;
    }
    auto it = j.find(key);
    if (it == j.end()) {
      if (required) Fail(path + "." + key, "is missing");
      return nullptr;
    }
    return &*it;
  }
  uint64_t U64(const json& j, const char* key, const std::string& path, bool required = true) {
    const json* v = Get(j, key, path, required);
    if (!v) return 0;
    if (!v->is_number_unsigned()) {
      Fail(path + "." + key, "is not an unsigned integer");
      return 0;
    }
    return v->get<uint64_t>();
  }
  // An unsigned integer that must fit `max` (node ids, codes): a larger one is
  // an error, never truncated into another id.
  uint64_t Bounded(const json& j, const char* key, const std::string& path, uint64_t max) {
    const uint64_t v = U64(j, key, path);
    if (v > max) {
      Fail(path + "." + key, fmt::format("{} is larger than {}", v, max));
      return 0;
    }
    return v;
  }
  uint32_t U32(const json& j, const char* key, const std::string& path) {
    return static_cast<uint32_t>(Bounded(j, key, path, UINT32_MAX));
  }
  // A 64-bit value written as 1 to 16 hex digits (ids, digests, fingerprints).
  uint64_t Hex64(const json& j, const char* key, const std::string& path) {
    const std::string t = Str(j, key, path);
    if (!ok()) return 0;
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v, 16);
    if (t.empty() || t.size() > 16 || ec != std::errc() || end != t.data() + t.size()) {
      Fail(path + "." + key, "is not 1 to 16 hex digits");
      return 0;
    }
    return v;
  }
  bool Bool(const json& j, const char* key, const std::string& path) {
    const json* v = Get(j, key, path, false);
    if (!v) return false;
    if (!v->is_boolean()) {
      Fail(path + "." + key, "is not a boolean");
      return false;
    }
    return v->get<bool>();
  }
  std::string Str(const json& j, const char* key, const std::string& path, bool required = true) {
    const json* v = Get(j, key, path, required);
    if (!v) return {};
    if (!v->is_string()) {
      Fail(path + "." + key, "is not a string");
      return {};
    }
    return v->get<std::string>();
  }
  // Element i of the array `a` (at `path`), a string.
  std::string Str(const json& a, size_t i, const std::string& path) {
    if (!a[i].is_string()) {
      Fail(fmt::format("{}[{}]", path, i), "is not a string");
      return {};
    }
    return a[i].get<std::string>();
  }
  Lsn Position(const json& j, const char* key, const std::string& path, bool required = true) {
    const json* v = Get(j, key, path, required);
    if (!v) return {};
    auto l = v->is_string() ? Lsn::Parse(v->get<std::string>()) : std::nullopt;
    if (!l) {
      Fail(path + "." + key, "is not a position SEG/OFFSET");
      return {};
    }
    return *l;
  }
  TxId Tx(const json& j, const char* key, const std::string& path) {
    const std::string s = Str(j, key, path);
    TxId t;
    if (ok() && !TxId::Parse(s, t)) Fail(path + "." + key, "is not a transaction id NODE:SEQ");
    return t;
  }
  const json* Array(const json& j, const char* key, const std::string& path, bool required = true) {
    const json* v = Get(j, key, path, required);
    if (v && !v->is_array()) {
      Fail(path + "." + key, "is not an array");
      return nullptr;
    }
    return v;
  }

 private:
  std::string origin_;
  std::string error_;
};

Finding FindingFrom(Reader& r, const json& j, const std::string& p) {
  Finding f;
  const std::string check = r.Str(j, "check", p);
  if (auto c = ParseCheck(check)) {
    f.check = *c;
  } else if (r.ok()) {
    // Shown with JSON escapes: a line break in it cannot break the one-line error.
    r.Fail(p + ".check",
           fmt::format("{} is not a known check", json(check).dump(-1, ' ', false, json::error_handler_t::replace)));
  }
  f.node = r.U32(j, "node", p);
  f.cut = r.U64(j, "cut", p, false);
  f.message = r.Str(j, "message", p);
  if (j.contains("position")) {
    f.has_position = true;
    f.position = r.Position(j, "position", p);
  }
  if (j.contains("tx")) {
    f.has_tx = true;
    f.tx = r.Tx(j, "tx", p);
  }
  f.expected = r.Str(j, "expected", p, false);
  f.found = r.Str(j, "found", p, false);
  return f;
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

std::string SummaryToJson(const NodeSummary& s) {
  json j;
  j["schema"] = "walcut.summary/1";
  j["node"] = s.node;
  if (s.cluster_known) j["cluster_id"] = fmt::format("{:016x}", s.cluster_id);
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
  json cuts = json::array();
  for (const auto& c : s.cuts) {
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
    cuts.push_back(std::move(jc));
  }
  j["cuts"] = cuts;
  json snaps = json::array();
  for (const auto& x : s.snapshots) {
    json before = json::array();
    for (const auto& [peer, d] : x.shared_before) {
      before.push_back({{"peer", peer}, {"digest", fmt::format("{:016x}", d.x)}, {"count", d.n}});
    }
    snaps.push_back({{"name", x.name},
                     {"at", x.at.ToString()},
                     {"time_us", x.time_us},
                     {"fingerprint", fmt::format("{:016x}", x.fingerprint)},
                     {"committed_before", {{"count", x.committed_before.count}, {"owned", x.committed_before.owned}}},
                     {"shared_before", before}});
  }
  j["snapshots"] = snaps;
  json starts = json::array();
  for (const auto& x : s.starts)
    starts.push_back({{"incarnation", x.incarnation}, {"at", x.at.ToString()}, {"time_us", x.time_us}});
  j["starts"] = starts;
  json fc = json::array();
  for (const auto& [f, c] : s.first_cut) fc.push_back({{"first_cut", f}, {"count", c.count}, {"owned", c.owned}});
  j["first_cut"] = fc;
  json sh = json::array();
  for (const auto& [peer, m] : s.shared) {
    for (const auto& [f, d] : m) {
      sh.push_back({{"peer", peer}, {"first_cut", f}, {"digest", fmt::format("{:016x}", d.x)}, {"count", d.n}});
    }
  }
  j["shared"] = sh;
  json fs_ = json::array();
  for (const auto& f : s.findings) fs_.push_back(FindingToJson(f));
  j["findings"] = fs_;
  j["findings_dropped"] = s.findings_dropped;
  return walfmt::DumpJson(j, 1) + "\n";
}

walfmt::Result<NodeSummary> SummaryFromJson(const std::string& text, const std::string& origin) {
  json j = walfmt::UnescapeJsonStrings(json::parse(text, nullptr, false));
  if (j.is_discarded()) return walfmt::Status::Corruption(fmt::format("{}: not JSON", origin));
  Reader r(origin);
  if (r.Str(j, "schema", "") != "walcut.summary/1") {
    return walfmt::Status::Corruption(
        r.ok() ? fmt::format("{}: not a walcut summary (schema is not walcut.summary/1)", origin) : r.error());
  }
  NodeSummary s;
  s.node = r.U32(j, "node", "");
  if (j.contains("cluster_id")) {
    s.cluster_known = true;
    s.cluster_id = r.Hex64(j, "cluster_id", "");
  }
  if (j.contains("epoch_unix_us")) {
    const uint64_t epoch = r.U64(j, "epoch_unix_us", "");
    if (epoch > walfmt::kMaxUnixMicros) {
      return walfmt::Status::Corruption(
          fmt::format("{}: field \"epoch_unix_us\": {} is after 9999-12-31T23:59:59.999999Z", origin, epoch));
    }
    s.epoch_unix_us = epoch;
  }
  s.wal_dir = r.Str(j, "wal_dir", "", false);
  if (j.contains("wal_start")) {
    s.pruned = true;
    s.wal_start = r.Position(j, "wal_start", "");
    s.wal_start_time_us = r.U64(j, "wal_start_time_us", "", false);
  }
  if (const json* a = r.Array(j, "segments", "")) {
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string p = fmt::format("segments[{}]", i);
      const json& e = (*a)[i];
      SegmentInfo g;
      g.index = r.U64(e, "index", p);
      g.file = r.Str(e, "file", p);
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
  s.peak_in_flight = r.U64(j, "peak_in_flight", "", false);
  if (const json* t = r.Get(j, "torn_tail", "", false)) {
    s.torn_tail = true;
    s.torn_at = r.Position(*t, "at", "torn_tail");
    s.torn_bytes = r.U64(*t, "bytes", "torn_tail");
  }
  if (const json* d = r.Get(j, "damage", "", false)) {
    s.damaged = true;
    s.damage_at = r.Position(*d, "at", "damage");
    s.damage = r.Str(*d, "message", "damage");
  }
  if (const json* a = r.Array(j, "notes", "", false)) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i) {
      s.notes.push_back(r.Str(*a, i, "notes"));
    }
  }
  if (const json* a = r.Array(j, "cuts", "")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i) {
      const std::string p = fmt::format("cuts[{}]", i);
      const json& e = (*a)[i];
      NodeCut c;
      c.cut_id = r.U64(e, "cut", p);
      const std::string end = r.Str(e, "end", p);
      bool known = false;
      for (CutEnd x : {CutEnd::kFinished, CutEnd::kAborted, CutEnd::kOpen, CutEnd::kSuperseded, CutEnd::kDamaged,
                       CutEnd::kNotStarted}) {
        if (end == CutEndName(x)) {
          c.end = x;
          known = true;
        }
      }
      if (r.ok() && !known) r.Fail(p + ".end", "is not a known cut end");
      if (e.contains("start")) {
        c.started = true;
        c.start = r.Position(e, "start", p);
        c.start_time_us = r.U64(e, "start_time_us", p);
        c.commits_before_start = r.U64(e, "commits_before_start", p);
      }
      if (e.contains("finish")) {
        c.finished = true;
        c.finish = r.Position(e, "finish", p);
        c.finish_time_us = r.U64(e, "finish_time_us", p);
        c.commits_before_finish = r.U64(e, "commits_before_finish", p);
      }
      for (int side = 0; side < 2; ++side) {
        const char* key = side == 0 ? "before" : "after";
        const json* l = r.Array(e, key, p);
        if (!l) continue;
        for (size_t x = 0; x < l->size(); ++x) {
          const std::string q = fmt::format("{}.{}[{}]", p, key, x);
          const json& t = (*l)[x];
          TrackedTx tt;
          tt.tx = r.Tx(t, "tx", q);
          if (t.contains("commit")) {
            tt.committed = true;
            tt.commit = r.Position(t, "commit", q);
            tt.marker = r.U64(t, "marker", q);
          }
          tt.rolled_back = r.Bool(t, "rolled_back", q);
          if (tt.committed || tt.rolled_back) {
            tt.first_seen = r.Position(t, "first_seen", q);
            tt.time_us = r.U64(t, "time_us", q);
          }
          if (tt.rolled_back) tt.commit = r.Position(t, "at", q);
          tt.recovered = r.Bool(t, "recovered", q);
          (side == 0 ? c.before : c.after).push_back(tt);
        }
      }
      c.restarted = r.Bool(e, "restarted", p);
      c.evidence_pruned = r.Bool(e, "evidence_pruned", p);
      if (const json* ab = r.Array(e, "aborts", p, false)) {
        for (size_t x = 0; x < ab->size(); ++x) {
          const std::string q = fmt::format("{}.aborts[{}]", p, x);
          CutAbortMark m;
          m.at = r.Position((*ab)[x], "at", q);
          m.time_us = r.U64((*ab)[x], "time_us", q);
          m.reason = static_cast<walfmt::CutAbortReason>(r.Bounded((*ab)[x], "reason_code", q, UINT16_MAX));
          m.detail = r.Str((*ab)[x], "detail", q);
          c.aborts.push_back(std::move(m));
        }
      }
      s.cuts.push_back(std::move(c));
    }
  }
  if (const json* a = r.Array(j, "snapshots", "")) {
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string p = fmt::format("snapshots[{}]", i);
      SnapshotMark m;
      m.name = r.Str((*a)[i], "name", p);
      m.at = r.Position((*a)[i], "at", p);
      m.time_us = r.U64((*a)[i], "time_us", p);
      m.fingerprint = r.Hex64((*a)[i], "fingerprint", p);
      if (const json* cb = r.Get((*a)[i], "committed_before", p, false)) {
        m.committed_before.count = r.U64(*cb, "count", p + ".committed_before");
        m.committed_before.owned = r.U64(*cb, "owned", p + ".committed_before");
      }
      if (const json* sb = r.Array((*a)[i], "shared_before", p, false)) {
        for (size_t x = 0; x < sb->size(); ++x) {
          const std::string q = fmt::format("{}.shared_before[{}]", p, x);
          auto& d = m.shared_before[r.U32((*sb)[x], "peer", q)];
          d.x = r.Hex64((*sb)[x], "digest", q);
          d.n = r.U64((*sb)[x], "count", q);
        }
      }
      s.snapshots.push_back(std::move(m));
    }
  }
  if (const json* a = r.Array(j, "starts", "")) {
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string p = fmt::format("starts[{}]", i);
      StartMark m;
      m.incarnation = r.U32((*a)[i], "incarnation", p);
      m.at = r.Position((*a)[i], "at", p);
      m.time_us = r.U64((*a)[i], "time_us", p);
      s.starts.push_back(m);
    }
  }
  if (const json* a = r.Array(j, "first_cut", "")) {
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string p = fmt::format("first_cut[{}]", i);
      auto& c = s.first_cut[r.U64((*a)[i], "first_cut", p)];
      c.count = r.U64((*a)[i], "count", p);
      c.owned = r.U64((*a)[i], "owned", p);
    }
  }
  if (const json* a = r.Array(j, "shared", "")) {
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string p = fmt::format("shared[{}]", i);
      const json& e = (*a)[i];
      auto& d = s.shared[r.U32(e, "peer", p)][r.U64(e, "first_cut", p)];
      d.x = r.Hex64(e, "digest", p);
      d.n = r.U64(e, "count", p);
    }
  }
  if (const json* a = r.Array(j, "findings", "")) {
    for (size_t i = 0; i < a->size(); ++i)
      s.findings.push_back(FindingFrom(r, (*a)[i], fmt::format("findings[{}]", i)));
  }
  s.findings_dropped = r.U64(j, "findings_dropped", "", false);
  if (!r.ok()) return walfmt::Status::Corruption(r.error());
  std::sort(s.cuts.begin(), s.cuts.end(), [](const NodeCut& a, const NodeCut& b) { return a.cut_id < b.cut_id; });
  return s;
}

walfmt::Result<std::vector<NodeSummary>> ScanCluster(const ClusterLayout& layout, const LoadOptions& opt) {
  const size_t n = layout.wal_dirs.size();
  std::vector<walfmt::Result<NodeSummary>> results(n, walfmt::Status::Internal("not scanned"));
  std::vector<std::atomic<uint64_t>> done(n);
  std::mutex progress_mu;
  std::vector<std::unique_ptr<NodeScan>> scans(n);
  // Nodes waiting for their next segment. A worker takes a node, scans one
  // segment of it and puts it back at the end: with more nodes than workers
  // every core stays busy to the end instead of the last node running alone.
  std::deque<size_t> ready;
  std::mutex ready_mu;
  for (size_t i = 0; i < n; ++i) {
    ScanOptions so;
    so.node = static_cast<uint32_t>(i);
    so.expect_cluster = layout.has_cluster_json;
    so.cluster_id = layout.cluster_id;
    so.settle_cut = opt.settle_cut;
    if (i < opt.from.size()) so.from = opt.from[i];
    if (opt.progress) {
      so.progress = [&, i](uint64_t b) {
        done[i].store(b, std::memory_order_relaxed);
        uint64_t total = 0;
        for (auto& d : done) total += d.load(std::memory_order_relaxed);
        std::lock_guard<std::mutex> lock(progress_mu);
        opt.progress(total);
      };
    }
    auto scan = NodeScan::Open(layout.wal_dirs[i], so);
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

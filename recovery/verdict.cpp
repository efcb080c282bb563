#include "recovery/verdict.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "walfmt/cluster_layout.h"
#include "walfmt/file_io.h"
#include "walfmt/fnv1a.h"
#include "walfmt/json_fields.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"

namespace walcut::recovery {
namespace {
using nlohmann::json;
using walfmt::Lsn;
using walfmt::Status;

json TrackedJson(const cut::TrackedTx& t) {
  json j = {{"tx", t.tx.ToString()}};
  if (t.committed) {
    j["commit"] = t.commit.ToString();
    j["marker"] = t.marker;
  }
  if (t.rolled_back) j["rolled_back"] = t.commit.ToString();
  if (t.committed || t.rolled_back) j["first_seen"] = t.first_seen.ToString();
  return j;
}

// Everything but the id, in a fixed form: the id is the digest of its dump.
json Body(const Verdict& v) {
  json j;
  j["schema"] = kVerdictSchema;
  j["cut"] = v.cut;
  j["status"] = cut::CutStatusName(v.status);
  if (!v.reason.empty()) j["reason"] = v.reason;
  j["cluster_id"] = v.cluster_known ? json(walfmt::Hex16(v.cluster_id)) : json(nullptr);
  j["file_cluster_id"] = walfmt::Hex16(v.file_cluster_id);
  if (!v.cluster_json.empty()) j["cluster_json"] = v.cluster_json;
  j["base"] = {{"kind", BaseKindName(v.base_kind)}, {"name", v.base_name}, {"why", v.base_why}};
  json nodes = json::array();
  for (const auto& n : v.nodes) {
    json e = {{"node", n.node}, {"from", n.from.ToString()}};
    if (n.pruned) e["wal_start"] = n.wal_start.ToString();
    if (n.started) e["start"] = n.start.ToString();
    if (n.started) e["start_time_us"] = n.start_time_us;
    if (n.finished) e["finish"] = n.finish.ToString();
    if (v.base_kind == BaseKind::kFull) e["snapshot_fingerprint"] = walfmt::Hex16(n.snapshot_fingerprint);
    if (n.has_transactions) e["transactions"] = n.transactions;
    json b = json::array(), a = json::array();
    for (const auto& t : n.before) b.push_back(TrackedJson(t));
    for (const auto& t : n.after) a.push_back(TrackedJson(t));
    e["before"] = b;
    e["after"] = a;
    json segs = json::array();
    for (const auto& s : n.segments) {
      segs.push_back({{"index", s.index},
                      {"file", s.file},
                      {"compressed", s.compressed},
                      {"bytes", s.bytes},
                      {"records", s.records}});
    }
    e["segments"] = segs;
    nodes.push_back(std::move(e));
  }
  j["nodes"] = nodes;
  return j;
}

// A tracked transaction of a verdict node (element `p` of its before/after).
cut::TrackedTx TrackedFrom(walfmt::JsonFields& f, const json& t, const std::string& p) {
  cut::TrackedTx x;
  x.tx = f.Tx(t, "tx", p);
  if (const auto commit = f.OptionalPosition(t, "commit", p)) {
    x.committed = true;
    x.commit = *commit;
    x.marker = f.U64(t, "marker", p);
  }
  if (const auto rolled_back = f.OptionalPosition(t, "rolled_back", p)) {
    x.rolled_back = true;
    x.commit = *rolled_back;
  }
  if (x.committed || x.rolled_back) x.first_seen = f.Position(t, "first_seen", p);
  return x;
}

// The segments of a verdict node's range.
void SegmentsFrom(walfmt::JsonFields& f, const json& e, const std::string& p, VerdictNode& n) {
  const std::string path = walfmt::JsonFields::Member(p, "segments");
  const json* segs = f.Array(e, "segments", p);
  if (segs == nullptr) return;
  for (size_t x = 0; x < segs->size() && f.ok(); ++x) {
    const std::string q = walfmt::JsonFields::Element(path, x);
    const json& s = (*segs)[x];
    cut::SegmentInfo info;
    info.index = f.U64(s, "index", q);
    info.file = f.String(s, "file", q);
    info.compressed = f.Bool(s, "compressed", q);
    info.bytes = f.U64(s, "bytes", q);
    info.records = f.U64(s, "records", q);
    n.segments.push_back(std::move(info));
  }
}

// Node i of a verdict (element `p` of "nodes").
VerdictNode NodeFrom(walfmt::JsonFields& f, const json& e, const std::string& p, size_t i, BaseKind base_kind) {
  VerdictNode n;
  n.node = f.U32(e, "node", p);
  if (f.ok() && n.node != i) {
    f.Fail(walfmt::JsonFields::Member(p, "node"), fmt::format("is {}, expected {} (nodes by id from 0)", n.node, i));
  }
  n.from = f.Position(e, "from", p);
  if (const auto s = f.OptionalPosition(e, "wal_start", p)) {
    n.pruned = true;
    n.wal_start = *s;
  }
  if (const auto s = f.OptionalPosition(e, "start", p)) {
    n.started = true;
    n.start = *s;
    n.start_time_us = f.OptionalU64(e, "start_time_us", p).value_or(0);
  }
  if (const auto s = f.OptionalPosition(e, "finish", p)) {
    n.finished = true;
    n.finish = *s;
  }
  if (base_kind == BaseKind::kFull) n.snapshot_fingerprint = f.Hex16(e, "snapshot_fingerprint", p);
  if (const auto t = f.OptionalU64(e, "transactions", p)) {
    n.has_transactions = true;
    n.transactions = *t;
  }
  for (const char* key : {"before", "after"}) {
    const json* l = f.Array(e, key, p);
    const std::string path = walfmt::JsonFields::Member(p, key);
    for (size_t x = 0; l != nullptr && x < l->size() && f.ok(); ++x) {
      (std::string_view(key) == "before" ? n.before : n.after)
          .push_back(TrackedFrom(f, (*l)[x], walfmt::JsonFields::Element(path, x)));
    }
  }
  SegmentsFrom(f, e, p, n);
  return n;
}

// The verdict's fields (all but schema and id); f says what is wrong.
Verdict FromBody(walfmt::JsonFields& f, const json& j) {
  Verdict v;
  v.cut = f.U64(j, "cut", "");
  const std::string status = f.String(j, "status", "");
  bool known = false;
  for (auto s : {cut::CutStatus::kConsistent, cut::CutStatus::kInconsistent, cut::CutStatus::kIncomplete,
                 cut::CutStatus::kUnavailable}) {
    if (status == cut::CutStatusName(s)) {
      v.status = s;
      known = true;
    }
  }
  if (f.ok() && !known) f.Fail("status", fmt::format("\"{}\" is not a cut status", status));
  v.reason = f.OptionalString(j, "reason", "").value_or("");
  const json* cluster_id = f.Get(j, "cluster_id", "");
  if (cluster_id != nullptr && !cluster_id->is_null()) {
    v.cluster_known = true;
    v.cluster_id = f.Hex16(j, "cluster_id", "");
  }
  v.file_cluster_id = f.Hex16(j, "file_cluster_id", "");
  v.cluster_json = f.OptionalString(j, "cluster_json", "").value_or("");
  if (const json* b = f.Object(j, "base", "")) {
    const std::string kind = f.String(*b, "kind", "base");
    if (kind == BaseKindName(BaseKind::kGenesis)) {
      v.base_kind = BaseKind::kGenesis;
    } else if (kind == BaseKindName(BaseKind::kFull)) {
      v.base_kind = BaseKind::kFull;
    } else if (f.ok()) {
      f.Fail("base.kind", fmt::format("\"{}\" is neither genesis nor full", kind));
    }
    v.base_name = f.String(*b, "name", "base");
    v.base_why = f.String(*b, "why", "base");
  }
  const json* nodes = f.Array(j, "nodes", "");
  for (size_t i = 0; nodes != nullptr && i < nodes->size() && f.ok(); ++i) {
    v.nodes.push_back(NodeFrom(f, (*nodes)[i], walfmt::JsonFields::Element("nodes", i), i, v.base_kind));
  }
  if (f.ok() && v.nodes.empty()) f.Fail("nodes", "is empty");
  return v;
}

}  // namespace

walfmt::Result<Verdict> MakeVerdict(const cut::ClusterCuts& cc, uint64_t k, const VerdictOptions& opt) {
  const cut::GlobalCut* g = cc.Find(k);
  if (!g) return Status::NotFound(fmt::format("cut {} is not in the WAL", k));
  const size_t n = cc.nodes.size();
  Verdict v;
  v.cut = k;
  v.status = g->status;
  v.reason = g->reason;
  for (const auto& s : cc.nodes) {
    if (s.cluster_known) {
      v.cluster_known = true;
      v.cluster_id = s.cluster_id;
    }
  }
  if (!opt.cluster_json.empty()) {
    auto info = walfmt::ParseClusterInfo(opt.cluster_json, "cluster.json");
    if (!info.ok()) return Status::InvalidArgument(info.status().message());
    if (info->nodes != n) {
      return Status::InvalidArgument(fmt::format("cluster.json describes {} nodes, the summaries {}", info->nodes, n));
    }
    if (v.cluster_known && info->cluster_id != v.cluster_id) {
      return Status::InvalidArgument(fmt::format(
          "cluster.json is cluster {:016x}, the summaries are from cluster {:016x}", info->cluster_id, v.cluster_id));
    }
    v.cluster_json = walfmt::CurrentClusterJsonText(opt.cluster_json);  // an older cluster.json in the current form
    v.file_cluster_id = info->cluster_id;
  }
  const cut::SnapshotUse* snap = nullptr;
  if (opt.base.empty()) {
    auto choice = ChooseBaseFromSummaries(cc, k, opt.snapshot_files_missing);
    if (!choice.ok()) return choice.status();
    v.base_name = choice->base;
    v.base_why = choice->why;
  } else {
    v.base_name = opt.base;
    v.base_why = "given by --base";
  }
  if (v.base_name == "genesis") {
    v.base_kind = BaseKind::kGenesis;
    for (const auto& s : cc.nodes) {
      if (s.pruned) {
        return Status::InvalidArgument(fmt::format(
            "base genesis needs every node's WAL from 0/00000000, but node {}'s WAL starts at {} (segments before it "
            "were removed); use a full snapshot as the base",
            s.node, s.wal_start.ToString()));
      }
    }
  } else {
    v.base_kind = BaseKind::kFull;
    snap = cc.FindSnapshot(v.base_name);
    if (!snap)
      return Status::NotFound(fmt::format("base '{}': the WAL records no full snapshot of that name", v.base_name));
    if (!snap->usable) return Status::InvalidArgument(fmt::format("base {} cannot serve: {}", v.base_name, snap->why));
  }
  for (size_t i = 0; i < n; ++i) {
    const cut::NodeCut* nc = g->nodes[i];
    const cut::NodeSummary& s = cc.nodes[i];
    VerdictNode e;
    e.node = static_cast<uint32_t>(i);
    e.pruned = s.pruned;
    e.wal_start = s.wal_start;
    if (nc) {
      e.started = nc->started;
      e.start = nc->start;
      e.start_time_us = nc->start_time_us;
      e.finished = nc->finished;
      e.finish = nc->finish;
      e.before = nc->before;
      e.after = nc->after;
    }
    uint64_t before_base = 0;  // transactions of the cut the base already holds
    if (snap) {
      e.from = snap->at[i];
      if (e.started && !(e.from < e.start)) {
        return Status::InvalidArgument(fmt::format("base {} was taken on node {} at {}, after CUT_START({}) at {}",
                                                   v.base_name, i, e.from.ToString(), k, e.start.ToString()));
      }
      for (const auto& m : s.snapshots) {
        if (m.name == v.base_name && m.at == e.from) {
          e.snapshot_fingerprint = m.fingerprint;
          before_base = m.committed_before.count;
        }
      }
    }
    if (g->status == cut::CutStatus::kConsistent && i < g->node_transactions.size() &&
        g->node_transactions[i] >= before_base) {
      e.has_transactions = true;
      e.transactions = g->node_transactions[i] - before_base;
    }
    const Lsn to = e.finished ? e.finish : e.start;
    for (const auto& seg : s.segments) {
      if (seg.index >= e.from.segment && seg.index <= to.segment) e.segments.push_back(seg);
    }
    v.nodes.push_back(std::move(e));
  }
  v.id = walfmt::Hex16(walfmt::fnv1a::Value(walfmt::DumpJson(Body(v))));
  return v;
}

std::string VerdictToJson(const Verdict& v) {
  json j = Body(v);
  j["id"] = walfmt::Hex16(walfmt::fnv1a::Value(walfmt::DumpJson(j)));
  return walfmt::DumpJson(j, 1) + "\n";
}

walfmt::Result<Verdict> VerdictFromJson(const std::string& text, const std::string& origin) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument(fmt::format("{}: not JSON", origin));
  const auto schema = j.find("schema");
  if (schema == j.end() || !schema->is_string() || schema->get<std::string>() != kVerdictSchema) {
    return Status::InvalidArgument(fmt::format("{}: not a walcut verdict (schema is not {})", origin, kVerdictSchema));
  }
  walfmt::JsonFields f(origin);
  const std::string id = f.String(j, "id", "");
  if (!f.ok()) return Status::InvalidArgument(f.error());
  j.erase("id");
  const std::string digest = walfmt::Hex16(walfmt::fnv1a::Value(j.dump()));
  if (id != digest) {
    return Status::InvalidArgument(fmt::format(
        "{}: its content does not match its id {} (digest {}): the file was edited or damaged", origin, id, digest));
  }
  Verdict v = FromBody(f, walfmt::UnescapeJsonStrings(j));  // the byte strings it was made from
  if (!f.ok()) return Status::InvalidArgument(f.error());
  v.id = id;
  return v;
}

walfmt::Result<Verdict> ReadVerdict(const std::string& path) {
  auto text = walfmt::ReadWholeFile(path, walfmt::kMaxJsonFileBytes);
  if (!text.ok()) return text.status();
  return VerdictFromJson(*text, path);
}

}  // namespace walcut::recovery

#include "repo/repository.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <xxhash.h>
#include <zstd.h>

#include "cut/load.h"
#include "recovery/restore.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/file_io.h"
#include "walfmt/reader.h"
#include "walfmt/segment.h"
#include "walfmt/snapshot.h"
#include "walfmt/staging.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"
#include "walfmt/workers.h"
#include "walfmt/workload.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using nlohmann::json;
using walfmt::Lsn;
using walfmt::Result;
using walfmt::Status;

namespace {

constexpr uint64_t kMaxManifestBytes = 64ull << 20;
const std::string kZeroSum(32, '0');

json LsnJson(const Lsn& l) { return l.ToString(); }
Lsn LsnOf(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_string()) return Lsn{};
  auto l = Lsn::Parse(j[key].get<std::string>());
  return l ? *l : Lsn{};
}
uint64_t U64(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number_unsigned() ? j[key].get<uint64_t>() : 0;
}
std::string Str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}
// 16 lower-case hex digits, as walcut writes a cluster_id.
bool ParseHex16(const std::string& s, uint64_t& out) {
  if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  out = std::stoull(s, nullptr, 16);
  return true;
}

json NodeToJson(const ArtifactNode& n) {
  json j = {{"node", n.node}, {"continue_from", LsnJson(n.continue_from)}};
  if (n.has_wal) {
    j["wal"] = {{"from", LsnJson(n.wal_from)},
                {"to", LsnJson(n.wal_to)},
                {"first_segment", n.first_segment},
                {"last_segment", n.last_segment},
                {"segments", n.segments}};
  }
  if (!n.snap_file.empty()) {
    j["file"] = n.snap_file;
    j["fingerprint"] = fmt::format("{:016x}", n.fingerprint);
    j["entries"] = n.entries;
    j["snapshot_position"] = LsnJson(n.snap_position);
  }
  if (n.has_cut) {
    j["cut_start"] = LsnJson(n.cut_start);
    j["cut_finish"] = LsnJson(n.cut_finish);
    j["evidence"] = {{"start_time_us", n.start_time_us},
                     {"finish_time_us", n.finish_time_us},
                     {"local_state_commits", n.commits_before_start},
                     {"commits_before_finish", n.commits_before_finish},
                     {"before", n.before},
                     {"after", n.after},
                     {"before_committed_after_start", n.before_after_start},
                     {"after_committed_before_start", n.after_before_start}};
  }
  return j;
}

ArtifactNode NodeFromJson(const json& j) {
  ArtifactNode n;
  n.node = static_cast<uint32_t>(U64(j, "node"));
  n.continue_from = LsnOf(j, "continue_from");
  if (j.contains("wal") && j["wal"].is_object()) {
    const json& w = j["wal"];
    n.has_wal = true;
    n.wal_from = LsnOf(w, "from");
    n.wal_to = LsnOf(w, "to");
    n.first_segment = U64(w, "first_segment");
    n.last_segment = U64(w, "last_segment");
    if (w.contains("segments") && w["segments"].is_array()) {
      for (const auto& s : w["segments"]) {
        if (s.is_string()) n.segments.push_back(s.get<std::string>());
      }
    }
  }
  if (j.contains("file") && j["file"].is_string()) {
    n.snap_file = j["file"].get<std::string>();
    n.fingerprint = std::strtoull(Str(j, "fingerprint").c_str(), nullptr, 16);
    n.entries = U64(j, "entries");
    n.snap_position = LsnOf(j, "snapshot_position");
  }
  if (j.contains("cut_start")) {
    n.has_cut = true;
    n.cut_start = LsnOf(j, "cut_start");
    n.cut_finish = LsnOf(j, "cut_finish");
    const json e = j.value("evidence", json::object());
    n.start_time_us = U64(e, "start_time_us");
    n.finish_time_us = U64(e, "finish_time_us");
    n.commits_before_start = U64(e, "local_state_commits");
    n.commits_before_finish = U64(e, "commits_before_finish");
    n.before = U64(e, "before");
    n.after = U64(e, "after");
    n.before_after_start = U64(e, "before_committed_after_start");
    n.after_before_start = U64(e, "after_committed_before_start");
  }
  return n;
}

json ManifestToJson(const Manifest& m) {
  json j;
  // A synthetic full is also a restore output (so that it serves as a
  // restored base): the restore's manifest keys come first, the artifact's
  // own keys override them.
  if (m.restore.is_object()) {
    for (auto it = m.restore.begin(); it != m.restore.end(); ++it) j[it.key()] = it.value();
    j["restore"] = m.restore;
  }
  j["schema"] = kArtifactSchema;
  j["name"] = m.name;
  j["type"] = m.type;
  j["source"] = m.source;
  j["parent"] = m.parent.empty() ? json(nullptr) : json(m.parent);
  j["seq"] = m.seq;
  j["cluster_id"] = fmt::format("{:016x}", m.cluster_id);
  j["cut"] = m.cut ? json(*m.cut) : json(nullptr);
  j["snapshot"] = m.snapshot.empty() ? json(nullptr) : json(m.snapshot);
  j["time_us"] = m.time_us;
  j["verdict"] = m.verdict;
  j["evidence"] = m.evidence.is_null() ? json::object() : m.evidence;
  json nodes = json::array();
  for (const auto& n : m.nodes) nodes.push_back(NodeToJson(n));
  j["nodes"] = nodes;
  json files = json::array();
  for (const auto& f : m.files) files.push_back({{"path", f.path}, {"bytes", f.bytes}, {"xxh3_128", f.xxh3_128}});
  j["files"] = files;
  j[kManifestChecksumKey] = kZeroSum;
  return j;
}

// The self-checksum: XXH3-128 of the manifest's bytes with its own value
// replaced by 32 zeros. Returns the offset of the value, or npos. The member
// is found at the top level: a line indented by exactly two spaces, as
// dump(2) writes the top-level members (a raw line break only occurs between
// tokens, never inside a string). A nested member of that name (the embedded
// restore manifest or the evidence may hold any key) sorts earlier and used
// to be taken for it, which broke the checksum of the encoded text.
size_t ChecksumOffset(const std::string& text) {
  const std::string key = fmt::format("\n  \"{}\": \"", kManifestChecksumKey);
  const size_t at = text.find(key);
  if (at == std::string::npos || at + key.size() + 32 > text.size()) return std::string::npos;
  return at + key.size();
}

bool IsHex32(const std::string& s) {
  return s.size() == 32 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

Result<std::string> ReadSmall(const std::string& path) { return walfmt::ReadWholeFile(path, kMaxManifestBytes); }

// A staging directory that is removed unless kept; registered from the start
// so that a termination signal removes it too (walfmt/staging.h). It is kept
// by renaming it into place with walfmt::CommitStaging.
struct Staging {
  explicit Staging(std::string d) : dir(std::move(d)) { walfmt::RegisterStaging(dir); }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  ~Staging() {
    if (!dir.empty() && !keep) walfmt::RemoveStaging(dir);
  }
  std::string dir;
  bool keep = false;
};

Status MakeDir(const std::string& d) {
  std::error_code ec;
  if (!fs::create_directory(d, ec) || ec) {
    return Status::Io(fmt::format("{}: cannot create directory: {}", d, ec ? ec.message() : "exists"));
  }
  return Status::Ok();
}

// XXH3-128 over bytes given piece by piece.
class Hasher {
 public:
  Hasher() : st_(XXH3_createState()) { XXH3_128bits_reset(st_); }
  ~Hasher() { XXH3_freeState(st_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void Update(std::string_view d) {
    XXH3_128bits_update(st_, d.data(), d.size());
    bytes_ += d.size();
  }
  std::string Hex() const {
    const XXH128_hash_t h = XXH3_128bits_digest(st_);
    return fmt::format("{:016x}{:016x}", h.high64, h.low64);
  }
  uint64_t bytes() const { return bytes_; }

 private:
  XXH3_state_t* st_;
  uint64_t bytes_ = 0;
};

// Copies a file into the staging directory piece by piece (memory: one piece)
// and lists it with its checksum.
Status AddFileCopy(const std::string& stage, const std::string& rel, const std::string& from, Manifest& m) {
  Hasher h;
  if (Status st = walfmt::CopyToNewFile(from, walfmt::JoinPath(stage, rel), [&h](std::string_view p) { h.Update(p); });
      !st.ok()) {
    return st;
  }
  m.files.push_back({rel, h.bytes(), h.Hex()});
  return Status::Ok();
}

// Reads a staged snapshot file back (header and body checksums, fingerprint)
// without building its map; counts its entries.
Result<walfmt::SnapshotFile> ReadBackSnapshot(const std::string& path, uint64_t& entries) {
  entries = 0;
  auto snap = walfmt::ReadSnapshotFile(path, [&entries](std::string_view, std::string_view) { ++entries; });
  if (!snap.ok()) return Status::Corruption(fmt::format("{}: {}", path, snap.status().message()));
  return snap;
}

Status AddFile(const std::string& stage, const std::string& rel, std::string_view data, Manifest& m) {
  if (Status st = walfmt::WriteNewFile(walfmt::JoinPath(stage, rel), data); !st.ok()) return st;
  m.files.push_back({rel, data.size(), Xxh3Hex(data)});
  return Status::Ok();
}

// Writes manifest.json last and renames the staging directory into place.
Status Publish(Staging& s, const std::string& repo, Manifest& m) {
  if (Status st = walfmt::SyncDir(s.dir); !st.ok()) return st;
  if (Status st = walfmt::WriteFileAtomic(walfmt::JoinPath(s.dir, kManifestFile), EncodeManifest(m)); !st.ok())
    return st;
  const std::string target = walfmt::JoinPath(repo, m.name);
  std::error_code ec;
  if (fs::exists(target, ec)) {
    return Status::InvalidArgument(fmt::format("{}: an artifact of that name already exists", target));
  }
  if (Status st = walfmt::CommitStaging(s.dir, target); !st.ok()) return st;
  s.keep = true;
  return Status::Ok();
}

// `attested`: the cut of the parent artifact, known consistent from when it
// was made; an increment's WAL is checked against it.
Result<cut::ClusterCuts> Analyze(const cut::ClusterLayout& layout, unsigned jobs,
                                 std::optional<uint64_t> attested = std::nullopt) {
  cut::LoadOptions lo;
  lo.jobs = jobs;
  auto sums = cut::ScanCluster(layout, lo);
  if (!sums.ok()) return sums.status();
  cut::ReconstructOptions ro;
  ro.attested_cut = attested;
  return cut::Reconstruct(std::move(sums.value()), ro);
}

void FillCutEvidence(const cut::GlobalCut& g, Manifest& m) {
  m.verdict = cut::CutStatusName(g.status);
  m.time_us = g.finish_time_us;
  m.evidence = {{"status", cut::CutStatusName(g.status)},
                {"reason", g.reason},
                {"checks",
                 {{"atomicity", g.checks.atomicity},
                  {"monotonicity", g.checks.monotonicity},
                  {"shape", g.checks.shape},
                  {"rollback", g.checks.rollback},
                  {"completeness", g.checks.completeness},
                  {"markers", g.checks.markers}}},
                {"transactions", g.transactions},
                {"before", g.before},
                {"after", g.after},
                {"before_committed_after_start", g.before_after_start},
                {"after_committed_before_start", g.after_before_start},
                {"start_time_us", g.start_time_us},
                {"finish_time_us", g.finish_time_us},
                {"findings", g.findings.size()}};
}

void FillNodeEvidence(const cut::NodeCut& nc, ArtifactNode& n) {
  n.has_cut = true;
  n.cut_start = nc.start;
  n.cut_finish = nc.finish;
  n.start_time_us = nc.start_time_us;
  n.finish_time_us = nc.finish_time_us;
  n.commits_before_start = nc.commits_before_start;
  n.commits_before_finish = nc.commits_before_finish;
  n.before = nc.before.size();
  n.after = nc.after.size();
  n.before_after_start = 0;
  n.after_before_start = 0;
  for (const auto& t : nc.before) n.before_after_start += t.committed && t.commit > nc.start;
  for (const auto& t : nc.after) n.after_before_start += t.committed && t.commit < nc.start;
}

uint64_t NextSeq(const RepoListing& l) {
  uint64_t s = 0;
  for (const auto& a : l.artifacts) s = std::max(s, a.m.seq);
  return s + 1;
}

Status CheckName(const std::string& name) {
  if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos || name == kMarkerFile) {
    return Status::InvalidArgument(fmt::format("'{}' is not a valid artifact name", name));
  }
  return Status::Ok();
}

Result<CreateResult> CreateRuntimeFull(const CreateRequest& req, const RepoListing& l, Manifest m) {
  auto info = walfmt::LoadClusterInfo(req.cluster_dir);
  if (!info.ok()) return info.status();
  const walfmt::FullSnapshotInfo* fsi = info->FindSnapshot(req.from);
  if (!fsi) {
    std::string names;
    for (const auto& s : info->full_snapshots) names += (names.empty() ? "" : ", ") + s.name;
    return Status::NotFound(fmt::format("{}: no full snapshot '{}' in cluster.json (it has: {})", req.cluster_dir,
                                        req.from, names.empty() ? "none" : names));
  }
  auto cj = walfmt::ReadWholeFile(walfmt::JoinPath(req.cluster_dir, "cluster.json"), kMaxManifestBytes);
  if (!cj.ok()) return cj.status();
  m.name = req.name.empty() ? "f-" + req.from : req.name;
  if (Status st = CheckName(m.name); !st.ok()) return st;
  if (l.Find(m.name)) return Status::InvalidArgument(fmt::format("{}: artifact {} already exists", req.repo, m.name));
  m.type = "full";
  m.source = "runtime-snapshot";
  m.snapshot = fsi->name;
  m.cluster_id = info->cluster_id;
  m.time_us = fsi->time_us;
  m.verdict = "snapshot";
  m.evidence = {{"at_tx", fsi->at_tx}, {"snapshot_time_us", fsi->time_us}};
  Staging s{walfmt::TempNameBeside(walfmt::JoinPath(req.repo, m.name))};
  if (Status st = MakeDir(s.dir); !st.ok()) {
    s.dir.clear();
    return st;
  }
  for (const auto& node : fsi->nodes) {
    const std::string path = walfmt::JoinPath(walfmt::JoinPath(req.cluster_dir, fsi->dir), node.file);
    const std::string rel = fmt::format("node-{}.snap", node.node);
    if (Status st = AddFileCopy(s.dir, rel, path, m); !st.ok()) return st;
    uint64_t entries = 0;
    auto snap = ReadBackSnapshot(walfmt::JoinPath(s.dir, rel), entries);  // the copy is what is checked
    if (!snap.ok()) return Status::Corruption(fmt::format("{} (copied from {})", snap.status().message(), path));
    if (snap->node_id != node.node || snap->fingerprint != node.fingerprint ||
        snap->wal_position != node.wal_position) {
      return Status::Corruption(fmt::format(
          "{}: node {} fingerprint {:016x} at {}, but cluster.json recorded node {} fingerprint {:016x} at {}", path,
          snap->node_id, snap->fingerprint, snap->wal_position.ToString(), node.node, node.fingerprint,
          node.wal_position.ToString()));
    }
    ArtifactNode an;
    an.node = node.node;
    an.continue_from = node.wal_position;
    an.snap_file = rel;
    an.fingerprint = snap->fingerprint;
    an.entries = entries;
    an.snap_position = snap->wal_position;
    m.nodes.push_back(an);
  }
  if (Status st = AddFile(s.dir, "cluster.json", walfmt::CurrentClusterJsonText(*cj), m); !st.ok()) return st;
  m.restore = json();
  json cluster = json::parse(*cj, nullptr, false);
  if (cluster.is_object()) m.evidence["cluster_json"] = true;
  if (Status st = Publish(s, req.repo, m); !st.ok()) return st;
  CreateResult r;
  r.m = m;
  r.dir = walfmt::JoinPath(req.repo, m.name);
  return r;
}

// Copies a restore output (node files, its manifest) into the staging dir.
Status IngestRestore(const std::string& restored, const std::string& stage, Manifest& m) {
  auto text = ReadSmall(walfmt::JoinPath(restored, "manifest.json"));
  if (!text.ok()) return text.status();
  json rm = walfmt::UnescapeJsonStrings(json::parse(*text, nullptr, false));
  if (!rm.is_object() || !rm.contains("nodes") || !rm["nodes"].is_array()) {
    return Status::Corruption(fmt::format("{}/manifest.json: not a restore manifest", restored));
  }
  m.restore = rm;
  m.nodes.assign(rm["nodes"].size(), ArtifactNode{});
  for (const auto& jn : rm["nodes"]) {
    const uint32_t i = static_cast<uint32_t>(U64(jn, "node"));
    if (i >= m.nodes.size())
      return Status::Corruption(fmt::format("{}/manifest.json: node {} out of range", restored, i));
    const std::string rel = fmt::format("node-{}.snap", i);
    if (Status st = AddFileCopy(stage, rel, walfmt::JoinPath(restored, rel), m); !st.ok()) return st;
    uint64_t entries = 0;
    auto snap = ReadBackSnapshot(walfmt::JoinPath(stage, rel), entries);
    if (!snap.ok()) return snap.status();
    ArtifactNode& an = m.nodes[i];
    an.node = i;
    an.continue_from = LsnOf(jn, "continue_from");
    an.snap_file = rel;
    an.fingerprint = snap->fingerprint;
    an.entries = entries;
    an.snap_position = snap->wal_position;
  }
  if (rm.contains("cluster") && rm["cluster"].is_object()) {
    if (Status st = AddFile(stage, "cluster.json",
                            walfmt::CurrentClusterJsonText(walfmt::DumpJson(rm["cluster"], 2) + "\n"), m);
        !st.ok())
      return st;
  }
  return Status::Ok();
}

Result<CreateResult> CreateSyntheticFull(const CreateRequest& req, const RepoListing& l, Manifest m) {
  const uint64_t k = *req.cut;
  m.name = req.name.empty() ? fmt::format("f-cut-{}", k) : req.name;
  if (Status st = CheckName(m.name); !st.ok()) return st;
  if (l.Find(m.name)) return Status::InvalidArgument(fmt::format("{}: artifact {} already exists", req.repo, m.name));
  m.type = "full";
  m.source = "restore";
  m.cut = k;
  Staging s{walfmt::TempNameBeside(walfmt::JoinPath(req.repo, m.name))};
  if (Status st = MakeDir(s.dir); !st.ok()) {
    s.dir.clear();
    return st;
  }
  const std::string restored = walfmt::JoinPath(s.dir, ".restore");
  // Served by the repository when it holds cut K with a complete chain (no
  // need for the cluster); else restored from the cluster's WAL.
  std::optional<uint64_t> want_cluster;
  std::optional<cut::ClusterLayout> layout;
  if (!req.cluster_dir.empty()) {
    auto lay = cut::FindClusterLayout(req.cluster_dir);
    if (!lay.ok()) return lay.status();
    layout = *lay;
    want_cluster = lay->cluster_id;
  }
  const Artifact* source = nullptr;
  std::optional<cut::ClusterCuts> live;  // the cluster's cuts, when restored from its WAL
  for (const auto& a : l.artifacts) {
    if (!a.status.ok() || a.m.cut != k || (want_cluster && a.m.cluster_id != *want_cluster)) continue;
    if (!ChainOf(l, a.name).ok()) continue;
    if (!source || a.m.seq > source->m.seq) source = &a;
  }
  if (source) {
    RepoRestoreRequest rr;
    rr.repo = req.repo;
    rr.name = source->name;
    rr.out = restored;
    rr.jobs = req.jobs;
    auto r = RestoreFromRepository(rr);
    if (!r.ok()) return r.status();
    m.cluster_id = source->m.cluster_id;
    m.time_us = source->m.time_us;
    m.verdict = source->m.verdict;
    m.evidence = source->m.evidence;
    m.evidence["served_by"] = source->name;
  } else {
    if (!layout) {
      return Status::NotFound(fmt::format(
          "{}: no artifact of cut {} with a complete chain; give the cluster directory to restore it from the WAL",
          req.repo, k));
    }
    auto cc = Analyze(*layout, req.jobs);
    if (!cc.ok()) return cc.status();
    live = std::move(cc.value());
    const cut::GlobalCut* g = live->Find(k);
    if (!g) return Status::NotFound(fmt::format("cut {} is not in the WAL of {}", k, req.cluster_dir));
    if (g->status != cut::CutStatus::kConsistent) {
      return Status::InvalidArgument(fmt::format("cut {} is {}: {}; refusing to make an artifact of it", k,
                                                 cut::CutStatusName(g->status), g->reason));
    }
    // The base `walcut restore` chooses: the newest full snapshot before cut K,
    // else genesis. Genesis alone cannot serve a WAL pruned by retention.
    auto base = recovery::ChooseBase(*live, *layout, k);
    if (!base.ok()) return base.status();
    recovery::RestoreRequest rq;
    rq.cluster_dir = req.cluster_dir;
    rq.cut = k;
    rq.base = base->base;
    rq.out = restored;
    rq.jobs = req.jobs;
    auto r = recovery::Restore(*live, *layout, rq);
    if (!r.ok()) return r.status();
    if (Status st = recovery::WriteRestore(*r, restored); !st.ok()) return st;
    m.cluster_id = layout->cluster_id;
    FillCutEvidence(*g, m);
  }
  {
    Status st = IngestRestore(restored, s.dir, m);
    std::error_code ec;
    fs::remove_all(restored, ec);
    if (!st.ok()) return st;
  }
  if (source) {
    for (size_t i = 0; i < m.nodes.size() && i < source->m.nodes.size(); ++i) {
      const ArtifactNode& sn = source->m.nodes[i];
      ArtifactNode& n = m.nodes[i];
      n.has_cut = sn.has_cut;
      n.cut_start = sn.cut_start;
      n.cut_finish = sn.cut_finish;
      n.start_time_us = sn.start_time_us;
      n.finish_time_us = sn.finish_time_us;
      n.commits_before_start = sn.commits_before_start;
      n.commits_before_finish = sn.commits_before_finish;
      n.before = sn.before;
      n.after = sn.after;
      n.before_after_start = sn.before_after_start;
      n.after_before_start = sn.after_before_start;
    }
  } else {
    const cut::GlobalCut* g = live->Find(k);
    for (size_t i = 0; g && i < m.nodes.size() && i < g->nodes.size(); ++i) {
      if (g->nodes[i]) FillNodeEvidence(*g->nodes[i], m.nodes[i]);
    }
  }
  if (Status st = Publish(s, req.repo, m); !st.ok()) return st;
  CreateResult r;
  r.m = m;
  r.dir = walfmt::JoinPath(req.repo, m.name);
  return r;
}

std::string SegmentName(uint64_t index) { return fmt::format("{:016X}.wal.zst", index); }

unsigned JobsOr(unsigned jobs) { return jobs ? jobs : std::max(1u, std::thread::hardware_concurrency()); }

// One segment of an increment: its file in the cluster, its path in the
// artifact, and (once stored) its manifest entry.
struct SegmentTask {
  const walfmt::SegmentFile* seg;
  std::string rel;
  ArtifactFile entry;
};

// Compresses the plain segment `path` into one zstd frame (its size in the
// header) at `level`, read in pieces of 1 MiB (compressed while still in the
// cache); `out` (grown to the bound, never zero-filled) gets the frame, `n`
// its size. A plain segment is at most the segment size
// (a single larger record: that record); its first `size` bytes at the stat
// are compressed.
Status CompressFile(ZSTD_CCtx* cctx, const std::string& path, int level, std::unique_ptr<char[]>& out, size_t& cap,
                    size_t& n) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return Status::Io(fmt::format("{}: cannot stat: {}", path, ec.message()));
  if (size > walfmt::kMaxSegmentBytes) {
    return Status::Io(
        fmt::format("{}: {} bytes, more than the {} a segment may hold", path, size, walfmt::kMaxSegmentBytes));
  }
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setPledgedSrcSize(cctx, size);
  const size_t bound = ZSTD_compressBound(size);
  if (cap < bound) {  // zstd writes straight into it
    out.reset(new char[bound]);
    cap = bound;
  }
  ZSTD_outBuffer ob{out.get(), bound, 0};
  auto zerr = [&path](size_t r) { return Status::Internal(fmt::format("{}: zstd: {}", path, ZSTD_getErrorName(r))); };
  uint64_t read = 0;
  Status st = walfmt::ReadFileChunks(path, size_t{1} << 20, [&](std::string_view piece) -> Status {
    // The segment as it was when stat'ed (an active segment a node still
    // appends to may grow meanwhile), as a whole read of that size would get.
    piece = piece.substr(0, static_cast<size_t>(std::min<uint64_t>(piece.size(), size - read)));
    read += piece.size();
    ZSTD_inBuffer in{piece.data(), piece.size(), 0};
    while (in.pos < in.size) {
      const size_t r = ZSTD_compressStream2(cctx, &ob, &in, ZSTD_e_continue);
      if (ZSTD_isError(r)) return zerr(r);
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (read != size) return Status::Io(fmt::format("{}: shrank while being read", path));
  ZSTD_inBuffer none{nullptr, 0, 0};
  for (;;) {
    const size_t r = ZSTD_compressStream2(cctx, &ob, &none, ZSTD_e_end);
    if (ZSTD_isError(r)) return zerr(r);
    if (r == 0) break;
  }
  n = ob.pos;
  return Status::Ok();
}

// Stores every task's segment into the staging directory: a segment already
// compressed in the cluster is copied as it is (one zstd frame or several of
// the plain segment); a plain one is compressed (CompressFile) and written.
// On `jobs` threads (default: one per core, plus one, so that the cores keep
// compressing while a thread waits for its fsync), each with its own zstd
// context and buffer (memory: about one compressed segment a thread). The
// first error in task order is returned; the others stop taking tasks.
Status StoreSegments(const std::string& stage, std::vector<SegmentTask>& tasks, int level, unsigned jobs) {
  std::vector<Status> errors(tasks.size(), Status::Ok());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  const unsigned want = jobs ? jobs : JobsOr(0) + 1;
  const unsigned threads = static_cast<unsigned>(std::min<size_t>(want, std::max<size_t>(tasks.size(), 1)));
  walfmt::RunWorkers(threads, [&] {
    std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
    std::unique_ptr<char[]> out;
    size_t cap = 0, n = 0;
    for (size_t x; !failed.load() && (x = next.fetch_add(1)) < tasks.size();) {
      SegmentTask& t = tasks[x];
      Status st = Status::Ok();
      if (t.seg->compressed) {
        Hasher h;
        st = walfmt::CopyToNewFile(t.seg->path, walfmt::JoinPath(stage, t.rel),
                                   [&h](std::string_view p) { h.Update(p); });
        if (st.ok()) t.entry = {t.rel, h.bytes(), h.Hex()};
      } else if (!cctx) {
        st = Status::Internal("zstd: cannot create a compression context");
      } else if (st = CompressFile(cctx.get(), t.seg->path, level, out, cap, n); st.ok()) {
        const std::string_view z(out.get(), n);
        st = walfmt::WriteNewFile(walfmt::JoinPath(stage, t.rel), z);
        if (st.ok()) t.entry = {t.rel, z.size(), Xxh3Hex(z)};
      }
      if (!st.ok()) {
        errors[x] = st;
        failed.store(true);
      }
    }
  });
  for (const auto& st : errors) {
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

std::string RangeText(uint64_t a, uint64_t b) {
  return a == b ? fmt::format("{:016X}", a) : fmt::format("{:016X}..{:016X}", a, b);
}

// The file of an increment that holds node i's restore plan.
std::string PlanFile(size_t i) { return fmt::format("node-{}/restore-plan.json", i); }

// What a restore through an increment needs of the cut analysis, so that it
// reads the increment's WAL once instead of twice: node i's scan summary
// reduced to the increment's own segments, the parent's cut (or the parent
// full snapshot's SNAPSHOT record) and cut K, as the analysis of the live
// WAL found them (the positions are the same in the increment). No
// transaction counts or digests: the restore needs the cuts' positions and
// sets, and the cross-node checks were made at creation against the whole
// WAL (`snapshot check` re-derives them from the increment's segments).
cut::NodeSummary PlanSummary(const cut::ClusterCuts& cc, size_t i, const Artifact& parent, uint64_t k,
                             const std::vector<walfmt::SegmentFile>& segs) {
  const cut::NodeSummary& live = cc.nodes[i];
  cut::NodeSummary s;
  s.node = live.node;
  s.cluster_known = live.cluster_known;
  s.cluster_id = live.cluster_id;
  for (const auto& seg : segs) {
    cut::SegmentInfo si;
    si.index = seg.index;
    si.file = SegmentName(seg.index);
    si.compressed = true;
    for (const auto& l : live.segments) {
      if (l.index == seg.index) {
        si.bytes = l.bytes;
        si.records = l.records;
      }
    }
    s.segments.push_back(std::move(si));
  }
  if (!segs.empty() && segs.front().index > 0) {
    s.pruned = true;
    s.wal_start = Lsn{segs.front().index, 0};
  }
  const cut::NodeCut* kc = live.FindCut(k);
  s.end = kc && kc->finished ? kc->finish : Lsn{};
  if (parent.m.cut) {
    if (const cut::NodeCut* jc = live.FindCut(*parent.m.cut)) s.cuts.push_back(*jc);
  } else {
    for (const auto& mark : live.snapshots) {
      if (mark.name != parent.m.snapshot) continue;
      cut::SnapshotMark bare = mark;  // no digests: the plan carries no buckets to subtract them from
      bare.committed_before = {};
      bare.shared_before.clear();
      s.snapshots.push_back(std::move(bare));
    }
  }
  if (kc) s.cuts.push_back(*kc);
  return s;
}

// The cuts of increment `a` from its restore plans (checked against the
// manifest's checksums), reconstructed with its parent's cut attested;
// nullopt when the artifact has no plans (made by an earlier walcut).
Result<std::optional<cut::ClusterCuts>> PlannedCuts(const Artifact& a, std::optional<uint64_t> attested) {
  std::vector<cut::NodeSummary> sums;
  for (size_t i = 0; i < a.m.nodes.size(); ++i) {
    const std::string rel = PlanFile(i);
    const auto entry = std::find_if(a.m.files.begin(), a.m.files.end(), [&](const auto& f) { return f.path == rel; });
    if (entry == a.m.files.end()) return std::optional<cut::ClusterCuts>();
    const std::string path = walfmt::JoinPath(a.dir, rel);
    auto text = ReadSmall(path);
    if (!text.ok()) return text.status();
    if (text->size() != entry->bytes || Xxh3Hex(*text) != entry->xxh3_128) {
      return Status::Corruption(fmt::format("{}: xxh3-128 {} ({} bytes), the manifest says {} ({} bytes)", path,
                                            Xxh3Hex(*text), text->size(), entry->xxh3_128, entry->bytes));
    }
    auto sum = cut::SummaryFromJson(*text, path);
    if (!sum.ok()) return sum.status();
    sums.push_back(std::move(sum.value()));
  }
  cut::ReconstructOptions ro;
  ro.attested_cut = attested;
  auto cc = cut::Reconstruct(std::move(sums), ro);
  if (!cc.ok()) return Status::Corruption(fmt::format("artifact {}: restore plans: {}", a.name, cc.status().message()));
  return std::optional<cut::ClusterCuts>(std::move(cc.value()));
}

Result<CreateResult> CreateIncrement(const CreateRequest& req, const RepoListing& l, Manifest m) {
  if (req.cluster_dir.empty()) return Status::InvalidArgument("an increment needs the cluster directory");
  auto layout = cut::FindClusterLayout(req.cluster_dir);
  if (!layout.ok()) return layout.status();
  if (!layout->has_cluster_json) {
    return Status::InvalidArgument(
        fmt::format("{}: no cluster.json; an artifact needs the cluster's description", req.cluster_dir));
  }
  const uint64_t cid = layout->cluster_id;
  const Artifact* parent = nullptr;
  if (!req.parent.empty()) {
    parent = l.Find(req.parent);
    if (!parent) return Status::NotFound(fmt::format("{}: no artifact {}", req.repo, req.parent));
    if (!parent->status.ok()) {
      return Status::InvalidArgument(fmt::format("parent {}: {}", req.parent, parent->status.message()));
    }
    if (parent->m.cluster_id != cid) {
      return Status::InvalidArgument(fmt::format(
          "parent {} belongs to cluster {:016x}, but {} is cluster {:016x}; refusing an increment across clusters",
          parent->name, parent->m.cluster_id, req.cluster_dir, cid));
    }
  } else {
    for (const auto& a : l.artifacts) {
      if (a.status.ok() && a.m.cluster_id == cid && (!parent || a.m.seq > parent->m.seq)) parent = &a;
    }
    if (!parent) {
      return Status::NotFound(fmt::format(
          "{}: no artifact of cluster {:016x} to build on; create a full one first (--full)", req.repo, cid));
    }
  }
  auto chain = ChainOf(l, parent->name);
  if (!chain.ok()) {
    return Status::InvalidArgument(
        fmt::format("parent {}: its chain is broken: {}", parent->name, chain.status().message()));
  }
  auto cc = Analyze(*layout, req.jobs);
  if (!cc.ok()) return cc.status();
  const size_t n = layout->wal_dirs.size();
  if (parent->m.nodes.size() != n) {
    return Status::InvalidArgument(
        fmt::format("parent {} has {} nodes, {} has {}", parent->name, parent->m.nodes.size(), req.cluster_dir, n));
  }
  auto after_parent = [&](const cut::GlobalCut& g) {
    if (parent->m.cut) return g.cut_id > *parent->m.cut;
    for (size_t i = 0; i < n; ++i) {
      if (!g.nodes[i] || !g.nodes[i]->started || !(parent->m.nodes[i].continue_from < g.nodes[i]->start)) return false;
    }
    return true;
  };
  uint64_t k = 0;
  if (req.cut) {
    k = *req.cut;
  } else {
    for (const auto& g : cc->cuts) {
      if (g.status == cut::CutStatus::kConsistent && after_parent(g)) k = std::max(k, g.cut_id);
    }
    if (k == 0) {
      return Status::InvalidArgument(
          fmt::format("{}: no consistent cut after the parent {}", req.cluster_dir, parent->name));
    }
  }
  const cut::GlobalCut* g = cc->Find(k);
  if (!g) return Status::NotFound(fmt::format("cut {} is not in the WAL of {}", k, req.cluster_dir));
  // The segments each node needs: [R_i(parent), CUT_FINISH_i(K)], whole.
  std::vector<std::vector<walfmt::SegmentFile>> segs(n);
  std::string missed;
  // Checked before the cut's status: a missing segment is the first thing to
  // fix, and it also makes the analysis of the cut fail.
  for (size_t i = 0; i < n; ++i) {
    const Lsn from = parent->m.nodes[i].continue_from;
    auto listed = walfmt::ListSegments(layout->wal_dirs[i], [](const walfmt::Problem&) {});
    std::map<uint64_t, walfmt::SegmentFile> have;
    if (listed.ok()) {
      for (const auto& s : *listed) have[s.index] = s;
    }
    const bool known = i < g->nodes.size() && g->nodes[i] && g->nodes[i]->finished;
    const uint64_t last = known ? g->nodes[i]->finish.segment : (have.empty() ? from.segment : have.rbegin()->first);
    const std::string upto = known ? g->nodes[i]->finish.ToString() : fmt::format("CUT_FINISH({})", k);
    std::optional<uint64_t> gap_start;
    for (uint64_t x = from.segment; x <= last + 1; ++x) {
      const bool present = x > last || have.count(x);
      if (!present && !gap_start) gap_start = x;
      if (present && gap_start) {
        missed += fmt::format("{}node {}: {} (needed for {}..{})", missed.empty() ? "" : "; ", i,
                              RangeText(*gap_start, x - 1), from.ToString(), upto);
        gap_start.reset();
      }
      if (x <= last && present) segs[i].push_back(have[x]);
    }
  }
  if (!missed.empty()) {
    return Status::InvalidArgument(
        fmt::format("Missed WAL segment(s) for an increment from {} to cut {}: {}", parent->name, k, missed));
  }
  if (g->status != cut::CutStatus::kConsistent) {
    return Status::InvalidArgument(fmt::format("cut {} is {}: {}; refusing to make an increment of it", k,
                                               cut::CutStatusName(g->status), g->reason));
  }
  if (!after_parent(*g)) {
    return Status::InvalidArgument(
        fmt::format("cut {} does not come after the parent {} ({})", k, parent->name,
                    parent->m.cut ? fmt::format("cut {}", *parent->m.cut) : "snapshot " + parent->m.snapshot));
  }
  m.name = req.name.empty() ? fmt::format("i-cut-{}", k) : req.name;
  if (Status st = CheckName(m.name); !st.ok()) return st;
  if (l.Find(m.name)) return Status::InvalidArgument(fmt::format("{}: artifact {} already exists", req.repo, m.name));
  m.type = "incremental";
  m.source = "wal";
  m.parent = parent->name;
  m.cluster_id = cid;
  m.cut = k;
  FillCutEvidence(*g, m);
  auto cj = walfmt::ReadWholeFile(walfmt::JoinPath(req.cluster_dir, "cluster.json"), kMaxManifestBytes);
  if (!cj.ok()) return cj.status();
  Staging s{walfmt::TempNameBeside(walfmt::JoinPath(req.repo, m.name))};
  if (Status st = MakeDir(s.dir); !st.ok()) {
    s.dir.clear();
    return st;
  }
  for (size_t i = 0; i < n; ++i) {
    const std::string nd = fmt::format("node-{}", i);
    if (Status st = MakeDir(walfmt::JoinPath(s.dir, nd)); !st.ok()) return st;
    if (Status st = MakeDir(walfmt::JoinPath(s.dir, nd + "/wal")); !st.ok()) return st;
    ArtifactNode an;
    an.node = static_cast<uint32_t>(i);
    an.has_wal = true;
    an.wal_from = parent->m.nodes[i].continue_from;
    an.wal_to = g->nodes[i]->finish;
    an.first_segment = an.wal_from.segment;
    an.last_segment = an.wal_to.segment;
    an.continue_from = g->nodes[i]->ContinueFrom();
    FillNodeEvidence(*g->nodes[i], an);
    for (const auto& seg : segs[i]) an.segments.push_back(SegmentName(seg.index));
    m.nodes.push_back(an);
  }
  // The segments, compressed on `jobs` threads (one segment each at a time);
  // listed in the manifest in node and segment order whatever order they
  // finish in.
  std::vector<SegmentTask> tasks;
  for (size_t i = 0; i < n; ++i) {
    for (const auto& seg : segs[i])
      tasks.push_back({&seg, fmt::format("node-{}/wal/{}", i, SegmentName(seg.index)), {}});
  }
  if (Status st = StoreSegments(s.dir, tasks, req.zstd_level, req.jobs); !st.ok()) return st;
  for (auto& t : tasks) m.files.push_back(std::move(t.entry));
  for (size_t i = 0; i < n; ++i) {
    const std::string nd = fmt::format("node-{}", i);
    if (Status st = walfmt::SyncDir(walfmt::JoinPath(s.dir, nd + "/wal")); !st.ok()) return st;
    if (Status st = walfmt::SyncDir(walfmt::JoinPath(s.dir, nd)); !st.ok()) return st;
  }
  if (Status st = AddFile(s.dir, "cluster.json", walfmt::CurrentClusterJsonText(*cj), m); !st.ok()) return st;
  for (size_t i = 0; i < n; ++i) {
    const std::string plan = cut::SummaryToJson(PlanSummary(*cc, i, *parent, k, segs[i]));
    if (Status st = AddFile(s.dir, PlanFile(i), plan, m); !st.ok()) return st;
  }
  if (Status st = Publish(s, req.repo, m); !st.ok()) return st;
  CreateResult r;
  r.m = m;
  r.dir = walfmt::JoinPath(req.repo, m.name);
  for (const auto* a : *chain) r.chain.push_back(a->name);
  r.chain.push_back(m.name);
  return r;
}

}  // namespace

std::string Xxh3Hex(std::string_view data) {
  const XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

Result<std::string> Xxh3File(const std::string& path, uint64_t* bytes) {
  Hasher h;
  Status st = walfmt::ReadFileChunks(path, size_t{1} << 20, [&h](std::string_view p) {
    h.Update(p);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (bytes) *bytes = h.bytes();
  return h.Hex();
}

uint64_t Manifest::Bytes() const {
  uint64_t b = 0;
  for (const auto& f : files) b += f.bytes;
  return b;
}

std::string EncodeManifest(const Manifest& m) {
  std::string text = walfmt::DumpJson(ManifestToJson(m), 2) + "\n";
  const size_t at = ChecksumOffset(text);
  if (at != std::string::npos) text.replace(at, 32, Xxh3Hex(text));
  return text;
}

Result<Manifest> DecodeManifest(const std::string& text, const std::string& origin) {
  const size_t at = ChecksumOffset(text);
  if (at == std::string::npos) {
    return Status::Corruption(
        fmt::format("{}: no {} (not an artifact manifest, or damaged)", origin, kManifestChecksumKey));
  }
  const std::string stored = text.substr(at, 32);
  std::string zeroed = text;
  zeroed.replace(at, 32, kZeroSum);
  const std::string actual = Xxh3Hex(zeroed);
  if (!IsHex32(stored)) {
    // Not quoted: the 32 bytes may hold anything, a line break included.
    return Status::Corruption(fmt::format("{}: the {} value is not 32 hex digits", origin, kManifestChecksumKey));
  }
  if (stored != actual) {
    return Status::Corruption(
        fmt::format("{}: checksum mismatch: the manifest says xxh3-128 {}, its bytes give {}", origin, stored, actual));
  }
  json j = walfmt::UnescapeJsonStrings(json::parse(text, nullptr, false));
  if (j.is_discarded() || !j.is_object()) return Status::Corruption(fmt::format("{}: not JSON", origin));
  const bool v1 = Str(j, "schema") == kArtifactSchemaV1;
  if (Str(j, "schema") != kArtifactSchema && !v1) {
    return Status::Corruption(fmt::format("{}: schema '{}', expected '{}'", origin, Str(j, "schema"), kArtifactSchema));
  }
  Manifest m;
  m.name = Str(j, "name");
  m.type = Str(j, "type");
  m.source = Str(j, "source");
  m.parent = Str(j, "parent");
  m.seq = U64(j, "seq");
  if (v1) {
    m.cluster_id = U64(j, "cluster_id");
  } else if (const std::string id = Str(j, "cluster_id"); !ParseHex16(id, m.cluster_id)) {
    return Status::Corruption(fmt::format("{}: cluster_id '{}' is not 16 hex digits", origin, id));
  }
  if (j.contains("cut") && j["cut"].is_number_unsigned()) m.cut = j["cut"].get<uint64_t>();
  m.snapshot = Str(j, "snapshot");
  m.time_us = U64(j, "time_us");
  m.verdict = Str(j, "verdict");
  m.evidence = j.value("evidence", json::object());
  if (j.contains("restore")) m.restore = j["restore"];
  if (m.type != "full" && m.type != "incremental") {
    return Status::Corruption(fmt::format("{}: type '{}', expected full or incremental", origin, m.type));
  }
  if (m.type == "incremental" && (m.parent.empty() || !m.cut)) {
    return Status::Corruption(fmt::format("{}: an incremental artifact needs a parent and a cut", origin));
  }
  if (j.contains("nodes") && j["nodes"].is_array()) {
    for (const auto& n : j["nodes"]) {
      // Compared before the narrowing to 32 bits: node 2^32 is not node 0.
      const uint64_t id = U64(n, "node");
      if (id != m.nodes.size())
        return Status::Corruption(fmt::format("{}: nodes[{}] is node {}", origin, m.nodes.size(), id));
      m.nodes.push_back(NodeFromJson(n));
    }
  }
  if (j.contains("files") && j["files"].is_array()) {
    for (const auto& f : j["files"]) {
      ArtifactFile af{Str(f, "path"), U64(f, "bytes"), Str(f, "xxh3_128")};
      if (af.path.empty() || af.path.find("..") != std::string::npos || af.path[0] == '/' || !IsHex32(af.xxh3_128)) {
        return Status::Corruption(fmt::format("{}: a files[] entry is malformed", origin));
      }
      m.files.push_back(std::move(af));
    }
  }
  return m;
}

bool IsRepository(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(walfmt::JoinPath(dir, kMarkerFile), ec);
}

Status InitRepository(const std::string& dir) {
  std::error_code ec;
  if (IsRepository(dir)) {
    auto text = ReadSmall(walfmt::JoinPath(dir, kMarkerFile));
    if (!text.ok()) return text.status();
    json j = walfmt::UnescapeJsonStrings(json::parse(*text, nullptr, false));
    const bool v1 = j.is_object() && Str(j, "format") == kRepoFormatV1;
    if (!j.is_object() || (Str(j, "schema") != kRepoSchema && !v1)) {
      if (j.is_object() && Str(j, "schema").rfind("walcut.repository/", 0) == 0) {
        return Status::InvalidArgument(
            fmt::format("{}: repository schema {}, this walcut knows {}", dir, Str(j, "schema"), kRepoSchema));
      }
      return Status::Corruption(fmt::format("{}/{}: not a walcut repository marker", dir, kMarkerFile));
    }
    if (v1 && U64(j, "version") != 1) {
      return Status::InvalidArgument(
          fmt::format("{}: repository version {}, this walcut knows 1 and {}", dir, U64(j, "version"), kRepoSchema));
    }
    return Status::Ok();
  }
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) return Status::InvalidArgument(fmt::format("{}: not a directory", dir));
    // Empty, or holding only what a killed InitRepository left (a temporary marker).
    bool empty = true;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().filename().string().rfind(walfmt::TempPrefixFor(kMarkerFile), 0) != 0) empty = false;
    }
    if (!empty || ec) {
      return Status::InvalidArgument(
          fmt::format("{}: not a walcut repository (no {}) and not empty; refusing to use it", dir, kMarkerFile));
    }
  } else {
    fs::create_directories(dir, ec);
    if (ec) return Status::Io(fmt::format("{}: cannot create: {}", dir, ec.message()));
  }
  json j = {{"schema", kRepoSchema}, {"artifact_schema", kArtifactSchema}};
  return walfmt::WriteFileAtomic(walfmt::JoinPath(dir, kMarkerFile), walfmt::DumpJson(j, 2) + "\n");
}

const Artifact* RepoListing::Find(std::string_view name) const {
  for (const auto& a : artifacts) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

Result<RepoListing> ListRepository(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound(fmt::format("{}: no such directory", dir));
  if (!IsRepository(dir))
    return Status::InvalidArgument(fmt::format("{}: not a walcut repository (no {})", dir, kMarkerFile));
  if (Status st = InitRepository(dir); !st.ok()) return st;
  RepoListing l;
  l.dir = dir;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == kMarkerFile) continue;
    if (name[0] == '.') {
      if (name.find(".tmp-") != std::string::npos || name.find(".expire-") != std::string::npos)
        l.leftovers.push_back(name);
      continue;
    }
    if (e.is_directory(ec)) names.push_back(name);
  }
  if (ec) return Status::Io(fmt::format("{}: cannot list: {}", dir, ec.message()));
  std::sort(names.begin(), names.end());
  std::sort(l.leftovers.begin(), l.leftovers.end());
  for (const auto& name : names) {
    Artifact a;
    a.name = name;
    a.dir = walfmt::JoinPath(dir, name);
    const std::string mpath = walfmt::JoinPath(a.dir, kManifestFile);
    auto text = ReadSmall(mpath);
    if (!text.ok()) {
      a.status = text.status().code() == walfmt::ErrorCode::kNotFound
                     ? Status::Corruption(fmt::format("{}: no manifest.json", a.dir))
                     : text.status();
    } else {
      auto m = DecodeManifest(*text, mpath);
      if (!m.ok()) {
        a.status = m.status();
      } else if (m->name != name) {
        a.status =
            Status::Corruption(fmt::format("{}: names artifact '{}', its directory is '{}'", mpath, m->name, name));
      } else {
        a.m = std::move(m.value());
        if (std::any_of(a.m.files.begin(), a.m.files.end(),
                        [](const ArtifactFile& f) { return f.path == "cluster.json"; })) {
          if (auto ci = walfmt::LoadClusterInfo(a.dir); ci.ok()) a.epoch_unix_us = ci->epoch_unix_us;
        }
      }
    }
    l.artifacts.push_back(std::move(a));
  }
  std::stable_sort(l.artifacts.begin(), l.artifacts.end(), [](const Artifact& a, const Artifact& b) {
    if (a.status.ok() != b.status.ok()) return a.status.ok();
    return a.m.seq < b.m.seq;
  });
  return l;
}

Result<std::vector<const Artifact*>> ChainOf(const RepoListing& l, std::string_view name) {
  std::vector<const Artifact*> chain;
  const Artifact* a = l.Find(name);
  if (!a) return Status::NotFound(fmt::format("no artifact {}", name));
  while (true) {
    if (!a->status.ok())
      return Status::Corruption(fmt::format("artifact {} is unreadable: {}", a->name, a->status.message()));
    chain.push_back(a);
    if (chain.size() > l.artifacts.size()) return Status::Corruption(fmt::format("the chain of {} loops", name));
    if (a->m.full()) break;
    const Artifact* p = l.Find(a->m.parent);
    if (!p) {
      return Status::Corruption(
          fmt::format("artifact {} needs its parent {}, which is missing from the repository", a->name, a->m.parent));
    }
    if (p->status.ok()) {
      if (p->m.cluster_id != a->m.cluster_id) {
        return Status::Corruption(fmt::format("artifact {} (cluster {:016x}) has parent {} of another cluster {:016x}",
                                              a->name, a->m.cluster_id, p->name, p->m.cluster_id));
      }
      if (p->m.cut && a->m.cut && *p->m.cut >= *a->m.cut) {
        return Status::Corruption(fmt::format("artifact {} (cut {}) has parent {} of cut {}: not before it", a->name,
                                              *a->m.cut, p->name, *p->m.cut));
      }
    }
    a = p;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

std::vector<RestoreTarget> RestoreTargets(const RepoListing& l) {
  std::vector<RestoreTarget> out;
  for (const auto& a : l.artifacts) {
    if (!a.status.ok()) continue;
    auto chain = ChainOf(l, a.name);
    if (!chain.ok()) continue;
    RestoreTarget t;
    t.artifact = a.name;
    t.cut = a.m.cut;
    t.snapshot = a.m.snapshot;
    t.time_us = a.m.time_us;
    t.cluster_id = a.m.cluster_id;
    for (const auto* c : *chain) t.chain.push_back(c->name);
    out.push_back(std::move(t));
  }
  return out;
}

Result<CreateResult> CreateArtifact(const CreateRequest& req) {
  if (!req.full && !req.cut && !req.latest) {
    return Status::InvalidArgument("an increment needs --cut K or --latest");
  }
  if (req.full && req.from.empty() == !req.cut.has_value()) {
    return Status::InvalidArgument("a full artifact needs exactly one of --from NAME and --cut K");
  }
  if (req.full && req.cluster_dir.empty() && !req.cut)
    return Status::InvalidArgument("--from needs the cluster directory");
  if (Status st = InitRepository(req.repo); !st.ok()) return st;
  auto l = ListRepository(req.repo);
  if (!l.ok()) return l.status();
  Manifest m;
  m.seq = NextSeq(*l);
  if (req.full && !req.from.empty()) return CreateRuntimeFull(req, *l, m);
  if (req.full) return CreateSyntheticFull(req, *l, m);
  return CreateIncrement(req, *l, m);
}

// ---- restore through a chain -----------------------------------------------

Result<const Artifact*> SelectTarget(const RepoListing& l, const RepoRestoreRequest& req) {
  const int chosen = !req.name.empty() + req.cut.has_value() + req.latest + req.before.has_value();
  if (chosen != 1) return Status::InvalidArgument("give exactly one of NAME, --cut K, --latest, --before TIME");
  if (!req.name.empty()) {
    const Artifact* a = l.Find(req.name);
    if (!a) return Status::NotFound(fmt::format("{}: no artifact {}", l.dir, req.name));
    return a;
  }
  const bool wall = req.before && req.before->wall_clock;
  // When an artifact finished, on the scale `before` is given in: cluster
  // time, or Unix microseconds through the artifact's epoch.
  auto when = [wall](const Artifact& a) -> int64_t {
    return wall ? static_cast<int64_t>(*a.epoch_unix_us + a.m.time_us) : static_cast<int64_t>(a.m.time_us);
  };
  const Artifact* best = nullptr;
  size_t without_epoch = 0;
  std::vector<uint64_t> clusters;  // of the restorable artifacts, for a cluster time
  for (const auto& a : l.artifacts) {
    if (!a.status.ok() || !ChainOf(l, a.name).ok()) continue;
    if (req.cut && a.m.cut != req.cut) continue;
    if (req.before) {
      if (wall && !a.epoch_unix_us) {
        ++without_epoch;
        continue;
      }
      if (std::find(clusters.begin(), clusters.end(), a.m.cluster_id) == clusters.end())
        clusters.push_back(a.m.cluster_id);
      if (!(when(a) < (wall ? req.before->unix_us : static_cast<int64_t>(req.before->cluster_us)))) continue;
    }
    if (!best || when(a) > when(*best) || (when(a) == when(*best) && a.m.seq > best->m.seq)) best = &a;
  }
  if (req.before && !wall && clusters.size() > 1) {
    std::string ids;
    for (auto c : clusters) ids += fmt::format("{}{:016x}", ids.empty() ? "" : ", ", c);
    return Status::InvalidArgument(fmt::format(
        "{}: holds artifacts of {} clusters ({}), each with its own clock, so cluster time {} names no one instant; "
        "give a wall-clock time (ISO 8601 or @UNIX_SECONDS), an artifact NAME or --cut K",
        l.dir, clusters.size(), ids, walfmt::FormatClusterOffset(req.before->cluster_us)));
  }
  if (!best) {
    if (req.cut) return Status::NotFound(fmt::format("{}: no restorable artifact of cut {}", l.dir, *req.cut));
    if (req.before) {
      const std::string at =
          wall ? walfmt::FormatUtc(req.before->unix_us) : walfmt::FormatClusterOffset(req.before->cluster_us);
      const std::string skipped =
          without_epoch == 0 ? ""
                             : fmt::format(
                                   " ({} restorable artifact{} record{} no cluster epoch, so no wall-clock time: "
                                   "give cluster time since creation with a unit, e.g. 1.5s)",
                                   without_epoch, without_epoch == 1 ? "" : "s", without_epoch == 1 ? "s" : "");
      return Status::NotFound(fmt::format("{}: no restorable artifact finished before {}{}", l.dir, at, skipped));
    }
    return Status::NotFound(fmt::format("{}: no restorable artifact", l.dir));
  }
  return best;
}

Result<RepoRestoreResult> RestoreFromRepository(const RepoRestoreRequest& req) {
  auto l = ListRepository(req.repo);
  if (!l.ok()) return l.status();
  auto target = SelectTarget(*l, req);
  if (!target.ok()) return target.status();
  auto chain = ChainOf(*l, (*target)->name);
  if (!chain.ok()) return chain.status();
  RepoRestoreResult res;
  res.target = (*target)->name;
  for (const auto* a : *chain) res.steps.push_back({a->name, a->m.cut, a->m.nodes});
  if (req.dry_run) return res;
  std::error_code ec;
  if (req.out.empty()) return Status::InvalidArgument("--out OUT is required (or --dry-run)");
  // OUT locked for the whole chain (walfmt/staging.h): a second restore into
  // it fails at once; the last step's own lock on OUT is this one, nested.
  auto out_lock = walfmt::OutputLock::Acquire(req.out);
  if (!out_lock.ok()) return out_lock.status();
  if (fs::exists(req.out, ec))
    return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", req.out));
  const Artifact& full = *chain->front();
  if (chain->size() == 1) {
    // A full artifact alone: its files, copied.
    Staging s{walfmt::TempNameBeside(fs::absolute(req.out).string())};
    if (Status st = MakeDir(s.dir); !st.ok()) {
      s.dir.clear();
      return st;
    }
    for (const auto& f : full.m.files) {
      if (f.path.find('/') != std::string::npos) continue;
      Hasher h;
      if (Status st = walfmt::CopyToNewFile(walfmt::JoinPath(full.dir, f.path), walfmt::JoinPath(s.dir, f.path),
                                            [&h](std::string_view p) { h.Update(p); });
          !st.ok()) {
        return st;
      }
      if (h.Hex() != f.xxh3_128 || h.bytes() != f.bytes) {
        return Status::Corruption(
            fmt::format("{}/{}: xxh3-128 {}, the manifest says {}", full.dir, f.path, h.Hex(), f.xxh3_128));
      }
    }
    if (full.m.restore.is_object()) {  // a synthetic full is a restore output: its manifest goes along
      auto data = ReadSmall(walfmt::JoinPath(full.dir, kManifestFile));
      if (!data.ok()) return data.status();
      if (Status st = walfmt::WriteNewFile(walfmt::JoinPath(s.dir, kManifestFile), *data); !st.ok()) return st;
    }
    if (Status st = walfmt::SyncDir(s.dir); !st.ok()) return st;
    if (Status st = walfmt::CommitStaging(s.dir, req.out); !st.ok()) return st;
    s.keep = true;
    for (const auto& n : full.m.nodes) res.fingerprints.push_back(n.fingerprint);
    if (req.after_step) {
      if (Status st = req.after_step(res.steps.front(), req.out); !st.ok()) return st;
    }
    return res;
  }
  Staging work{walfmt::TempNameBeside(fs::absolute(req.out).string() + "-work")};
  if (Status st = MakeDir(work.dir); !st.ok()) {
    work.dir.clear();
    return st;
  }
  std::string base;
  if (full.m.restore.is_object()) base = fs::absolute(full.dir).string();  // a restore output: a restored base
  if (req.after_step) {
    if (Status st = req.after_step(res.steps.front(), full.dir); !st.ok()) return st;
  }
  for (size_t j = 1; j < chain->size(); ++j) {
    const Artifact& a = *(*chain)[j];
    cut::ClusterLayout layout;
    layout.dir = a.dir;
    layout.has_cluster_json = true;
    layout.cluster_id = a.m.cluster_id;
    for (size_t i = 0; i < a.m.nodes.size(); ++i)
      layout.wal_dirs.push_back(walfmt::JoinPath(a.dir, fmt::format("node-{}/wal", i)));
    if (base.empty()) {
      // A runtime full snapshot as the base: the restore finds it by name under
      // LAYOUT/snapshots/, so the first step gets a layout directory of its own
      // (cluster.json and a link to the full artifact).
      const std::string ldir = walfmt::JoinPath(work.dir, "layout");
      if (Status st = MakeDir(ldir); !st.ok()) return st;
      auto cj = ReadSmall(walfmt::JoinPath(a.dir, "cluster.json"));
      if (!cj.ok()) return cj.status();
      if (Status st = walfmt::WriteNewFile(walfmt::JoinPath(ldir, "cluster.json"), *cj); !st.ok()) return st;
      if (Status st = MakeDir(walfmt::JoinPath(ldir, "snapshots")); !st.ok()) return st;
      fs::create_directory_symlink(fs::absolute(full.dir), walfmt::JoinPath(ldir, "snapshots/" + full.m.snapshot), ec);
      if (ec) return Status::Io(fmt::format("{}: cannot link the base: {}", ldir, ec.message()));
      layout.dir = ldir;
      base = full.m.snapshot;
    }
    auto cc = PlannedCuts(a, (*chain)[j - 1]->m.cut);
    if (!cc.ok()) return cc.status();
    if (!cc->has_value()) {  // an increment made before restore plans existed: analyse its WAL
      auto analysed = Analyze(layout, req.jobs, (*chain)[j - 1]->m.cut);
      if (!analysed.ok()) return analysed.status();
      cc.value() = std::move(analysed.value());
    }
    const bool last = j + 1 == chain->size();
    const std::string out = last ? req.out : walfmt::JoinPath(work.dir, fmt::format("step-{}", j));
    recovery::RestoreRequest rq;
    rq.cluster_dir = layout.dir;
    rq.cut = *a.m.cut;
    rq.base = base;
    rq.out = out;
    rq.jobs = req.jobs;
    auto r = recovery::Restore(**cc, layout, rq);
    if (!r.ok()) {
      // Inside a repository a refused step is a finding about the artifact, not usage.
      if (r.status().code() == walfmt::ErrorCode::kInvalidArgument) {
        return Status::Corruption(fmt::format("artifact {}: {}", a.name, r.status().message()));
      }
      return r.status();
    }
    json chain_json = json::array();
    for (size_t x = 0; x <= j; ++x) chain_json.push_back((*chain)[x]->name);
    const json extra = {{"repository", {{"dir", req.repo}, {"artifact", a.name}, {"chain", chain_json}}}};
    if (Status st = recovery::WriteRestore(*r, out, walfmt::DumpJson(extra)); !st.ok()) return st;
    if (last) {
      for (const auto& n : r->nodes) res.fingerprints.push_back(n.fingerprint);
    }
    if (req.after_step) {
      if (Status st = req.after_step(res.steps[j], out); !st.ok()) return st;
    }
    base = fs::absolute(out).string();
  }
  return res;
}

// ---- expire ------------------------------------------------------------------

Result<ExpireResult> Expire(const std::string& repo, uint64_t keep_full, bool dry_run) {
  if (keep_full == 0) return Status::InvalidArgument("--keep-full must be at least 1");
  auto l = ListRepository(repo);
  if (!l.ok()) return l.status();
  // The newest N fulls of each cluster are kept, with every artifact whose
  // chain starts at one of them. An artifact with a broken chain is left alone.
  std::map<uint64_t, std::vector<const Artifact*>> fulls;
  for (const auto& a : l->artifacts) {
    if (a.status.ok() && a.m.full()) fulls[a.m.cluster_id].push_back(&a);
  }
  std::set<std::string> kept_roots;
  for (auto& [cid, v] : fulls) {
    std::sort(v.begin(), v.end(), [](const Artifact* a, const Artifact* b) { return a->m.seq > b->m.seq; });
    for (size_t i = 0; i < v.size() && i < keep_full; ++i) kept_roots.insert(v[i]->name);
  }
  ExpireResult r;
  std::vector<const Artifact*> doomed;
  for (const auto& a : l->artifacts) {
    auto chain = ChainOf(*l, a.name);
    if (chain.ok() && !kept_roots.count(chain->front()->name)) {
      doomed.push_back(&a);
    } else {
      r.kept.push_back(a.name);
    }
  }
  // Leaves first: a crash between two removals never leaves a kept artifact
  // without its parent.
  std::sort(doomed.begin(), doomed.end(), [](const Artifact* a, const Artifact* b) { return a->m.seq > b->m.seq; });
  for (const auto* a : doomed) {
    r.removed.push_back(a->name);
    if (dry_run) continue;
    const std::string tmp = walfmt::JoinPath(repo, fmt::format(".{}.expire-{}", a->name, ::getpid()));
    if (Status st = walfmt::RenameDurable(a->dir, tmp); !st.ok()) return st;
    std::error_code ec;
    fs::remove_all(tmp, ec);
    if (ec) return Status::Io(fmt::format("{}: cannot remove: {}", tmp, ec.message()));
  }
  for (const auto& left : l->leftovers) {
    // An expire's leftover is always garbage; a create's staging directory only
    // when the process that made it (".<name>.tmp-<pid>-<seq>") is gone.
    if (left.find(".expire-") == std::string::npos) {
      const size_t at = left.rfind(".tmp-");
      const long pid = at == std::string::npos ? 0 : std::strtol(left.c_str() + at + 5, nullptr, 10);
      if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    }
    r.leftovers_removed.push_back(left);
    if (dry_run) continue;
    std::error_code ec;
    fs::remove_all(walfmt::JoinPath(repo, left), ec);
  }
  if (!dry_run) {
    if (Status st = walfmt::SyncDir(repo); !st.ok()) return st;
  }
  return r;
}

}  // namespace walcut::repo

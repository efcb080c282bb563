// The artifact manifest (repo/REPOSITORY.md, "Manifest"): Manifest to and
// from JSON, its self-checksum, and the XXH3-128 of files and bytes.
#include "repo/manifest.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <xxhash.h>

#include "repo/repository.h"
#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"

namespace walcut::repo {
using nlohmann::json;
using walfmt::JsonFields;
using walfmt::Lsn;
using walfmt::Result;
using walfmt::Status;

namespace {

const std::string kZeroSum(32, '0');

// 32 lower-case hex digits, the high 64 bits first.
std::string Hex128(const XXH128_hash_t& h) { return walfmt::Hex16(h.high64) + walfmt::Hex16(h.low64); }

json LsnJson(const Lsn& l) { return l.ToString(); }

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
    j["fingerprint"] = walfmt::Hex16(n.fingerprint);
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

// An increment's WAL: "wal", written for increments only.
void WalFromJson(JsonFields& f, const json& w, const std::string& path, ArtifactNode& n) {
  if (!f.ExpectObject(w, path)) return;
  n.has_wal = true;
  n.wal_from = f.Position(w, "from", path);
  n.wal_to = f.Position(w, "to", path);
  n.first_segment = f.U64(w, "first_segment", path);
  n.last_segment = f.U64(w, "last_segment", path);
  const std::string spath = JsonFields::Member(path, "segments");
  if (const json* segs = f.Array(w, "segments", path)) {
    for (size_t i = 0; i < segs->size() && f.ok(); ++i) {
      n.segments.push_back(f.StringValue((*segs)[i], JsonFields::Element(spath, i)));
    }
  }
}

// The cut's evidence on this node: "cut_start" and what goes with it,
// written for artifacts of a cut only.
void CutFromJson(JsonFields& f, const json& j, const std::string& path, Lsn cut_start, ArtifactNode& n) {
  n.has_cut = true;
  n.cut_start = cut_start;
  n.cut_finish = f.Position(j, "cut_finish", path);
  const json* e = f.Object(j, "evidence", path);
  if (!e) return;
  const std::string epath = JsonFields::Member(path, "evidence");
  n.start_time_us = f.U64(*e, "start_time_us", epath);
  n.finish_time_us = f.U64(*e, "finish_time_us", epath);
  n.commits_before_start = f.U64(*e, "local_state_commits", epath);
  n.commits_before_finish = f.U64(*e, "commits_before_finish", epath);
  n.before = f.U64(*e, "before", epath);
  n.after = f.U64(*e, "after", epath);
  n.before_after_start = f.U64(*e, "before_committed_after_start", epath);
  n.after_before_start = f.U64(*e, "after_committed_before_start", epath);
}

// nodes[i] (its "node" already read and checked as `id`).
ArtifactNode NodeFromJson(JsonFields& f, const json& j, const std::string& path, uint32_t id) {
  ArtifactNode n;
  n.node = id;
  n.continue_from = f.Position(j, "continue_from", path);
  if (const json* w = f.Find(j, "wal", path)) WalFromJson(f, *w, JsonFields::Member(path, "wal"), n);
  if (auto file = f.OptionalString(j, "file", path)) {  // fulls only
    n.snap_file = *file;
    n.fingerprint = f.Hex16(j, "fingerprint", path);
    n.entries = f.U64(j, "entries", path);
    n.snap_position = f.Position(j, "snapshot_position", path);
  }
  if (auto start = f.OptionalPosition(j, "cut_start", path)) CutFromJson(f, j, path, *start, n);
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
  j["cluster_id"] = walfmt::Hex16(m.cluster_id);
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

// Members the writer always writes, as null when there is no value ("parent",
// "snapshot", "cut"): present, and null or of their type.
const json* Nullable(JsonFields& f, const json& j, std::string_view key, std::string_view type, bool ok_type) {
  const json* v = f.Get(j, key, "");
  if (!v || v->is_null()) return nullptr;
  if (!ok_type) {
    f.Fail(key, fmt::format("expected {} or null, found {}", type, JsonFields::Shown(*v)));
    return nullptr;
  }
  return v;
}
std::string StringOrNull(JsonFields& f, const json& j, std::string_view key) {
  const json* v = f.Find(j, key, "");
  const json* s = Nullable(f, j, key, "a string", v && v->is_string());
  return s ? s->get<std::string>() : std::string();
}
std::optional<uint64_t> U64OrNull(JsonFields& f, const json& j, std::string_view key) {
  const json* v = f.Find(j, key, "");
  const json* u = Nullable(f, j, key, "an unsigned integer", v && v->is_number_unsigned());
  return u ? std::optional<uint64_t>(u->get<uint64_t>()) : std::nullopt;
}

// The top-level members but "schema", "nodes" and "files".
void TopFromJson(JsonFields& f, const json& j, bool v1, Manifest& m) {
  m.name = f.String(j, "name", "");
  m.type = f.String(j, "type", "");
  m.source = f.String(j, "source", "");
  m.parent = StringOrNull(f, j, "parent");
  m.seq = f.U64(j, "seq", "");
  // Version 1 wrote cluster_id as a decimal number, version 2 as 16 hex digits.
  m.cluster_id = v1 ? f.U64(j, "cluster_id", "") : f.Hex16(j, "cluster_id", "");
  m.cut = U64OrNull(f, j, "cut");
  m.snapshot = StringOrNull(f, j, "snapshot");
  m.time_us = f.U64(j, "time_us", "");
  m.verdict = f.String(j, "verdict", "");
  if (const json* e = f.Object(j, "evidence", "")) m.evidence = *e;
  if (const json* r = f.Find(j, "restore", "")) {  // synthetic fulls only
    if (r->is_object()) {
      m.restore = *r;
    } else {
      f.Fail("restore", fmt::format("expected an object, found {}", JsonFields::Shown(*r)));
    }
  }
}

Status NodesFromJson(JsonFields& f, const json& j, const std::string& origin, Manifest& m) {
  const json* nodes = f.Array(j, "nodes", "");
  for (size_t i = 0; nodes && i < nodes->size() && f.ok(); ++i) {
    const json& n = (*nodes)[i];
    const std::string path = JsonFields::Element("nodes", i);
    // Compared before the narrowing to 32 bits: node 2^32 is not node 0.
    const uint64_t id = f.U64(n, "node", path);
    if (!f.ok()) break;
    if (id != i) return Status::Corruption(fmt::format("{}: nodes[{}] is node {}", origin, i, id));
    m.nodes.push_back(NodeFromJson(f, n, path, static_cast<uint32_t>(id)));
  }
  return f.status();
}

Status FilesFromJson(JsonFields& f, const json& j, const std::string& origin, Manifest& m) {
  const json* files = f.Array(j, "files", "");
  for (size_t i = 0; files && i < files->size() && f.ok(); ++i) {
    const json& e = (*files)[i];
    const std::string path = JsonFields::Element("files", i);
    ArtifactFile af;
    af.path = f.String(e, "path", path);
    af.bytes = f.U64(e, "bytes", path);
    af.xxh3_128 = f.String(e, "xxh3_128", path);
    if (!f.ok()) break;
    if (af.path.empty() || af.path.find("..") != std::string::npos || af.path[0] == '/' || !IsHex32(af.xxh3_128)) {
      return Status::Corruption(fmt::format("{}: a files[] entry is malformed", origin));
    }
    m.files.push_back(std::move(af));
  }
  return f.status();
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

Status VerifyChecksum(const std::string& text, const std::string& origin) {
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
  return Status::Ok();
}

}  // namespace

Hasher::Hasher() : st_(XXH3_createState()) { XXH3_128bits_reset(st_); }
Hasher::~Hasher() { XXH3_freeState(st_); }

void Hasher::Update(std::string_view d) {
  XXH3_128bits_update(st_, d.data(), d.size());
  bytes_ += d.size();
}

std::string Hasher::Hex() const { return Hex128(XXH3_128bits_digest(st_)); }

Result<std::string> ReadSmall(const std::string& path) { return walfmt::ReadWholeFile(path, kMaxManifestBytes); }

bool IsHex32(const std::string& s) {
  return s.size() == 32 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

std::string Xxh3Hex(std::string_view data) { return Hex128(XXH3_128bits(data.data(), data.size())); }

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

// Every member the writer writes is required with its type; "restore" (a
// synthetic full's), a node's "wal" (increments), "file" (fulls) and
// "cut_start" (artifacts of a cut) with what goes with them are written only
// when they apply, so only they may be absent.
Result<Manifest> DecodeManifest(const std::string& text, const std::string& origin) {
  if (Status st = VerifyChecksum(text, origin); !st.ok()) return st;
  json j = walfmt::UnescapeJsonStrings(json::parse(text, nullptr, false));
  if (j.is_discarded() || !j.is_object()) return Status::Corruption(fmt::format("{}: not JSON", origin));
  JsonFields f(origin);
  const std::string schema = f.String(j, "schema", "");
  if (!f.ok()) return f.status();
  const bool v1 = schema == kArtifactSchemaV1;
  if (schema != kArtifactSchema && !v1) {
    return Status::Corruption(fmt::format("{}: schema '{}', expected '{}'", origin, schema, kArtifactSchema));
  }
  Manifest m;
  TopFromJson(f, j, v1, m);
  if (!f.ok()) return f.status();
  if (m.type != "full" && m.type != "incremental") {
    return Status::Corruption(fmt::format("{}: type '{}', expected full or incremental", origin, m.type));
  }
  if (m.type == "incremental" && (m.parent.empty() || !m.cut)) {
    return Status::Corruption(fmt::format("{}: an incremental artifact needs a parent and a cut", origin));
  }
  if (Status st = NodesFromJson(f, j, origin, m); !st.ok()) return st;
  if (Status st = FilesFromJson(f, j, origin, m); !st.ok()) return st;
  return m;
}

}  // namespace walcut::repo

#include "recovery/restore.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cut/evidence.h"
#include "recovery/restore_node.h"
#include "recovery/state_table.h"
#include "walfmt/bytes.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/duration.h"
#include "walfmt/file_io.h"
#include "walfmt/reader.h"
#include "walfmt/snapshot.h"
#include "walfmt/text_escape.h"
#include "walfmt/tx_map.h"
#include "walfmt/workers.h"

namespace walcut::recovery {
namespace fs = std::filesystem;
using nlohmann::json;
using walfmt::Lsn;
using walfmt::Status;
using walfmt::TxId;

namespace {

// "schema" kRestoreManifestSchema, or "format": "walcut-restore" (older walcut).
bool HasRestoreSchema(const nlohmann::json& m) {
  const auto schema = m.find("schema");
  const auto format = m.find("format");
  return (schema != m.end() && schema->is_string() && *schema == kRestoreManifestSchema) ||
         (format != m.end() && format->is_string() && *format == kRestoreManifestFormatV1);
}

// The fields a restore manifest is known by, each of the right type (a
// value of another type is not read as a default): the restore manifest's
// schema (a repository's synthetic full has the artifact's at the top level
// and the restore's manifest under "restore"), "cut" an unsigned number,
// "forced" absent or a boolean.
bool IsRestoreManifest(const nlohmann::json& m) {
  if (!m.is_object()) return false;
  const auto restore = m.find("restore");
  const bool known = HasRestoreSchema(m) || (restore != m.end() && restore->is_object() && HasRestoreSchema(*restore));
  const auto cut = m.find("cut");
  const auto forced = m.find("forced");
  return known && cut != m.end() && cut->is_number_unsigned() && (forced == m.end() || forced->is_boolean());
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// A JSON document (cluster.json, a base's manifest.json), read whole.
walfmt::Result<std::string> ReadText(const std::string& path) {
  return walfmt::ReadWholeFile(path, walfmt::kMaxJsonFileBytes);
}

bool PeekTx(std::span<const uint8_t> p, TxId& t) {
  if (p.size() < 12) return false;
  t.node = walfmt::LoadU32(p.data());
  t.seq = walfmt::LoadU64(p.data() + 4);
  return true;
}

// The writes of one transaction in flight on a node, decoded from its
// TX_DATA records as they are read, waiting for its outcome. Each write is a
// WriteHead, then the key, then the value, back to back in one buffer; the
// head carries the key's StateTable::Hash, and the slot of the state the
// write will probe is prefetched (the commit follows a few records later).
// A payload that does not decode marks the whole transaction: the restore
// fails if it is to be applied, as it failed when TX_DATA payloads were
// decoded at the commit. Memory: the transactions in flight, their writes
// with 9 bytes more each than in the WAL; buffers are reused.
class PendingWrites {
 public:
  // Decodes one TX_DATA payload and appends its writes; without a state
  // (a dry run) only counts them.
  void Add(std::span<const uint8_t> payload, const StateTable* state) {
    if (bad_) return;
    TxId tx;
    if (state == nullptr) {
      uint32_t count = 0;
      bad_ = !walfmt::VisitTxData(
          payload, tx, [&](uint32_t n) { count = n; }, [](const walfmt::WriteView&) {});
      if (!bad_) writes_ += count;
      return;
    }
    const size_t before = size_;
    uint32_t count = 0;
    const bool ok = walfmt::VisitTxData(
        payload, tx,
        [&](uint32_t n) {
          count = n;
          // Each write's 7 bytes of op and lengths become a 16-byte head.
          Reserve(size_ + payload.size() + size_t{9} * n);
        },
        [&](const walfmt::WriteView& w) {
          WriteHead h;
          h.hash = StateTable::Hash(w.key);
          h.value_len = static_cast<uint32_t>(w.value.size());
          h.key_len = static_cast<uint16_t>(w.key.size());
          h.op = static_cast<uint8_t>(w.op);
          state->Prefetch(h.hash);
          char* p = data_.get() + size_;
          std::memcpy(p, &h, sizeof h);
          CopyShort(p + sizeof h, w.key.data(), w.key.size());
          CopyShort(p + sizeof h + w.key.size(), w.value.data(), w.value.size());
          size_ += sizeof h + w.key.size() + w.value.size();
        });
    if (!ok) {
      size_ = before;
      bad_ = true;
      return;
    }
    writes_ += count;
  }

  bool bad() const { return bad_; }
  uint64_t writes() const { return writes_; }

  // Hints the state to load the entries the writes will overwrite (their
  // slots were hinted as the TX_DATA was read).
  void PrefetchEntries(const StateTable& state) const {
    for (const char* p = data_.get(); p < data_.get() + size_;) {
      WriteHead h;
      std::memcpy(&h, p, sizeof h);
      state.PrefetchEntry(h.hash);
      p += sizeof h + h.key_len + h.value_len;
    }
  }

  // Applies the writes in order.
  void ApplyTo(StateTable& state) const {
    const char* p = data_.get();
    const char* end = p + size_;
    while (p < end) {
      WriteHead h;
      std::memcpy(&h, p, sizeof h);
      const std::string_view key(p + sizeof h, h.key_len);
      if (h.op == static_cast<uint8_t>(walfmt::WriteOp::kDelete)) {
        state.Erase(key, h.hash);
      } else {
        state.Put(key, std::string_view(p + sizeof h + h.key_len, h.value_len), h.hash);
      }
      p += sizeof h + h.key_len + h.value_len;
    }
  }

  void Clear() {
    size_ = 0;
    writes_ = 0;
    bad_ = false;
  }

 private:
  struct WriteHead {
    uint64_t hash;
    uint32_t value_len;
    uint16_t key_len;
    uint8_t op;
    uint8_t unused;
  };
  static_assert(sizeof(WriteHead) == 16);

  void Reserve(size_t n) {
    if (n <= cap_) return;
    const size_t cap = std::max({n, cap_ * 2, size_t{256}});
    auto fresh = std::make_unique_for_overwrite<char[]>(cap);
    if (size_ > 0) std::memcpy(fresh.get(), data_.get(), size_);
    data_ = std::move(fresh);
    cap_ = cap;
  }

  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t cap_ = 0;
  uint64_t writes_ = 0;
  bool bad_ = false;
};

}  // namespace

namespace detail {

CutRule RuleOf(const cut::NodeCut& nc) {
  CutRule r;
  r.start = nc.start;
  for (const auto& t : nc.before) r.before.push_back(t.tx);
  for (const auto& t : nc.after) r.after.push_back(t.tx);
  std::sort(r.before.begin(), r.before.end());
  std::sort(r.after.begin(), r.after.end());
  for (const auto& t : r.before) r.before_bits |= CutRule::Bit(t);
  for (const auto& t : r.after) r.after_bits |= CutRule::Bit(t);
  return r;
}

namespace {

// Whether the record `v` is the one `e` expects; "" when it is, else what
// was found instead.
std::string Mismatch(const ExpectedRecord& e, const walfmt::RecordView& v) {
  const std::string found_type(walfmt::RecordTypeName(v.type));
  const bool type_ok = e.data_or_prepare
                           ? (v.type == walfmt::RecordType::kTxData || v.type == walfmt::RecordType::kTxPrepare)
                           : v.type == e.type;
  if (!type_ok) return fmt::format("a {} record", found_type);
  switch (v.type) {
    case walfmt::RecordType::kTxData:
    case walfmt::RecordType::kTxPrepare: {
      TxId t;
      if (!PeekTx(v.payload, t)) return fmt::format("a {} record that does not decode", found_type);
      if (t != e.tx) return fmt::format("{} of {}", found_type, t.ToString());
      return "";
    }
    case walfmt::RecordType::kTxCommit:
    case walfmt::RecordType::kTxRollback: {
      walfmt::TxOutcomeView x;
      if (!walfmt::ParseTxOutcome(v.type, v.payload, x))
        return fmt::format("a {} record that does not decode", found_type);
      if (x.tx != e.tx) return fmt::format("{} of {}", found_type, x.tx.ToString());
      if (v.type == walfmt::RecordType::kTxCommit && x.marker != e.marker) {
        return fmt::format("TX_COMMIT of {} with marker {} (expected marker {})", x.tx.ToString(), x.marker, e.marker);
      }
      return "";
    }
    default:
      break;
  }
  auto rec = walfmt::DecodePayload(v.type, v.payload);
  if (!rec.ok()) return fmt::format("a {} record that does not decode", found_type);
  if (const auto* cs = std::get_if<walfmt::CutStart>(&*rec)) {
    return cs->cut_id == e.cut ? "" : fmt::format("CUT_START({})", cs->cut_id);
  }
  if (const auto* cf = std::get_if<walfmt::CutFinish>(&*rec)) {
    if (cf->cut_id != e.cut) return fmt::format("CUT_FINISH({})", cf->cut_id);
    auto before = cf->before, after = cf->after;
    std::sort(before.begin(), before.end());
    std::sort(after.begin(), after.end());
    if (before != e.before || after != e.after) {
      return fmt::format("CUT_FINISH({}) tracking {} before / {} after, not the {} / {} expected", cf->cut_id,
                         before.size(), after.size(), e.before.size(), e.after.size());
    }
    return "";
  }
  if (const auto* sn = std::get_if<walfmt::Snapshot>(&*rec)) {
    if (sn->name != e.snapshot || sn->fingerprint != e.fingerprint) {
      return fmt::format("SNAPSHOT({}) with fingerprint {:016x}", sn->name, sn->fingerprint);
    }
    return "";
  }
  return fmt::format("a {} record", found_type);
}

}  // namespace

Status RunNode(NodeJob& job, bool dry_run, const std::function<void(uint64_t)>& progress, StateTable* reuse) {
  NodeRestore& o = job.out;
  std::vector<walfmt::Problem> problems;
  auto sink = [&](const walfmt::Problem& p) {
    if (p.fatal) problems.push_back(p);
  };
  auto listed = walfmt::ListSegments(job.wal_dir, sink);
  if (!listed.ok()) return listed.status();
  std::vector<walfmt::SegmentFile> segs;
  for (const auto& s : *listed) {
    if (s.index >= o.from.segment && s.index <= o.to.segment) segs.push_back(s);
  }
  const double cpu_start = ThreadCpuSeconds();
  // The base is read here, one node at a time per job, so that memory holds
  // the bases of the nodes being restored, not of every node at once.
  StateTable own;
  StateTable& state = reuse != nullptr ? *reuse : own;
  state.Clear(dry_run ? 0 : o.base_entries + 1024);
  if (!dry_run && !job.base_file.empty()) {
    // Streamed into the state: no map of the base is built. On an error the
    // state is dropped with the job.
    uint64_t read = 0;
    auto snap = walfmt::ReadSnapshotFile(job.base_file, [&](std::string_view key, std::string_view value) {
      state.Put(key, value);
      ++read;
    });
    if (!snap.ok()) return Status::Corruption(snap.status().message());
    if (snap->fingerprint != job.base_fingerprint || read != o.base_entries) {
      return Status::Corruption(fmt::format("{}: changed while the restore ran (fingerprint {:016x}, was {:016x})",
                                            job.base_file, snap->fingerprint, job.base_fingerprint));
    }
  }
  // The writes of the transactions in flight, decoded from their TX_DATA
  // records as they are read (a transaction may write several TX_DATA
  // records on one node), with their keys' hashes: pending maps the
  // transaction to its buffer in `buffers`. The buffers of finished
  // transactions are reused for new ones (no malloc per transaction), and so
  // is the map's storage.
  walfmt::FlatTxMap<uint32_t> pending;
  std::vector<PendingWrites> buffers;
  std::vector<uint32_t> free_buffers;
  auto release = [&](const TxId& t) {
    uint32_t b = 0;
    if (!pending.Erase(t, b)) return;
    buffers[b].Clear();
    free_buffers.push_back(b);
  };
  // A committed transaction is applied kApplyLag commits later, in commit
  // order (the state is read only at the end, so the result is the same):
  // at its commit its writes' slots have arrived (hinted at its TX_DATA),
  // and the entries they point at are hinted then, so that they too have
  // arrived when it is applied. Without the lag, loading each entry was a
  // quarter of the apply pass.
  constexpr size_t kApplyLag = 8;
  std::array<uint32_t, kApplyLag> lagging{};
  size_t lag_next = 0;  // the ring's oldest slot
  size_t lag_size = 0;
  auto apply_oldest = [&] {
    const uint32_t b = lagging[lag_next];
    lag_next = (lag_next + 1) % kApplyLag;
    --lag_size;
    buffers[b].ApplyTo(state);
    buffers[b].Clear();
    free_buffers.push_back(b);
  };
  Status failure;
  bool reached_end = false;
  uint64_t bytes = 0;
  uint64_t reported = 0;  // bytes already passed to progress
  walfmt::NodeReadOptions ro;
  ro.mode = walfmt::RecoveryMode::kStrict;  // the range must be intact (a torn tail lies beyond CUT_FINISH)
  ro.from = o.from;
  size_t next_expect = 0;  // job.expect[next_expect] is the next record to meet
  auto missed = [&](const ExpectedRecord& e, const std::string& found) {
    failure = Status::InvalidArgument(fmt::format("node {}: {} places {} at {}, but node {}'s WAL has {}", job.node,
                                                  job.origin, e.what, e.at.ToString(), job.node, found));
  };
  // Where the next expected record is (past every record when none is left),
  // and the byte count at which progress is told next: one comparison each
  // per record.
  auto next_at = [&] {
    return next_expect < job.expect.size() ? job.expect[next_expect].at : Lsn{UINT64_MAX, UINT64_MAX};
  };
  Lsn expect_at = next_at();
  auto next_report = [&] { return progress ? ((reported >> 20) + 1) << 20 : UINT64_MAX; };
  uint64_t report_at = next_report();
  // Inlined into the std::function's call thunk: one call per record, not two.
  auto visit = [&](const walfmt::RecordView& v) __attribute__((always_inline))->bool {
    if (!(v.lsn < expect_at)) [[unlikely]] {
      while (next_expect < job.expect.size() && job.expect[next_expect].at <= v.lsn) {
        const ExpectedRecord& e = job.expect[next_expect++];
        if (e.at < v.lsn) {
          missed(e, fmt::format("no record starting there (the next one is at {})", v.lsn.ToString()));
          return false;
        }
        if (const std::string m = Mismatch(e, v); !m.empty()) {
          missed(e, m + " there");
          return false;
        }
      }
      expect_at = next_at();
    }
    const auto to_end = v.lsn <=> o.to;
    if (to_end > 0) {
      reached_end = true;
      return false;
    }
    bytes += v.size();
    // Progress gets the bytes read since it was last told, once per MiB.
    if (bytes >= report_at) [[unlikely]] {
      progress(bytes - reported);
      reported = bytes;
      report_at = next_report();
    }
    TxId t;
    switch (v.type) {
      case walfmt::RecordType::kTxData: {
        if (!PeekTx(v.payload, t)) break;
        const uint32_t spare = free_buffers.empty() ? static_cast<uint32_t>(buffers.size()) : free_buffers.back();
        bool inserted = false;
        const uint32_t b = pending.FindOrInsert(t, spare, inserted);
        if (inserted) {
          if (free_buffers.empty()) {
            buffers.emplace_back();
          } else {
            free_buffers.pop_back();
          }
        }
        buffers[b].Add(v.payload, dry_run ? nullptr : &state);
        break;
      }
      case walfmt::RecordType::kTxCommit: {
        if (!PeekTx(v.payload, t)) break;
        bool apply = job.k.In(t, v.lsn);
        if (apply && job.j) apply = !job.j->In(t, v.lsn);
        uint32_t b = 0;
        const bool found = pending.Erase(t, b);
        if (apply) {
          if (!found) {
            failure = Status::Corruption(fmt::format(
                "node {}: transaction {} committed at {} belongs to the restore but its TX_DATA is not in {}..{}",
                job.node, t.ToString(), v.lsn.ToString(), o.from.ToString(), o.to.ToString()));
            return false;
          }
          PendingWrites& w = buffers[b];
          if (w.bad()) {
            failure = Status::Corruption(fmt::format("node {}: TX_DATA of {} does not decode", job.node, t.ToString()));
            return false;
          }
          ++o.txs_applied;
          o.writes_applied += w.writes();
          if (!dry_run) {
            w.PrefetchEntries(state);
            if (lag_size == kApplyLag) apply_oldest();
            lagging[(lag_next + lag_size++) % kApplyLag] = b;
            break;  // its buffer is released once applied
          }
        } else {
          ++o.txs_skipped;
        }
        if (found) {
          buffers[b].Clear();
          free_buffers.push_back(b);
        }
        break;
      }
      case walfmt::RecordType::kTxRollback:
        if (PeekTx(v.payload, t)) release(t);
        ++o.txs_rolled_back;
        break;
      default:
        break;
    }
    if (to_end == 0) {
      reached_end = true;
      return false;
    }
    return true;
  };
  auto read = walfmt::ReadNodeWal(segs, ro, visit, sink);
  o.bytes_to_read = bytes;
  if (progress && bytes > reported) progress(bytes - reported);
  if (!failure.ok()) return failure;
  while (lag_size > 0) apply_oldest();
  if (job.check_identity) {
    for (const auto& sc : read.segments) {
      if (!sc.header_ok) continue;
      if (sc.header.node_id != job.node) {
        return Status::InvalidArgument(fmt::format("{}: segment {} belongs to node {}, not node {}", job.wal_dir,
                                                   sc.file.path, sc.header.node_id, job.node));
      }
      if (job.expect_cluster && sc.header.cluster_id != job.cluster_id) {
        return Status::InvalidArgument(fmt::format("{}: segment {} is from cluster {:016x}, {} is for cluster {:016x}",
                                                   job.wal_dir, sc.file.path, sc.header.cluster_id, job.origin,
                                                   job.cluster_id));
      }
    }
  }
  if (reached_end && next_expect < job.expect.size() && !(o.to < job.expect[next_expect].at)) {
    const ExpectedRecord& e = job.expect[next_expect];
    return Status::InvalidArgument(fmt::format("node {}: {} places {} at {}, but node {}'s WAL has no record there",
                                               job.node, job.origin, e.what, e.at.ToString(), job.node));
  }
  if (!reached_end) {
    if (!problems.empty()) {
      return Status::Corruption(fmt::format("node {}: the WAL range {}..{} is damaged: {}", job.node, o.from.ToString(),
                                            o.to.ToString(), problems.front().ToString()));
    }
    return Status::Corruption(fmt::format("node {}: the WAL ends at {} before CUT_FINISH at {}", job.node,
                                          read.end.ToString(), o.to.ToString()));
  }
  o.apply_cpu_seconds = ThreadCpuSeconds() - cpu_start;
  if (dry_run) return Status::Ok();
  o.entries = state.size();
  std::unique_ptr<walfmt::SnapshotStreamWriter> file;
  if (!job.stage_file.empty()) {
    auto w = walfmt::SnapshotStreamWriter::Create(job.stage_file, job.header, state.size());
    if (!w.ok()) return w.status();
    file = std::move(w.value());
  }
  Status write_status;
  std::vector<std::pair<std::string, std::string>> kept;
  if (job.keep_state) kept.reserve(state.size());
  state.ForEachSorted([&](std::string_view k, std::string_view v) {
    if (file) write_status = file->Add(k, v);
    if (job.keep_state) kept.emplace_back(k, v);
    return write_status.ok();
  });
  if (!write_status.ok()) return write_status;
  // Freed before the kept copy is built; a reused table keeps its memory
  // for the worker's next node.
  if (reuse == nullptr || job.keep_state) state = StateTable(0);
  if (job.keep_state) {
    o.state =
        std::map<std::string, std::string>(std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()));
    o.fingerprint = walfmt::StateFingerprint(o.state);
  }
  if (file) {
    auto fp = file->Finish();
    if (!fp.ok()) return fp.status();
    o.fingerprint = *fp;
  }
  return Status::Ok();
}

json NodeEntryJson(const NodeRestore& nr) {
  return {{"node", nr.node},
          {"file", fmt::format("node-{}.snap", nr.node)},
          {"fingerprint", fmt::format("{:016x}", nr.fingerprint)},
          {"entries", nr.entries},
          {"wal_from", nr.from.ToString()},
          {"wal_to", nr.to.ToString()},
          {"cut_start", nr.cut_start.ToString()},
          {"cut_start_time_us", nr.cut_start_time_us},
          {"continue_from", nr.continue_from.ToString()},
          {"txs_applied", nr.txs_applied},
          {"txs_skipped", nr.txs_skipped},
          {"writes_applied", nr.writes_applied}};
}

}  // namespace detail

namespace {

using detail::CutRule;
using detail::NodeJob;
using detail::RuleOf;
using detail::RunNode;

// A base snapshot file, checked by ResolveBase.
struct BaseFile {
  std::string path;  // "" : genesis
  uint64_t fingerprint = 0;
  uint64_t entries = 0;
};

walfmt::Result<BaseInfo> ResolveBase(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout,
                                     const RestoreRequest& req, std::vector<BaseFile>& files,
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
  const bool is_restore = fs::exists(fs::path(req.base) / "manifest.json", ec);
  if (is_restore) {
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
    for (size_t i = 0; i < n; ++i) {
      base_rules[i] = RuleOf(*g->nodes[i]);
      b.position[i] = g->nodes[i]->ContinueFrom();
    }
  } else if (req.base.find('/') == std::string::npos && fs::is_directory(named, ec)) {
    b.kind = BaseKind::kFull;
    b.name = req.base;
    b.dir = named.string();
  } else if (fs::is_directory(req.base, ec) && fs::exists(fs::path(req.base) / "node-0.snap", ec)) {
    // A snapshot directory given by its path: the name comes from the files.
    b.kind = BaseKind::kFull;
    b.dir = req.base;  // the name comes from node 0's file, read below
  } else {
    return Status::NotFound(fmt::format("base '{}': no snapshot {} and no restore output (manifest.json) at that path",
                                        req.base, named.string()));
  }
  for (size_t i = 0; i < n; ++i) {
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
      // The snapshot must be the one the WAL recorded: same position, same fingerprint.
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
    // Checked here, before anything is written; each node's job reads it again.
    files[i] = BaseFile{file, snap->fingerprint, entries};
  }
  return b;
}

}  // namespace

const char* BaseKindName(BaseKind k) {
  switch (k) {
    case BaseKind::kGenesis:
      return "genesis";
    case BaseKind::kFull:
      return "full";
    case BaseKind::kRestored:
      return "restored";
  }
  return "unknown";
}

std::optional<uint64_t> RestoredBaseCut(const std::string& dir) {
  std::error_code ec;
  const std::string path = (fs::path(dir) / "manifest.json").string();
  if (dir.empty() || !fs::is_regular_file(path, ec)) return std::nullopt;
  auto text = ReadText(path);
  if (!text.ok()) return std::nullopt;
  const json m = walfmt::UnescapeJsonStrings(json::parse(*text, nullptr, false));
  if (!IsRestoreManifest(m) || (m.contains("forced") && m["forced"].get<bool>())) return std::nullopt;
  return m["cut"].get<uint64_t>();
}

std::optional<RestoredBase> ReadRestoredBase(const std::string& dir) {
  const auto k = RestoredBaseCut(dir);
  if (!k) return std::nullopt;
  auto text = ReadText((fs::path(dir) / "manifest.json").string());
  if (!text.ok()) return std::nullopt;
  const json m = json::parse(*text, nullptr, false);
  const auto nodes = m.find("nodes");
  if (nodes == m.end() || !nodes->is_array() || nodes->empty()) return std::nullopt;
  RestoredBase b;
  b.cut = *k;
  const size_t n = nodes->size();
  b.cut_start.assign(n, Lsn{});
  b.continue_from.assign(n, Lsn{});
  std::vector<bool> seen(n, false);
  for (const auto& e : *nodes) {
    if (!e.is_object()) return std::nullopt;
    const auto id = e.find("node");
    const auto start = e.find("cut_start");
    const auto from = e.find("continue_from");
    if (id == e.end() || !id->is_number_unsigned() || start == e.end() || !start->is_string() || from == e.end() ||
        !from->is_string()) {
      return std::nullopt;
    }
    const uint64_t i = id->get<uint64_t>();
    const auto s = Lsn::Parse(start->get<std::string>());
    const auto f = Lsn::Parse(from->get<std::string>());
    if (i >= n || seen[i] || !s || !f) return std::nullopt;
    seen[i] = true;
    b.cut_start[i] = *s;
    b.continue_from[i] = *f;
  }
  return b;
}

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
  // No node's scan stopped early: this was the whole WAL's scan (cut k is
  // the last, not in the WAL, or something before it stays unfinished).
  const bool whole = std::none_of(sums->begin(), sums->end(), [](const cut::NodeSummary& s) { return s.settled_cut; });
  auto cc = cut::Reconstruct(std::move(sums.value()), ro);
  if (!cc.ok()) return std::nullopt;
  const uint64_t bytes = BytesScanned(*cc);
  if (whole) {
    // As `walcut cuts` reads a cluster directory (cut::ReadCuts): the
    // transactions behind a disagreement named.
    if (!cut::NameDisagreements(*cc, layout).ok()) return std::nullopt;
    return CutVerdict{std::move(cc.value()), VerdictScan::kWhole, bytes};
  }
  if (!ConsistentIn(*cc, k)) return std::nullopt;
  return CutVerdict{std::move(cc.value()), VerdictScan::kToCut, bytes};
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

walfmt::Result<RestoreResult> Restore(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout,
                                      const RestoreRequest& req) {
  const cut::GlobalCut* g = cc.Find(req.cut);
  if (!g) return Status::NotFound(fmt::format("cut {} is not in the WAL", req.cut));
  if (g->status != cut::CutStatus::kConsistent && !req.force) {
    return Status::InvalidArgument(fmt::format("cut {} is {}: {}; refusing to restore it without --force", req.cut,
                                               cut::CutStatusName(g->status), g->reason));
  }
  const size_t n = cc.nodes.size();
  if (layout.wal_dirs.size() != n) {
    return Status::InvalidArgument(fmt::format("{} nodes in {}, {} summaries", layout.wal_dirs.size(), layout.dir, n));
  }
  for (size_t i = 0; i < n; ++i) {
    const cut::NodeCut* nc = g->nodes[i];
    if (!nc || !nc->started) {
      return Status::InvalidArgument(
          fmt::format("cut {} has no CUT_START on node {}: there is nothing to restore that node to", req.cut, i));
    }
    if (!nc->finished && !req.force) {
      return Status::InvalidArgument(fmt::format("cut {} has no CUT_FINISH on node {}", req.cut, i));
    }
  }
  if (!req.dry_run && !req.out.empty()) {
    std::error_code ec;
    if (fs::exists(req.out, ec)) {
      return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", req.out));
    }
  }
  RestoreResult r;
  r.cut = req.cut;
  r.status = g->status;
  r.reason = g->reason;
  std::vector<BaseFile> base_files;
  std::vector<std::optional<CutRule>> base_rules;
  auto base = ResolveBase(cc, layout, req, base_files, base_rules);
  if (!base.ok()) return base.status();
  r.base = std::move(base.value());
  if (layout.has_cluster_json) {
    auto cj = ReadText((fs::path(layout.dir) / "cluster.json").string());
    if (!cj.ok()) return cj.status();
    r.cluster_json = std::move(cj.value());
  }

  std::vector<NodeJob> jobs(n);
  for (size_t i = 0; i < n; ++i) {
    NodeJob& job = jobs[i];
    const cut::NodeCut& nc = *g->nodes[i];
    job.node = static_cast<uint32_t>(i);
    job.wal_dir = layout.wal_dirs[i];
    job.k = RuleOf(nc);
    job.j = base_rules[i];
    job.base_file = base_files[i].path;
    job.base_fingerprint = base_files[i].fingerprint;
    NodeRestore& o = job.out;
    o.node = job.node;
    o.from = r.base.position[i];
    // Without CUT_FINISH (forced) the sets are unknown: the node is restored
    // to its WAL prefix up to CUT_START, and the manifest says the cut was forced.
    o.to = nc.finished ? nc.finish : nc.start;
    o.cut_start = nc.start;
    o.cut_start_time_us = nc.start_time_us;
    o.continue_from = nc.ContinueFrom();
    o.base_entries = base_files[i].entries;
    if (r.base.kind == BaseKind::kFull && !(o.from < nc.start)) {
      return Status::InvalidArgument(fmt::format("base {} was taken on node {} at {}, after CUT_START({}) at {}",
                                                 r.base.name, i, o.from.ToString(), req.cut, nc.start.ToString()));
    }
    for (const auto& s : cc.nodes[i].segments) {
      if (s.index >= o.from.segment && s.index <= o.to.segment) o.segments.push_back(s);
    }
  }

  // With an output directory, each node's file is written as soon as the node
  // is restored (into a staging directory next to OUT, renamed into place by
  // WriteRestore), so that only the nodes being restored are in memory.
  // OUT is locked first (walfmt/staging.h): a second restore into the same
  // OUT fails here, before it reads anything, and leaves nothing behind.
  if (!req.dry_run && !req.out.empty()) {
    std::error_code ec;
    const fs::path target = fs::absolute(req.out, ec);
    auto lock = walfmt::OutputLock::Acquire(target.string());
    if (!lock.ok()) return lock.status();
    r.out_lock = std::move(lock.value());
    if (fs::exists(fs::symlink_status(target, ec))) {
      return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", req.out));
    }
    const fs::path stage = walfmt::TempNameBeside(target.string());
    walfmt::RegisterStaging(stage.string());  // before it exists: a signal from now on removes it
    if (!fs::create_directories(stage, ec) || ec) {
      walfmt::RemoveStaging(stage.string());
      return Status::Io(fmt::format("{}: cannot create: {}", stage.string(), ec.message()));
    }
    r.stage_dir = stage.string();
  }
  // The cluster_id the node files carry: the layout's, read by the one
  // cluster.json parser.
  const uint64_t cluster_id = layout.cluster_id;
  for (auto& job : jobs) {
    job.keep_state = req.keep_states || (req.out.empty() && !req.dry_run);
    if (r.stage_dir.empty()) continue;
    job.stage_file = (fs::path(r.stage_dir) / fmt::format("node-{}.snap", job.node)).string();
    job.header.node_id = job.node;
    job.header.cluster_id = cluster_id;
    job.header.wal_position = job.out.cut_start;
    job.header.time_us = job.out.cut_start_time_us;
    job.header.name = fmt::format("cut-{}", req.cut);
  }
  std::atomic<size_t> next{0};
  std::vector<Status> status(n);
  std::mutex progress_mu;
  uint64_t progress_total = 0;
  std::function<void(uint64_t)> progress;
  if (req.progress) {
    progress = [&](uint64_t b) {
      std::lock_guard<std::mutex> lock(progress_mu);
      progress_total += b;
      req.progress(progress_total);
    };
  }
  auto work = [&] {
    StateTable state;  // one per worker, reused node after node
    for (size_t i; (i = next.fetch_add(1)) < n;) status[i] = RunNode(jobs[i], req.dry_run, progress, &state);
  };
  unsigned threads = req.jobs ? req.jobs : std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, n));
  try {
    walfmt::RunWorkers(threads, work);
  } catch (...) {
    if (!r.stage_dir.empty()) walfmt::RemoveStaging(r.stage_dir);
    throw;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!status[i].ok()) {
      if (!r.stage_dir.empty()) walfmt::RemoveStaging(r.stage_dir);
      return status[i];
    }
  }
  for (auto& job : jobs) {
    r.bytes_read += job.out.bytes_to_read;
    r.nodes.push_back(std::move(job.out));
  }
  return r;
}

walfmt::Status WriteRestore(RestoreResult& r, const std::string& out, const std::string& extra_json) {
  std::error_code ec;
  if (fs::exists(out, ec))
    return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", out));
  const fs::path target = fs::absolute(out, ec);
  const bool staged = !r.stage_dir.empty();
  const fs::path tmp = staged ? fs::path(r.stage_dir) : fs::path(walfmt::TempNameBeside(target.string()));
  if (!staged) {
    if (!r.out_lock) {
      auto lock = walfmt::OutputLock::Acquire(target.string());
      if (!lock.ok()) return lock.status();
      r.out_lock = std::move(lock.value());
      if (fs::exists(fs::symlink_status(target, ec))) {
        return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", out));
      }
    }
    walfmt::RegisterStaging(tmp.string());
    if (!fs::create_directories(tmp, ec) || ec) {
      walfmt::RemoveStaging(tmp.string());
      return Status::Io(fmt::format("{}: cannot create: {}", tmp.string(), ec.message()));
    }
  }
  auto fail = [&](Status st) {
    walfmt::RemoveStaging(tmp.string());
    r.stage_dir.clear();
    return st;
  };
  // The cluster_id the node files carry, from the one cluster.json parser
  // (the layout the restore read was checked by it already).
  uint64_t cluster_id = 0;
  if (!staged && !r.cluster_json.empty()) {
    auto ci = walfmt::ParseClusterInfo(r.cluster_json, "cluster.json");
    if (!ci.ok()) return fail(ci.status());
    cluster_id = ci->cluster_id;
  }
  json m;
  m["schema"] = kRestoreManifestSchema;
  m["cut"] = r.cut;
  m["status"] = cut::CutStatusName(r.status);
  m["forced"] = r.status != cut::CutStatus::kConsistent;
  if (r.status != cut::CutStatus::kConsistent) m["problem"] = r.reason;
  m["base"] = {{"kind", BaseKindName(r.base.kind)}, {"name", r.base.name}};
  if (r.base.kind == BaseKind::kRestored) m["base"]["cut"] = r.base.cut;
  if (!r.base.dir.empty()) m["base"]["dir"] = r.base.dir;
  json nodes = json::array();
  for (auto& nr : r.nodes) {
    const std::string file = fmt::format("node-{}.snap", nr.node);
    if (!staged) {  // restored without an output directory: the states are in memory
      walfmt::SnapshotFile f;
      f.node_id = nr.node;
      f.wal_position = nr.cut_start;
      f.time_us = nr.cut_start_time_us;
      f.name = fmt::format("cut-{}", r.cut);
      f.entries = std::move(nr.state);  // written once; the result no longer holds the state
      f.cluster_id = cluster_id;
      if (Status st = walfmt::WriteSnapshotFile((tmp / file).string(), f); !st.ok()) return fail(st);
    }
    nodes.push_back(detail::NodeEntryJson(nr));
  }
  // Record times as UTC too when the cluster records its epoch.
  if (!r.cluster_json.empty()) {
    auto ci = walfmt::ParseClusterInfo(r.cluster_json, "cluster.json");
    const walfmt::ClusterClock clock{ci.ok() ? ci->epoch_unix_us : std::nullopt};
    for (size_t i = 0; i < nodes.size(); ++i) nodes[i]["cut_start_time"] = clock.Format(r.nodes[i].cut_start_time_us);
  }
  m["nodes"] = nodes;
  if (!r.cluster_json.empty()) {
    json cj = walfmt::UnescapeJsonStrings(json::parse(walfmt::CurrentClusterJsonText(r.cluster_json), nullptr, false));
    if (!cj.is_discarded()) m["cluster"] = cj;
  }
  if (!extra_json.empty()) {
    json extra = walfmt::UnescapeJsonStrings(json::parse(extra_json, nullptr, false));
    if (extra.is_object()) {
      for (auto it = extra.begin(); it != extra.end(); ++it) m[it.key()] = it.value();
    }
  }
  // The node files are synced already (SnapshotStreamWriter::Finish,
  // WriteSnapshotFile); the manifest is written last, then the directory is
  // renamed into place durably: OUT appears complete or not at all.
  if (Status st = walfmt::WriteNewFile((tmp / "manifest.json").string(), walfmt::DumpJson(m, 2) + "\n"); !st.ok())
    return fail(st);
  if (Status st = walfmt::SyncDir(tmp.string()); !st.ok()) return fail(st);
  if (Status st = walfmt::CommitStaging(tmp.string(), target.string()); !st.ok()) return fail(st);
  r.stage_dir.clear();
  r.out_lock.reset();
  return Status::Ok();
}

}  // namespace walcut::recovery

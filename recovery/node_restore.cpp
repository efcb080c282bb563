// One node's WAL pass of a restore when the cut's rule is known before the
// read (recovery/restore_node.h, RunNode): the single-host restore and the
// per-node restore, with the checks of the records the summaries place in
// the range. The pending writes, the state and the node file are
// recovery/apply_core.h.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "recovery/apply_core.h"
#include "recovery/restore_node.h"
#include "walfmt/reader.h"

namespace walcut::recovery {
using walfmt::Lsn;
using walfmt::Status;
using walfmt::TxId;

namespace detail {

CutRule MakeRule(Lsn start, std::vector<TxId> before, std::vector<TxId> after) {
  CutRule r;
  r.start = start;
  r.before = std::move(before);
  r.after = std::move(after);
  std::sort(r.before.begin(), r.before.end());
  std::sort(r.after.begin(), r.after.end());
  for (const auto& t : r.before) r.before_bits |= CutRule::Bit(t);
  for (const auto& t : r.after) r.after_bits |= CutRule::Bit(t);
  return r;
}

CutRule RuleOf(const cut::NodeCut& nc) {
  std::vector<TxId> before, after;
  for (const auto& t : nc.before) before.push_back(t.tx);
  for (const auto& t : nc.after) after.push_back(t.tx);
  return MakeRule(nc.start, std::move(before), std::move(after));
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
      if (x.tx != e.tx) return fmt::format("{} of {}", found_type, x.tx.Readable());
      if (v.type == walfmt::RecordType::kTxCommit && x.marker != e.marker) {
        return fmt::format("TX_COMMIT of {} with marker {} (expected marker {})", x.tx.Readable(), x.marker, e.marker);
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

// One node's restore, step by step: the WAL range's segments listed, the base
// read into the state, the apply pass (one read of the range), the checks of
// what the pass saw, and the node file written. The per-record work (Visit
// and what it calls) is inlined into the reader's callback: one call per
// record, as when it was one lambda.
class NodeRestorer : ApplyCore {
 public:
  NodeRestorer(NodeJob& job, bool dry_run, const std::function<void(uint64_t)>& progress, StateTable* reuse)
      : ApplyCore(job, dry_run, progress, reuse) {}

  Status Run() {
    if (Status st = ListRange(); !st.ok()) return st;
    const double cpu_start = ThreadCpuSeconds();
    if (Status st = LoadBase(); !st.ok()) return st;
    const walfmt::NodeRead read = ApplyPass();
    if (!failure_.ok()) return failure_;
    ApplyLagging();
    if (Status st = CheckIdentity(read); !st.ok()) return st;
    if (Status st = CheckEnd(read); !st.ok()) return st;
    o_.apply_cpu_seconds = ThreadCpuSeconds() - cpu_start;
    if (dry_run_) return Status::Ok();
    return WriteState();
  }

 private:
  // The segments of the job's WAL range.
  Status ListRange() {
    auto listed = walfmt::ListSegments(job_.wal_dir, Sink());
    if (!listed.ok()) return listed.status();
    for (const auto& s : *listed) {
      if (s.index >= o_.from.segment && s.index <= o_.to.segment) segs_.push_back(s);
    }
    return Status::Ok();
  }

  std::function<void(const walfmt::Problem&)> Sink() {
    return [this](const walfmt::Problem& p) {
      if (p.fatal) problems_.push_back(p);
    };
  }

  // Reads the range once; failure_ says why it stopped early.
  walfmt::NodeRead ApplyPass() {
    walfmt::NodeReadOptions ro;
    ro.mode = walfmt::RecoveryMode::kStrict;  // the range must be intact (a torn tail lies beyond CUT_FINISH)
    ro.from = o_.from;
    expect_at_ = NextExpectedAt();
    report_at_ = NextReport();
    // Inlined into the std::function's call thunk: one call per record, not two.
    auto visit = [this](const walfmt::RecordView& v) __attribute__((always_inline))->bool { return Visit(v); };
    auto read = walfmt::ReadNodeWal(segs_, ro, visit, Sink());
    o_.bytes_to_read = bytes_;
    ReportRest();
    return read;
  }

  // Where the next expected record is (past every record when none is left).
  Lsn NextExpectedAt() const {
    return next_expect_ < job_.expect.size() ? job_.expect[next_expect_].at : Lsn{UINT64_MAX, UINT64_MAX};
  }

  void Missed(const ExpectedRecord& e, const std::string& found) {
    failure_ = Status::InvalidArgument(fmt::format("node {}: {} places {} at {}, but node {}'s WAL has {}", job_.node,
                                                   job_.origin, e.what, e.at.ToString(), job_.node, found));
  }

  // The records expected at or before v's position: each must be v.
  bool MeetExpected(const walfmt::RecordView& v) {
    while (next_expect_ < job_.expect.size() && job_.expect[next_expect_].at <= v.lsn) {
      const ExpectedRecord& e = job_.expect[next_expect_++];
      if (e.at < v.lsn) {
        Missed(e, fmt::format("no record starting there (the next one is at {})", v.lsn.ToString()));
        return false;
      }
      if (const std::string m = Mismatch(e, v); !m.empty()) {
        Missed(e, m + " there");
        return false;
      }
    }
    expect_at_ = NextExpectedAt();
    return true;
  }

  __attribute__((always_inline)) bool Visit(const walfmt::RecordView& v) {
    if (!(v.lsn < expect_at_)) [[unlikely]] {
      if (!MeetExpected(v)) return false;
    }
    const auto to_end = v.lsn <=> o_.to;
    if (to_end > 0) {
      reached_end_ = true;
      return false;
    }
    CountBytes(v);
    TxId t;
    switch (v.type) {
      case walfmt::RecordType::kTxData:
        if (PeekTx(v.payload, t)) OnData(t, v);
        break;
      case walfmt::RecordType::kTxCommit:
        if (PeekTx(v.payload, t) && !OnCommit(t, v)) return false;
        break;
      case walfmt::RecordType::kTxRollback:
        if (PeekTx(v.payload, t)) Release(t);
        ++o_.txs_rolled_back;
        break;
      default:
        break;
    }
    if (to_end == 0) {
      reached_end_ = true;
      return false;
    }
    return true;
  }

  // false (with failure_ set) when the transaction belongs to the restore but
  // its writes are not there.
  __attribute__((always_inline)) bool OnCommit(const TxId& t, const walfmt::RecordView& v) {
    bool apply = job_.k.In(t, v.lsn);
    if (apply && job_.j) apply = !job_.j->In(t, v.lsn);
    uint32_t b = 0;
    const bool found = pending_.Erase(t, b);
    return Decide(t, v.lsn, apply, found, b);
  }

  // Per-node restore: every segment read carries this node id and cluster.
  Status CheckIdentity(const walfmt::NodeRead& read) const {
    if (!job_.check_identity) return Status::Ok();
    for (const auto& sc : read.segments) {
      if (!sc.header_ok) continue;
      if (sc.header.node_id != job_.node) {
        return Status::InvalidArgument(fmt::format("{}: segment {} belongs to node {}, not node {}", job_.wal_dir,
                                                   sc.file.path, sc.header.node_id, job_.node));
      }
      if (job_.expect_cluster && sc.header.cluster_id != job_.cluster_id) {
        return Status::InvalidArgument(fmt::format("{}: segment {} is from cluster {:016x}, {} is for cluster {:016x}",
                                                   job_.wal_dir, sc.file.path, sc.header.cluster_id, job_.origin,
                                                   job_.cluster_id));
      }
    }
    return Status::Ok();
  }

  // The pass reached CUT_FINISH, meeting every record expected up to it.
  Status CheckEnd(const walfmt::NodeRead& read) const {
    if (reached_end_ && next_expect_ < job_.expect.size() && !(o_.to < job_.expect[next_expect_].at)) {
      const ExpectedRecord& e = job_.expect[next_expect_];
      return Status::InvalidArgument(fmt::format("node {}: {} places {} at {}, but node {}'s WAL has no record there",
                                                 job_.node, job_.origin, e.what, e.at.ToString(), job_.node));
    }
    if (reached_end_) return Status::Ok();
    if (!problems_.empty()) {
      return Status::Corruption(fmt::format("node {}: the WAL range {}..{} is damaged: {}", job_.node,
                                            o_.from.ToString(), o_.to.ToString(), problems_.front().ToString()));
    }
    return Status::Corruption(fmt::format("node {}: the WAL ends at {} before CUT_FINISH at {}", job_.node,
                                          read.end.ToString(), o_.to.ToString()));
  }

  std::vector<walfmt::Problem> problems_;
  std::vector<walfmt::SegmentFile> segs_;
  bool reached_end_ = false;
  size_t next_expect_ = 0;  // job_.expect[next_expect_] is the next record to meet
  Lsn expect_at_;
};

}  // namespace

Status RunNode(NodeJob& job, bool dry_run, const std::function<void(uint64_t)>& progress, StateTable* reuse) {
  return NodeRestorer(job, dry_run, progress, reuse).Run();
}

}  // namespace detail
}  // namespace walcut::recovery

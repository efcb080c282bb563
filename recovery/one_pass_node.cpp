// One node's restore in the same read as its verdict scan
// (recovery/restore_node.h, OnePassNode): the apply pass of a restore of cut
// K from genesis, fed record by record by the scan.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "recovery/apply_core.h"
#include "recovery/restore_node.h"
#include "walfmt/record.h"

namespace walcut::recovery::detail {

// The apply pass of a restore of cut K from genesis, fed by the verdict scan
// (cut::RecordTap) instead of a second read. The rule of cut K needs the
// node's CUT_START(K) position and the sets of its CUT_FINISH(K), which come
// late in the pass; until then each commit is decided by what the protocol
// guarantees and the decision is checked once the sets are read:
// - Before CUT_START(K), a commit is in cut K unless it is in after(K). A
//   commit in after(K) carries a marker >= K (rule 5), so a commit with a
//   smaller marker is applied at once, one with a marker >= K is taken as
//   after(K) and skipped.
// - After CUT_START(K), a commit is in cut K only when it is in before(K),
//   whose members were in flight at CUT_START(K): the commits of those
//   transactions are held (with their writes), the others skipped.
// - At CUT_FINISH(K): every commit taken as after must be in after(K); a
//   member of after(K) must not have been applied before CUT_START (it was
//   taken as after, or it committed later); a member of before(K) must not
//   have been skipped after CUT_START (its commit was held, or it came
//   before CUT_START and was applied, as the rule says). The held commits
//   are then decided by the rule and applied in WAL order, after every
//   commit applied before them.
// When any of that fails (or anything else the two-pass restore would fail
// on), the pass is not usable and says why; the caller restores the
// two-pass way, which reports what is wrong exactly as it always did.
struct OnePassNode::Impl : ApplyCore {
  Impl(NodeJob& job, uint64_t cut, const std::function<void(uint64_t)>& progress, StateTable* reuse)
      : ApplyCore(job, false, progress, reuse), cut_(cut) {
    report_at_ = NextReport();
  }

  enum class Phase : uint8_t { kBefore, kOpen, kDone, kUnusable };

  struct Held {
    TxId t;
    Lsn at;
    uint32_t b;
  };

  void Unusable(const std::string& why) {
    if (phase_ == Phase::kUnusable) return;
    phase_ = Phase::kUnusable;
    why_not_ = fmt::format("node {}: {}", job_.node, why);
  }
  // What Decide found wrong (its message names the node).
  void Failed() {
    if (phase_ == Phase::kUnusable) return;
    phase_ = Phase::kUnusable;
    why_not_ = failure_.message();
  }

  __attribute__((always_inline)) void Visit(const walfmt::RecordView& v) {
    if (phase_ >= Phase::kDone) [[unlikely]]
      return;
    CountBytes(v);
    TxId t;
    switch (v.type) {
      case walfmt::RecordType::kTxData:
        if (PeekTx(v.payload, t)) OnData(t, v, phase_ == Phase::kOpen);
        return;
      case walfmt::RecordType::kTxCommit:
        return OnCommit(v);
      case walfmt::RecordType::kTxRollback:
        if (PeekTx(v.payload, t)) Release(t);
        ++o_.txs_rolled_back;
        return;
      case walfmt::RecordType::kCutStart:
      case walfmt::RecordType::kCutFinish:
      case walfmt::RecordType::kCutAbort:
        return OnCutRecord(v);
      default:
        return;
    }
  }

  __attribute__((always_inline)) void OnCommit(const walfmt::RecordView& v) {
    walfmt::TxOutcomeView x;
    if (!walfmt::ParseTxOutcome(walfmt::RecordType::kTxCommit, v.payload, x)) [[unlikely]]
      return Unusable(fmt::format("TX_COMMIT at {} does not decode", v.lsn.ToString()));
    const TxId& t = x.tx;
    uint32_t b = 0;
    const bool found = pending_.Erase(t, b);
    if (phase_ == Phase::kBefore) {
      if (x.marker < cut_) [[likely]] {
        if (!Decide(t, v.lsn, true, found, b)) Failed();
        return;
      }
      taken_after_.push_back(t);
      Decide(t, v.lsn, false, found, b);
      return;
    }
    if (found && !buffers_[b].late) {
      held_.push_back({t, v.lsn, b});
      return;
    }
    skipped_open_.push_back(t);
    Decide(t, v.lsn, false, found, b);
  }

  [[gnu::noinline]] void OnCutRecord(const walfmt::RecordView& v) {
    auto rec = walfmt::DecodePayload(v.type, v.payload);
    if (!rec.ok())
      return Unusable(fmt::format("{} at {} does not decode", walfmt::RecordTypeName(v.type), v.lsn.ToString()));
    if (const auto* cs = std::get_if<walfmt::CutStart>(&*rec)) {
      if (cs->cut_id != cut_) return;
      if (phase_ != Phase::kBefore) return Unusable(fmt::format("a second CUT_START({})", cut_));
      phase_ = Phase::kOpen;
      start_ = v.lsn;
      start_time_us_ = cs->time_us;
      return;
    }
    if (const auto* cf = std::get_if<walfmt::CutFinish>(&*rec)) {
      if (cf->cut_id != cut_) return;
      if (phase_ != Phase::kOpen) return Unusable(fmt::format("CUT_FINISH({}) without CUT_START before it", cut_));
      return Close(*cf, v.lsn);
    }
    if (const auto* ca = std::get_if<walfmt::CutAbort>(&*rec); ca && ca->cut_id == cut_) {
      Unusable(fmt::format("CUT_ABORT({})", cut_));
    }
  }

  // CUT_FINISH(K) at `at`: the guesses checked against its sets, the held
  // commits decided by the rule, the pass done.
  void Close(const walfmt::CutFinish& cf, Lsn at) {
    rule_ = MakeRule(start_, cf.before, cf.after);
    const std::vector<TxId>& before = rule_.before;
    const std::vector<TxId>& after = rule_.after;
    std::vector<TxId> held;
    held.reserve(held_.size());
    for (const Held& h : held_) held.push_back(h.t);
    std::sort(held.begin(), held.end());
    std::sort(taken_after_.begin(), taken_after_.end());
    std::sort(skipped_open_.begin(), skipped_open_.end());
    const auto has = [](const std::vector<TxId>& v, const TxId& t) {
      return std::binary_search(v.begin(), v.end(), t);
    };
    // Skipped before CUT_START: right only for a member of after(K).
    for (const TxId& t : taken_after_) {
      if (!has(after, t)) {
        return Unusable(fmt::format("{} committed before CUT_START({}) with marker >= {} but is not in its after set",
                                    t.ToString(), cut_, cut_));
      }
    }
    // A member of after(K) that committed before CUT_START must have been
    // skipped there, not applied: it was skipped, or it committed later.
    for (const TxId& t : after) {
      if (!has(taken_after_, t) && !has(held, t) && !has(skipped_open_, t)) {
        return Unusable(fmt::format("{} of after({}) was applied before CUT_START({})", t.ToString(), cut_, cut_));
      }
    }
    // Skipped after CUT_START without being held: right only outside before(K).
    for (const TxId& t : before) {
      if (has(skipped_open_, t)) {
        return Unusable(fmt::format("{} of before({}) was not in flight at CUT_START({})", t.ToString(), cut_, cut_));
      }
    }
    o_.to = at;
    for (const Held& h : held_) {
      if (!Decide(h.t, h.at, rule_.In(h.t, h.at), true, h.b)) return Failed();
    }
    held_.clear();
    ApplyLagging();
    phase_ = Phase::kDone;
  }

  const uint64_t cut_;
  Phase phase_ = Phase::kBefore;
  std::string why_not_;
  Lsn start_;
  uint64_t start_time_us_ = 0;
  std::vector<TxId> taken_after_;   // committed before CUT_START(K) with marker >= K
  std::vector<Held> held_;          // committed after CUT_START(K), in flight then
  std::vector<TxId> skipped_open_;  // committed after CUT_START(K), not in flight then (or no writes here)
  CutRule rule_;
  double cpu_start_ = ThreadCpuSeconds();

  friend class OnePassNode;
};

OnePassNode::OnePassNode(NodeJob& job, uint64_t cut, const std::function<void(uint64_t)>& progress, StateTable* reuse)
    : impl_(std::make_unique<Impl>(job, cut, progress, reuse)) {
  impl_->o_.from = Lsn{};
  impl_->state_.Clear(1024);
}

OnePassNode::~OnePassNode() = default;

void OnePassNode::Record(const walfmt::RecordView& v) { impl_->Visit(v); }

std::string OnePassNode::Finish() {
  Impl& p = *impl_;
  p.ReportRest();
  if (p.phase_ == Impl::Phase::kBefore || p.phase_ == Impl::Phase::kOpen) {
    p.Unusable(fmt::format("the scan ended before CUT_FINISH({})", p.cut_));
  }
  if (p.phase_ != Impl::Phase::kDone) return p.why_not_;
  NodeRestore& o = p.o_;
  o.bytes_to_read = p.bytes_;
  o.cut_start = p.start_;
  o.cut_start_time_us = p.start_time_us_;
  o.apply_cpu_seconds = ThreadCpuSeconds() - p.cpu_start_;
  return "";
}

Status OnePassNode::Write() {
  Impl& p = *impl_;
  p.job_.header.wal_position = p.o_.cut_start;
  p.job_.header.time_us = p.o_.cut_start_time_us;
  return p.WriteState();
}

}  // namespace walcut::recovery::detail

// Level restore of `walcut check` (recovery/check.h): each selected cut
// restored into a temporary directory the way `walcut restore` writes it, the
// node files read back and compared with the restore, the workload
// invariants run on what was read back; and the default invariant checker.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "recovery/check_internal.h"
#include "recovery/invariants.h"
#include "recovery/restore.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/snapshot.h"
#include "walfmt/workload.h"

namespace walcut::recovery {
using walfmt::Result;
using walfmt::Status;

namespace check_detail {
namespace fs = std::filesystem;

CheckItem RestoreItem(uint64_t k, const char* name) {
  return MakeItem(CheckLevel::kRestore, fmt::format("cut-{}", k), name);
}

std::optional<std::string> MakeTempDir(const CheckOptions& opt, CheckReport& rep) {
  std::string root = opt.temp_dir;
  if (root.empty()) {
    const char* t = std::getenv("TMPDIR");
    root = t && *t ? t : "/tmp";
  }
  const std::string tmpl = root + "/walcut-check-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    rep.errors.push_back(fmt::format("{}: cannot create a temporary directory: {}", tmpl, std::strerror(errno)));
    return std::nullopt;
  }
  return std::string(buf.data());
}

void RemoveTemp(const std::string& tmp, CheckReport& rep) {
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (ec) rep.errors.push_back(fmt::format("{}: cannot remove the temporary directory: {}", tmp, ec.message()));
}

bool IsRestoreFinding(const Status& st) {
  return st.code() == walfmt::ErrorCode::kCorruption || st.code() == walfmt::ErrorCode::kInvalidArgument;
}

CheckFinding RestoreFinding(const Status& st, uint64_t k, std::optional<uint32_t> node) {
  CheckFinding f;
  f.check = st.code() == walfmt::ErrorCode::kCorruption ? "restore-damaged" : "restore-refused";
  f.node = node;
  f.cut = k;
  f.message = st.message();
  return f;
}

namespace {

// The last restore that passed its checks, kept (in its temporary directory)
// as the base of the next cut's restore.
struct RestoreChain {
  std::string tmp;  // "" : none yet
  std::string out;
  uint64_t cut = 0;
};

// The three items of one cut's restore and its RestoreCheck, added to the
// report together.
struct CutRestore {
  explicit CutRestore(uint64_t k)
      : restore(RestoreItem(k, "restore")), fps(RestoreItem(k, "fingerprints")), inv(RestoreItem(k, "invariants")) {
    rc.cut = k;
  }

  void SkipRest(const std::string& why) {
    fps.outcome = ItemOutcome::kSkipped;
    fps.note = why;
    inv.outcome = ItemOutcome::kSkipped;
    inv.note = why;
  }
  void NotRestored(const std::string& note) {
    restore.outcome = ItemOutcome::kSkipped;
    restore.note = note;
    SkipRest("the cut was not restored");
  }
  void AddTo(CheckReport& rep) {
    rep.items.push_back(std::move(restore));
    rep.items.push_back(std::move(fps));
    rep.items.push_back(std::move(inv));
    rep.restores.push_back(std::move(rc));
  }

  RestoreCheck rc;
  CheckItem restore;
  CheckItem fps;
  CheckItem inv;
};

// The restore of one cut, from the chain's last restore when there is one.
class RestoreOne {
 public:
  // `stage`: the progress stage name of this restore ("cut 5/16: restore").
  RestoreOne(const CheckOptions& opt, const cut::ClusterCuts& cc, const walfmt::ClusterLayout& layout, uint64_t k,
             RestoreChain& chain, CheckReport& rep, std::string stage)
      : opt_(opt), cc_(cc), layout_(layout), k_(k), chain_(chain), rep_(rep), items_(k), stage_(std::move(stage)) {}

  void Run() {
    const cut::GlobalCut* g = cc_.Find(k_);
    if (g == nullptr || g->status != cut::CutStatus::kConsistent) {
      // The cut's status item already carries the finding; a restore of it
      // would be refused (walcut restore --force restores it anyway).
      items_.NotRestored(
          fmt::format("not restored: cut {} is {} (see its status)", k_, g ? cut::CutStatusName(g->status) : "absent"));
      items_.AddTo(rep_);
      return;
    }
    // The restore is written the way `walcut restore` writes it, into a
    // directory of our own (its node files are staged next to OUT as nodes
    // finish, so memory holds one node's state at a time).
    const auto tmp = MakeTempDir(opt_, rep_);
    if (!tmp) {
      items_.NotRestored("error: no temporary directory");
      items_.AddTo(rep_);
      return;
    }
    const std::string out = *tmp + "/restore";
    if (!Request(out)) {
      std::error_code ec;
      std::filesystem::remove_all(*tmp, ec);
      items_.AddTo(rep_);
      return;
    }
    auto r = Restore(cc_, layout_, req_);
    Status written = Status::Ok();
    if (r.ok()) written = WriteRestore(*r, out);
    if (Written(r, written)) Check(*r, out);
    Chain(*tmp, out);
    items_.AddTo(rep_);
  }

 private:
  // The request; false (the cut not restored) when no base can serve.
  bool Request(const std::string& out) {
    req_.cluster_dir = opt_.dir;
    req_.cut = k_;
    req_.out = out;
    req_.jobs = opt_.jobs;
    if (!chain_.tmp.empty()) req_.base = chain_.out;  // reads only the WAL between the two cuts
    if (chain_.tmp.empty() && cc_.pruned) {
      // Genesis is gone with the removed segments: the newest full snapshot
      // the WAL still holds serves, if any does.
      auto choice = ChooseBase(cc_, layout_, k_);
      if (!choice.ok()) {
        items_.NotRestored("not restored: " + choice.status().message());
        return false;
      }
      req_.base = choice->base;
      chosen_why_ = choice->why;
    }
    if (opt_.progress) {
      const uint64_t total = EstimateBytes();
      req_.progress = [this, total](uint64_t b) { Progress(opt_, stage_, b, total); };
      Progress(opt_, stage_, 0, total);
    }
    return true;
  }

  // Whether the restore was made and written; the items say why not.
  bool Written(const Result<RestoreResult>& r, const Status& written) {
    if (!r.ok()) {
      if (IsRestoreFinding(r.status())) {
        items_.restore.findings.push_back(RestoreFinding(r.status(), k_, std::nullopt));
        items_.restore.outcome = ItemOutcome::kFail;
      } else {
        rep_.errors.push_back(r.status().message());
        items_.restore.outcome = ItemOutcome::kSkipped;
        items_.restore.note = "error: " + r.status().message();
      }
      items_.SkipRest("the cut was not restored");
      return false;
    }
    if (!written.ok()) {
      rep_.errors.push_back(written.message());
      items_.restore.outcome = ItemOutcome::kSkipped;
      items_.restore.note = "error: " + written.message();
      items_.SkipRest("the restore could not be written");
      return false;
    }
    return true;
  }

  void Check(const RestoreResult& r, const std::string& out) {
    RestoreCheck& rc = items_.rc;
    rc.restored = true;
    rc.base = r.base.name;
    for (const auto& n : r.nodes) {
      rc.fingerprints.push_back(n.fingerprint);
      rc.entries += n.entries;
    }
    items_.restore.note = fmt::format("base {}{}, {} nodes, {} keys", r.base.name,
                                      !chosen_why_.empty() ? fmt::format(" ({})", chosen_why_)
                                      : req_.base.empty()  ? ""
                                                           : " (its restore, checked above)",
                                      r.nodes.size(), rc.entries);
    std::vector<walfmt::SnapshotFile> back(r.nodes.size());
    const bool all_back = ReadBack(r, out, back);
    Invariants(all_back, back);
  }

  // Reads every file back: ReadSnapshotFile checks its checksums and that its
  // fingerprint matches its entries; it must also match the restore's.
  // Whether every file read back.
  bool ReadBack(const RestoreResult& r, const std::string& out, std::vector<walfmt::SnapshotFile>& back) {
    CheckItem& fps = items_.fps;
    bool all_back = true;
    std::string fp_note;
    for (size_t i = 0; i < r.nodes.size(); ++i) {
      const NodeRestore& n = r.nodes[i];
      const std::string path = fmt::format("{}/node-{}.snap", out, n.node);
      const std::string shown = fmt::format("node-{}.snap", n.node);
      auto f = walfmt::ReadSnapshotFile(path);
      if (!f.ok()) {
        all_back = false;
        if (f.status().code() == walfmt::ErrorCode::kIo) {
          rep_.errors.push_back(f.status().message());
          continue;
        }
        CheckFinding c = FingerprintFinding(n, shown);
        c.message = fmt::format("cut {}, node {}: the restored {} does not read back: {}", k_, n.node, shown,
                                f.status().message());
        fps.findings.push_back(std::move(c));
        continue;
      }
      if (f->fingerprint != n.fingerprint || f->entries.size() != n.entries) {
        CheckFinding c = FingerprintFinding(n, shown);
        c.expected = fmt::format("fingerprint {:016x}, {} keys", n.fingerprint, n.entries);
        c.found = fmt::format("fingerprint {:016x}, {} keys", f->fingerprint, f->entries.size());
        c.message = fmt::format("cut {}, node {}: {} read back differs from the restored state: expected {}, found {}",
                                k_, n.node, shown, c.expected, c.found);
        fps.findings.push_back(std::move(c));
      }
      fp_note += fmt::format("{}node {} {:016x}", fp_note.empty() ? "" : ", ", n.node, n.fingerprint);
      back[i] = std::move(*f);
    }
    fps.note = fp_note;
    fps.outcome = fps.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
    return all_back;
  }

  CheckFinding FingerprintFinding(const NodeRestore& n, const std::string& shown) const {
    CheckFinding c;
    c.check = "fingerprint";
    c.node = n.node;
    c.cut = k_;
    c.file = shown;
    return c;
  }

  // The workload invariants on the node states as read back.
  void Invariants(bool all_back, const std::vector<walfmt::SnapshotFile>& back) {
    CheckItem& inv = items_.inv;
    if (!opt_.invariants) {
      inv.outcome = ItemOutcome::kSkipped;
      inv.note = "workload invariants are not available in this build (recovery/invariants.h)";
      return;
    }
    if (!all_back) {
      inv.outcome = ItemOutcome::kSkipped;
      inv.note = "not run: a restored file does not read back";
      return;
    }
    NodeStates states;
    for (const auto& b : back) states.push_back(&b.entries);
    auto res = opt_.invariants(opt_.dir, states);
    if (!res.ok()) {
      rep_.errors.push_back(res.status().message());
      inv.outcome = ItemOutcome::kSkipped;
      inv.note = "error: " + res.status().message();
    } else if (!res->ran) {
      inv.outcome = ItemOutcome::kSkipped;
      inv.note = res->summary;
    } else {
      items_.rc.invariants_ran = true;
      inv.note = res->summary;
      inv.findings = res->findings;
      for (auto& f : inv.findings) f.cut = k_;
      inv.outcome = inv.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
    }
  }

  // A restore that passed every check becomes the next cut's base; the one
  // it replaces, or a restore with findings, is removed.
  void Chain(const std::string& tmp, const std::string& out) {
    const bool checked =
        items_.rc.restored && items_.fps.outcome == ItemOutcome::kPass && items_.inv.outcome != ItemOutcome::kFail;
    if (checked && opt_.chain_restores) {
      if (!chain_.tmp.empty()) RemoveTemp(chain_.tmp, rep_);
      chain_ = RestoreChain{tmp, out, k_};
    } else {
      RemoveTemp(tmp, rep_);
    }
  }

  const CheckOptions& opt_;
  const cut::ClusterCuts& cc_;
  const walfmt::ClusterLayout& layout_;
  const uint64_t k_;
  RestoreChain& chain_;
  CheckReport& rep_;
  CutRestore items_;
  std::string stage_;
  // About the WAL bytes the restore reads, for its progress: on each node
  // from the chain's cut's CUT_START (or the start of the WAL) to this cut's
  // CUT_FINISH.
  uint64_t EstimateBytes() const {
    const cut::GlobalCut* g = cc_.Find(k_);
    const cut::GlobalCut* from_cut = chain_.tmp.empty() ? nullptr : cc_.Find(chain_.cut);
    uint64_t total = 0;
    for (uint32_t i = 0; i < cc_.nodes.size(); ++i) {
      if (g == nullptr || i >= g->nodes.size() || g->nodes[i] == nullptr || !g->nodes[i]->finished) continue;
      walfmt::Lsn from = cc_.WalStart(i);
      if (from_cut && i < from_cut->nodes.size() && from_cut->nodes[i] && from_cut->nodes[i]->started) {
        from = std::max(from, from_cut->nodes[i]->start);
      }
      const walfmt::Lsn to = g->nodes[i]->finish;
      for (const auto& s : cc_.nodes[i].segments) {
        const uint64_t lo = s.index == from.segment ? from.offset : 0;
        const uint64_t hi = s.index == to.segment ? to.offset : s.bytes;
        if (s.index < from.segment || s.index > to.segment || hi <= lo) continue;
        total += hi - lo;
      }
    }
    return total;
  }

  RestoreRequest req_;
  std::string chosen_why_;  // why ChooseBase chose the base, when it did
};

}  // namespace

void RunRestores(const CheckOptions& opt, const cut::ClusterCuts& cc, const walfmt::ClusterLayout& layout,
                 CheckReport& rep) {
  RestoreChain chain;
  std::vector<uint64_t> cuts;
  for (const auto& g : cc.cuts) {
    if (opt.cut ? g.cut_id != *opt.cut : g.status != cut::CutStatus::kConsistent) continue;
    cuts.push_back(g.cut_id);
  }
  for (size_t i = 0; i < cuts.size(); ++i) {
    // "cut 5/16": the fifth of sixteen restores, cut 5; the id is added when it differs.
    std::string stage = cuts[i] == i + 1 ? fmt::format("cut {}/{}: restore", i + 1, cuts.size())
                                         : fmt::format("cut {} ({}/{}): restore", cuts[i], i + 1, cuts.size());
    RestoreOne(opt, cc, layout, cuts[i], chain, rep, std::move(stage)).Run();
  }
  if (!chain.tmp.empty()) RemoveTemp(chain.tmp, rep);
}

}  // namespace check_detail

InvariantChecker DefaultInvariantChecker() {
  return [](const std::string& dir, const NodeStates& states) -> Result<InvariantOutcome> {
    auto info = walfmt::LoadClusterInfo(dir);
    InvariantOutcome out;
    if (!info.ok()) {
      if (info.status().code() == walfmt::ErrorCode::kNotFound) {
        out.summary = fmt::format("not run: {} (the workload is unknown)", info.status().message());
        return out;
      }
      return info.status();
    }
    const InvariantReport rep = CheckInvariants(*info, states, OptionsFor(info->workload));
    out.ran = true;
    out.summary =
        fmt::format("workload {}: {} key copies checked", walfmt::WorkloadName(info->workload), rep.keys_checked);
    if (rep.bank_total) out.summary += fmt::format(", bank total {}", *rep.bank_total);
    if (info->has_cycle()) out.summary += fmt::format(", ring walked {} keys", rep.ring_walked);
    for (const auto& f : rep.findings) {
      CheckFinding c;
      c.check = "invariant " + f.check;
      c.node = f.node;
      c.expected = f.expected;
      c.found = f.found;
      c.message = f.message;
      if (!f.keys.empty()) {
        std::string keys;
        for (const auto& k : f.keys) keys += (keys.empty() ? "" : ",") + k;
        c.message += fmt::format(" [keys {}{}]", keys, f.key_count > f.keys.size() ? ",..." : "");
      }
      out.findings.push_back(std::move(c));
    }
    if (rep.total_findings > rep.findings.size()) {
      CheckFinding c;
      c.check = "invariant";
      c.message = fmt::format("{} more invariant findings not listed", rep.total_findings - rep.findings.size());
      out.findings.push_back(std::move(c));
    }
    return out;
  };
}

}  // namespace walcut::recovery

// `walcut check` of one node where its WAL lives (CheckOptions::node): the
// files level on its WAL directory, then (level restore) the verdict's status
// of the cut and the node's restore from the verdict, read back. Items are
// named "node I: ..." so that the reports of every node merge.
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "recovery/check_internal.h"
#include "recovery/part.h"
#include "walfmt/snapshot.h"

namespace walcut::recovery::check_detail {
namespace {
namespace fs = std::filesystem;
using walfmt::Result;
using walfmt::Status;

// Usage errors: a directory that is not there, a level one node cannot check,
// a verdict missing or for another cut.
Status CheckNodeOptions(const CheckOptions& opt) {
  std::error_code ec;
  if (!fs::is_directory(opt.dir, ec)) return Status::NotFound(fmt::format("{}: no such directory", opt.dir));
  if (opt.level == CheckLevel::kCuts) {
    return Status::InvalidArgument(
        "level cuts needs every node's WAL or summary: run `walcut check` on the cluster, or `walcut cuts` on the "
        "summaries; one node checks level files, or level restore with --verdict");
  }
  if (opt.level == CheckLevel::kRestore && opt.verdict == nullptr) {
    return Status::InvalidArgument(
        "level restore of one node needs the cut's verdict (--verdict FILE, from `walcut "
        "cuts SUMMARIES... --verdict-out FILE --cut K`)");
  }
  if (opt.verdict && opt.cut && *opt.cut != opt.verdict->cut) {
    return Status::InvalidArgument(fmt::format("the verdict is for cut {}, not cut {}", opt.verdict->cut, *opt.cut));
  }
  return Status::Ok();
}

// The verdict's status of the cut: a finding unless it is consistent.
CheckItem VerdictItem(const Verdict& v, uint32_t node) {
  const uint64_t k = v.cut;
  CheckItem status = MakeItem(CheckLevel::kCuts, fmt::format("cut-{}", k), fmt::format("node {}: verdict", node));
  if (v.status == cut::CutStatus::kConsistent) {
    status.note = fmt::format("cut {} is consistent (verdict {}), base {}", k, v.id, v.base_name);
  } else {
    CheckFinding f;
    f.check = "status";
    f.cut = k;
    f.expected = "consistent";
    f.found = cut::CutStatusName(v.status);
    f.message = fmt::format("cut {} is {} (verdict {}): {}", k, f.found, v.id, v.reason);
    status.findings.push_back(std::move(f));
    status.outcome = ItemOutcome::kFail;
  }
  return status;
}

// The node's restore from the verdict into a temporary directory, and its
// file read back: items "node I: restore" and "node I: fingerprint".
class NodeRestoreCheck {
 public:
  NodeRestoreCheck(const CheckOptions& opt, const Verdict& v, uint32_t node, CheckReport& rep)
      : opt_(opt), v_(v), node_(node), k_(v.cut), rep_(rep), restore_(RestoreItem(k_, "")), fps_(RestoreItem(k_, "")) {
    restore_.name = fmt::format("node {}: restore", node);
    fps_.name = fmt::format("node {}: fingerprint", node);
  }

  void Run() {
    if (v_.status != cut::CutStatus::kConsistent) {
      NotRestored(fmt::format("not restored: cut {} is {} (see the verdict)", k_, cut::CutStatusName(v_.status)));
      Finish();
      return;
    }
    const auto tmp = MakeTempDir(opt_, rep_);
    if (!tmp) {
      NotRestored("error: no temporary directory");
      Finish();
      return;
    }
    const std::string out = *tmp + "/part";
    PartRequest req;
    req.verdict = &v_;
    req.node = node_;
    req.wal_dir = opt_.dir;
    req.base_dir = opt_.base_dir;
    req.out = out;
    req.progress = [this](uint64_t b) { Progress(opt_, "restore", b, 0); };
    auto r = RestorePart(req);
    Status written = Status::Ok();
    if (r.ok()) written = WritePart(*r, v_, out);
    if (!r.ok() || !written.ok()) {
      Failed(r.ok() ? written : r.status(), r.ok());
    } else {
      ReadBack(r->nodes.front(), out);
    }
    RemoveTemp(*tmp, rep_);
    Finish();
  }

 private:
  void NotRestored(const std::string& note) {
    restore_.outcome = ItemOutcome::kSkipped;
    restore_.note = note;
    fps_.outcome = ItemOutcome::kSkipped;
    fps_.note = "the node was not restored";
  }

  // A restore that failed (`in_write`: it was made, writing it failed): a
  // finding about the data, or an error of the tool.
  void Failed(const Status& st, bool in_write) {
    if (in_write || !IsRestoreFinding(st)) {
      rep_.errors.push_back(st.message());
      NotRestored("error: " + st.message());
      return;
    }
    NotRestored("");
    restore_.findings.push_back(RestoreFinding(st, k_, node_));
    restore_.outcome = ItemOutcome::kFail;
  }

  void ReadBack(const NodeRestore& n, const std::string& out) {
    restore_.note = fmt::format("base {}, WAL {}..{}, {} transactions applied, {} keys", v_.base_name,
                                n.from.ToString(), n.to.ToString(), n.txs_applied, n.entries);
    const std::string shown = fmt::format("node-{}.snap", node_);
    auto f = walfmt::ReadSnapshotFile(fmt::format("{}/{}", out, shown));
    if (!f.ok() && f.status().code() == walfmt::ErrorCode::kIo) {
      rep_.errors.push_back(f.status().message());
      fps_.outcome = ItemOutcome::kSkipped;
      fps_.note = "error: " + f.status().message();
    } else if (!f.ok() || f->fingerprint != n.fingerprint || f->entries.size() != n.entries) {
      CheckFinding c;
      c.check = "fingerprint";
      c.node = node_;
      c.cut = k_;
      c.file = shown;
      c.expected = fmt::format("fingerprint {:016x}, {} keys", n.fingerprint, n.entries);
      c.found = f.ok() ? fmt::format("fingerprint {:016x}, {} keys", f->fingerprint, f->entries.size())
                       : f.status().message();
      c.message = fmt::format("cut {}, node {}: the restored {} does not read back as restored: expected {}, found {}",
                              k_, node_, shown, c.expected, c.found);
      fps_.findings.push_back(std::move(c));
      fps_.outcome = ItemOutcome::kFail;
    } else {
      fps_.note = fmt::format("node {} {:016x}", node_, n.fingerprint);
    }
  }

  void Finish() {
    rep_.items.push_back(std::move(restore_));
    rep_.items.push_back(std::move(fps_));
  }

  const CheckOptions& opt_;
  const Verdict& v_;
  const uint32_t node_;
  const uint64_t k_;
  CheckReport& rep_;
  CheckItem restore_;
  CheckItem fps_;
};

}  // namespace

Result<CheckReport> RunNodeCheck(const CheckOptions& opt) {
  if (Status st = CheckNodeOptions(opt); !st.ok()) return st;
  CheckReport rep;
  rep.dir = opt.dir;
  rep.level = opt.level;
  rep.selected_cut = opt.verdict ? std::optional<uint64_t>(opt.verdict->cut) : opt.cut;
  walfmt::ClusterLayout layout;
  layout.dir = opt.dir;
  layout.wal_dirs = {opt.dir};
  RunFiles(opt, layout, rep);
  if (opt.level == CheckLevel::kFiles) return rep;

  rep.items.push_back(VerdictItem(*opt.verdict, *opt.node));
  NodeRestoreCheck(opt, *opt.verdict, *opt.node, rep).Run();
  return rep;
}

}  // namespace walcut::recovery::check_detail

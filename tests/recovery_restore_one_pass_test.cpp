// A restore of cut K from genesis in one read of each node's WAL
// (recovery::RestoreOnePass): the apply pass rides on the verdict scan and
// decides each commit before cut K's sets are read. Checked against the
// two-pass restore (ScanToCut, then Restore) over seeds of shapes, crashes,
// full snapshots and WAL retention: the same node files, manifest, verdict
// and reason for the base, or no result and nothing left behind. And, on
// hand-made WALs, each check of the early decisions against the sets.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "cut_support.h"
#include "node/cluster.h"
#include "recovery/restore.h"
#include "recovery/restore_node.h"
#include "recovery/state_table.h"
#include "scratch_dir.h"
#include "sweep_support.h"
#include "walfmt/reader.h"
#include "walfmt/record.h"
#include "walfmt/writer.h"

namespace fs = std::filesystem;
using walcut::cut::ClusterCuts;
using walcut::cut::CutStatus;
using walcut::node::ClusterOptions;
using walcut::recovery::OnePassRestore;
using walcut::recovery::RestoreRequest;
using TempDir = walcut::test::ScratchDir;
using walfmt::TxId;

namespace {

std::string ReadAll(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

// The node files byte for byte and the manifests but for the CPU seconds.
void SameFiles(const fs::path& a, const fs::path& b, uint32_t nodes) {
  for (uint32_t n = 0; n < nodes; ++n) {
    const std::string fa = ReadAll(a / fmt::format("node-{}.snap", n));
    CHECK(!fa.empty());
    CHECK(fa == ReadAll(b / fmt::format("node-{}.snap", n)));
  }
  nlohmann::json ma = nlohmann::json::parse(ReadAll(a / "manifest.json"));
  nlohmann::json mb = nlohmann::json::parse(ReadAll(b / "manifest.json"));
  for (auto* m : {&ma, &mb}) {
    for (auto& n : (*m)["nodes"]) n.erase("apply_cpu_seconds");
  }
  CHECK(ma.dump(2) == mb.dump(2));
}

// Nothing but the named entries in `dir`: no staging directory or lock left.
void OnlyThese(const fs::path& dir, std::vector<std::string> names) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  std::sort(names.begin(), names.end());
  CHECK(found == names);
}

struct Counts {
  uint64_t latest = 0;  // the latest cut restored in one pass
  uint64_t one_pass = 0;
  uint64_t refused = 0;     // cut K not consistent: no result
  uint64_t not_served = 0;  // full snapshot files or a pruned WAL: no result
  uint64_t subset = 0;
};

// The latest cut (req.cut 0), as `restore --latest` does it the two-pass
// way: the whole WAL's verdict, its latest restorable cut, the base chosen.
void CheckLatest(const walcut::cut::ClusterLayout& layout, const ClusterCuts& whole, const fs::path& dir,
                 uint32_t nodes, uint64_t seed, bool crashes, Counts& counts) {
  RestoreRequest req;
  req.cluster_dir = layout.dir;
  req.cut = 0;
  req.out = (dir / "one-latest").string();
  req.jobs = 1 + static_cast<unsigned>(seed % 2);
  std::string why;
  auto one = walcut::recovery::RestoreOnePass(layout, req, {}, &why);
  INFO("latest in one pass: " << (one ? "used" : why));
  std::optional<walcut::recovery::BaseChoice> choice;
  if (whole.window.any) {
    auto c = walcut::recovery::ChooseBase(whole, layout, whole.window.latest);
    if (c.ok()) choice = *c;
  }
  const bool genesis = choice && choice->base == "genesis";
  // Served whenever the two-pass restore of the latest cut is from genesis
  // and the WALs' tails hold it: the cluster's last cut comes at its end,
  // but with crashes the last cuts may be aborted and the latest far back.
  if (!crashes || why != "no CUT_FINISH in the last segments of every node") {
    REQUIRE(one.has_value() == genesis);
  }
  if (!one) {
    CHECK(!fs::exists(req.out));
    return;
  }
  CHECK(one->result.cut == whole.window.latest);
  CHECK(one->verdict.scan == walcut::recovery::VerdictScan::kWhole);
  uint64_t bytes = 0;
  for (const auto& n : whole.nodes) bytes += n.bytes;
  CHECK(one->verdict.bytes_scanned == bytes);
  CHECK(one->base_why == choice->why);
  REQUIRE(walcut::recovery::WriteRestore(one->result, req.out).ok());
  RestoreRequest two = req;
  two.cut = whole.window.latest;
  two.base = "genesis";
  two.out = (dir / "two-latest").string();
  auto r = walcut::recovery::Restore(whole, layout, two);
  REQUIRE(r.ok());
  REQUIRE(walcut::recovery::WriteRestore(*r, two.out).ok());
  SameFiles(two.out, req.out, nodes);
  ++counts.latest;
}

void CheckSeed(uint64_t seed, Counts& counts) {
  INFO("seed " << seed << " (rerun: WALCUT_ONE_PASS_SEED=" << seed << ")");
  TempDir d("one-pass");
  const std::string dir = (d.path / "c").string();
  ClusterOptions opt = walcut::test::SweepShape(dir, seed);
  opt.txs = 2000;
  opt.cut_every = 250;
  opt.cuts = 8;  // the last at the end of the run
  opt.workload.accounts = 500;
  opt.workload.ring = 500;
  if (opt.random_crashes > 0) {
    opt.random_crashes = 3;
    opt.restart_delay_us = 120000;
  }
  if (seed % 4 == 1) opt.full_snapshot_every_tx = 70;
  if (seed % 8 == 5) opt.wal_retention = walcut::node::WalRetention::kAfterSnapshot;
  REQUIRE(walcut::node::RunCluster(opt).ok());
  auto layout = walcut::cut::FindClusterLayout(dir);
  REQUIRE(layout.ok());
  const bool snapshots = fs::exists(fs::path(dir) / "snapshots");
  const auto whole = walcut::test::LoadCuts(dir);
  CheckLatest(*layout, whole, d.path, opt.nodes, seed, opt.random_crashes > 0, counts);
  for (const auto& g : whole.cuts) {
    const uint64_t k = g.cut_id;
    INFO("cut " << k << " (" << walcut::cut::CutStatusName(g.status) << ": " << g.reason << ")");
    const fs::path a = d.path / fmt::format("two-{}", k);
    const fs::path b = d.path / fmt::format("one-{}", k);
    RestoreRequest req;
    req.cluster_dir = dir;
    req.cut = k;
    req.out = b.string();
    req.jobs = 1 + static_cast<unsigned>((seed + k) % 2);
    req.io_threads = static_cast<unsigned>(k % 2);
    std::string why;
    std::optional<OnePassRestore> one = walcut::recovery::RestoreOnePass(*layout, req, {}, &why);
    INFO("one pass: " << (one ? "used" : why));
    // The two-pass restore as the CLI does it: the verdict up to the cut,
    // the base chosen from it.
    auto v = walcut::recovery::ScanToCut(*layout, k, "", {});
    std::optional<walcut::recovery::BaseChoice> choice;
    if (v) {
      auto c = walcut::recovery::ChooseBase(v->cuts, *layout, k);
      if (c.ok()) choice = *c;
    }
    const bool genesis = v && choice && choice->base == "genesis";
    if (!one) {
      OnlyThese(d.path, [&] {
        std::vector<std::string> names{"c"};
        for (const auto& e : fs::directory_iterator(d.path)) {
          const std::string n = e.path().filename().string();
          if (n.rfind("two-", 0) == 0 || n.rfind("one-", 0) == 0) names.push_back(n);
        }
        return names;
      }());
      CHECK(!fs::exists(b));
      // A consistent cut restored from genesis is always served.
      CHECK(!(genesis && g.status == CutStatus::kConsistent));
      if (snapshots) {
        CHECK(why == "a full snapshot may be the base");
        ++counts.not_served;
      } else if (g.status != CutStatus::kConsistent) {
        CHECK(!why.empty());
        ++counts.refused;
      } else {
        CHECK(whole.pruned);
        ++counts.not_served;
      }
      continue;
    }
    REQUIRE(g.status == CutStatus::kConsistent);
    REQUIRE(genesis);
    CHECK(one->verdict.scan == v->scan);
    CHECK(one->verdict.bytes_scanned == v->bytes_scanned);
    CHECK(one->base_why == choice->why);
    REQUIRE(walcut::recovery::WriteRestore(one->result, b.string()).ok());
    RestoreRequest two = req;
    two.out = a.string();
    two.base = "genesis";
    auto r = walcut::recovery::Restore(v->cuts, *layout, two);
    REQUIRE(r.ok());
    REQUIRE(walcut::recovery::WriteRestore(*r, a.string()).ok());
    SameFiles(a, b, opt.nodes);
    ++counts.one_pass;
    // A partial restore of one key prefix, the same both ways.
    if (k % 3 == 0) {
      RestoreRequest part = req;
      part.subset.prefixes = {opt.workload.workload == walcut::node::Workload::kCycle ? "ring/" : "acct/"};
      part.out = (d.path / fmt::format("one-{}-part", k)).string();
      auto po = walcut::recovery::RestoreOnePass(*layout, part, {}, &why);
      REQUIRE(po.has_value());
      REQUIRE(walcut::recovery::WriteRestore(po->result, part.out).ok());
      RestoreRequest pt = two;
      pt.subset = part.subset;
      pt.out = (d.path / fmt::format("two-{}-part", k)).string();
      auto pr = walcut::recovery::Restore(v->cuts, *layout, pt);
      REQUIRE(pr.ok());
      REQUIRE(walcut::recovery::WriteRestore(*pr, pt.out).ok());
      SameFiles(pt.out, part.out, opt.nodes);
      ++counts.subset;
    }
  }
}

void Sweep(uint64_t n, uint64_t crash_seeds) {
  Counts c;
  std::vector<uint64_t> seeds;
  if (const char* one = std::getenv("WALCUT_ONE_PASS_SEED")) {
    seeds.push_back(std::strtoull(one, nullptr, 10));
  } else {
    for (uint64_t s = 0; s < n; ++s) seeds.push_back(s);
    for (uint64_t s = 20; s < 20 + crash_seeds; ++s) seeds.push_back(s);
  }
  for (uint64_t seed : seeds) CheckSeed(seed, c);
  INFO("latest " << c.latest << ", one pass " << c.one_pass << ", refused " << c.refused << ", not served "
                 << c.not_served << ", subsets " << c.subset);
  if (seeds.size() == 1) return;
  CHECK(c.latest > 0);
  CHECK(c.one_pass > 0);
  CHECK(c.refused > 0);
  CHECK(c.not_served > 0);
  CHECK(c.subset > 0);
}

// One node's WAL, written record by record.
class HandWal {
 public:
  explicit HandWal(const fs::path& dir) : dir_((dir / "wal").string()) {
    walfmt::WriterOptions wo;
    wo.wal_dir = dir_;
    wo.node_id = 0;
    wo.cluster_id = 0x5eed;
    auto w = walfmt::WalWriter::Create(wo);
    REQUIRE(w.ok());
    w_ = std::move(w.value());
  }
  void Append(const walfmt::Record& r) { REQUIRE(w_->Append(r).ok()); }
  void Raw(walfmt::RecordType type, std::span<const uint8_t> payload) {
    REQUIRE(w_->AppendRaw(static_cast<uint16_t>(type), 0, payload).ok());
  }
  void Data(const TxId& t, const std::string& key, const std::string& value) {
    Append(walfmt::TxData{t, {{walfmt::WriteOp::kPut, key, value}}});
  }
  void Commit(const TxId& t, uint64_t marker) { Append(walfmt::TxCommit{t, marker, time_++, 0, {0}}); }
  void Start(uint64_t k) { Append(walfmt::CutStart{k, time_++}); }
  void Finish(uint64_t k, std::vector<TxId> before, std::vector<TxId> after) {
    Append(walfmt::CutFinish{k, time_++, std::move(before), std::move(after)});
  }
  // The records fed to a OnePassNode for cut k: why it is not usable, or ""
  // with the state it applied in `state`.
  std::string Pass(uint64_t k, std::map<std::string, std::string>& state, walcut::recovery::NodeRestore& out) {
    REQUIRE(w_->Close().ok());
    walcut::recovery::detail::NodeJob job;
    job.wal_dir = dir_;
    job.keep_state = true;
    const std::function<void(uint64_t)> none;
    walcut::recovery::detail::OnePassNode pass(job, k, none, nullptr);
    auto segs = walfmt::ListSegments(dir_, [](const walfmt::Problem&) {});
    REQUIRE(segs.ok());
    walfmt::ReadNodeWal(
        *segs, {},
        [&](const walfmt::RecordView& v) {
          pass.Record(v);
          return true;
        },
        [](const walfmt::Problem&) {});
    const std::string why = pass.Finish();
    if (why.empty()) {
      REQUIRE(pass.Write().ok());
      state = job.out.state;
      out = job.out;
    }
    return why;
  }

 private:
  std::string dir_;
  std::unique_ptr<walfmt::WalWriter> w_;
  uint64_t time_ = 10;
};

}  // namespace

TEST_CASE("restore in one pass: the two-pass restore's files and verdict and base (40 seeds)") { Sweep(36, 4); }

TEST_CASE("restore in one pass: the two-pass restore's files and verdict and base (200 seeds)", "[.one_pass]") {
  Sweep(180, 20);
}

TEST_CASE("one pass: commits decided before the sets are read and then by the rule") {
  TempDir d("one-pass-hand");
  HandWal w(d.path);
  const TxId a{0, 1}, b{0, 2}, c{0, 3}, e{0, 4}, f{0, 5};
  w.Data(a, "x", "a");
  w.Commit(a, 0);  // before CUT_START, marker < 1: applied at once
  w.Data(c, "y", "c");
  w.Data(f, "w", "f");
  w.Data(b, "x", "b");
  w.Commit(b, 1);  // before CUT_START, marker 1: set aside as after(1)
  w.Start(1);
  w.Data(e, "z", "e");
  w.Commit(e, 1);  // began after CUT_START: skipped
  w.Commit(c, 0);  // in flight at CUT_START, in before(1): held, then applied
  w.Commit(f, 1);  // in flight at CUT_START, in after(1): held, then skipped
  w.Finish(1, {c}, {b, f});
  std::map<std::string, std::string> state;
  walcut::recovery::NodeRestore out;
  REQUIRE(w.Pass(1, state, out) == "");
  CHECK(state == std::map<std::string, std::string>{{"x", "a"}, {"y", "c"}});
  CHECK(out.txs_applied == 2);
  CHECK(out.txs_skipped == 3);
  CHECK(out.writes_applied == 2);
  CHECK(out.cut_start.offset > 0);
  CHECK(out.cut_start < out.to);
}

TEST_CASE("one pass: a decision the cut's sets contradict makes the pass unusable and names the transaction") {
  TempDir d("one-pass-wrong");
  std::map<std::string, std::string> state;
  walcut::recovery::NodeRestore out;
  const TxId a{0, 1}, b{0, 2};
  SECTION("marker >= K before CUT_START, not in after(K): the rule applies it") {
    HandWal w(d.path);
    w.Data(a, "x", "a");
    w.Commit(a, 1);
    w.Start(1);
    w.Finish(1, {}, {});
    CHECK(w.Pass(1, state, out) ==
          "node 0: 0:1 committed before CUT_START(1) with marker >= 1 but is not in its after set");
  }
  SECTION("in after(K) with a marker < K, committed before CUT_START: applied, the rule skips it") {
    HandWal w(d.path);
    w.Data(a, "x", "a");
    w.Commit(a, 0);
    w.Start(1);
    w.Finish(1, {}, {a});
    CHECK(w.Pass(1, state, out) == "node 0: 0:1 of after(1) was applied before CUT_START(1)");
  }
  SECTION("in before(K), begun after CUT_START: skipped, the rule applies it") {
    HandWal w(d.path);
    w.Start(1);
    w.Data(b, "x", "b");
    w.Commit(b, 0);
    w.Finish(1, {b}, {});
    CHECK(w.Pass(1, state, out) == "node 0: 0:2 of before(1) was not in flight at CUT_START(1)");
  }
  SECTION("the cut's records out of shape") {
    HandWal w(d.path);
    w.Start(1);
    w.Start(1);
    w.Finish(1, {}, {});
    CHECK(w.Pass(1, state, out) == "node 0: a second CUT_START(1)");
  }
  SECTION("CUT_FINISH without CUT_START") {
    HandWal w(d.path);
    w.Finish(1, {}, {});
    CHECK(w.Pass(1, state, out) == "node 0: CUT_FINISH(1) without CUT_START before it");
  }
  SECTION("aborted") {
    HandWal w(d.path);
    w.Start(1);
    w.Append(walfmt::CutAbort{1, 50, walfmt::CutAbortReason::kOther, "test"});
    w.Finish(1, {}, {});
    CHECK(w.Pass(1, state, out) == "node 0: CUT_ABORT(1)");
  }
  SECTION("the WAL ends first") {
    HandWal w(d.path);
    w.Data(a, "x", "a");
    w.Commit(a, 0);
    w.Start(1);
    CHECK(w.Pass(1, state, out) == "node 0: the scan ended before CUT_FINISH(1)");
  }
  SECTION("a TX_COMMIT that does not decode (its marker cannot be read)") {
    HandWal w(d.path);
    w.Data(a, "x", "a");
    const std::vector<uint8_t> bad = {0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7};  // tx 0:1, then too short
    w.Raw(walfmt::RecordType::kTxCommit, bad);
    w.Start(1);
    w.Finish(1, {}, {});
    const std::string why = w.Pass(1, state, out);
    CHECK(why.rfind("node 0: TX_COMMIT at 0/", 0) == 0);
    CHECK(why.find(" does not decode") == why.size() - 16);
  }
  SECTION("a cut record that does not decode") {
    HandWal w(d.path);
    const std::vector<uint8_t> bad = {1, 2, 3};
    w.Raw(walfmt::RecordType::kCutStart, bad);
    w.Start(1);
    w.Finish(1, {}, {});
    const std::string why = w.Pass(1, state, out);
    CHECK(why.rfind("node 0: CUT_START at 0/", 0) == 0);
    CHECK(why.find(" does not decode") == why.size() - 16);
  }
  SECTION("a transaction of the cut whose TX_DATA does not decode") {
    HandWal w(d.path);
    std::vector<uint8_t> bad = {0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};  // tx 0:1, then garbage
    w.Raw(walfmt::RecordType::kTxData, bad);
    w.Commit(a, 0);
    w.Start(1);
    w.Finish(1, {}, {});
    CHECK(w.Pass(1, state, out) == "node 0: TX_DATA of 0:1 does not decode");
  }
}

TEST_CASE("one pass: the latest cut guessed from the tails of WALs whose cuts run out of order is not used") {
  TempDir d("one-pass-latest");
  const fs::path dir = d.path / "c";
  // Node 0 finishes cut 2, then (many records later, in its last segments)
  // cut 1: its tail names cut 1. The whole WAL's verdict refuses both, and
  // says why no cut can be restored.
  {
    walfmt::WriterOptions wo;
    wo.wal_dir = (dir / "node-0" / "wal").string();
    wo.segment_bytes = 4096;
    auto w = walfmt::WalWriter::Create(wo);
    REQUIRE(w.ok());
    auto& wal = *w.value();
    uint64_t time = 10;
    auto tx = [&](uint64_t seq) {
      const TxId t{0, seq};
      REQUIRE(wal.Append(walfmt::TxData{t, {{walfmt::WriteOp::kPut, fmt::format("k{}", seq % 7), "v"}}}).ok());
      REQUIRE(wal.Append(walfmt::TxCommit{t, 0, time++, 0, {0}}).ok());
    };
    uint64_t seq = 1;
    for (; seq < 20; ++seq) tx(seq);
    REQUIRE(wal.Append(walfmt::CutStart{2, time++}).ok());
    REQUIRE(wal.Append(walfmt::CutFinish{2, time++, {}, {}}).ok());
    for (; seq < 400; ++seq) tx(seq);
    REQUIRE(wal.Append(walfmt::CutStart{1, time++}).ok());
    REQUIRE(wal.Append(walfmt::CutFinish{1, time++, {}, {}}).ok());
    REQUIRE(wal.Close().ok());
  }
  auto layout = walcut::cut::FindClusterLayout(dir.string());
  REQUIRE(layout.ok());
  CHECK(!walcut::test::LoadCuts(dir.string()).window.any);
  RestoreRequest req;
  req.cluster_dir = dir.string();
  req.out = (d.path / "out").string();
  std::string why;
  auto one = walcut::recovery::RestoreOnePass(*layout, req, {}, &why);
  CHECK(!one.has_value());
  CHECK(why.rfind("no cut can be restored: no cut is consistent; the last, cut 2, is inconsistent", 0) == 0);
  CHECK(!fs::exists(req.out));
  OnlyThese(d.path, {"c"});
}

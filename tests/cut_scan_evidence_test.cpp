// The scan on small WALs written record by record: where a cut's evidence
// lies in removed segments (NodeCut::evidence_pruned), and a node's restart
// during a cut (NodeCut::restarted).
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cut/cuts.h"
#include "cut/scan.h"
#include "cut/summary.h"
#include "cut_support.h"
#include "walfmt/writer.h"

namespace fs = std::filesystem;
using walcut::cut::CutStatus;
using walcut::cut::kFirstSeenPruned;
using walcut::cut::NodeSummary;
using walfmt::Lsn;
using walfmt::TxId;

namespace {

constexpr uint64_t kCluster = 0x5eed;

// Writes node 0's WAL into `wal`, record by record; Append returns where each went.
class Wal {
 public:
  explicit Wal(const fs::path& wal, uint64_t segment_bytes = 16u << 20) {
    walfmt::WriterOptions wo;
    wo.wal_dir = wal.string();
    wo.node_id = 0;
    wo.cluster_id = kCluster;
    wo.segment_bytes = segment_bytes;
    auto w = walfmt::WalWriter::Create(wo);
    REQUIRE(w.ok());
    w_ = std::move(w.value());
  }
  Lsn Append(const walfmt::Record& r) {
    auto at = w_->Append(r);
    REQUIRE(at.ok());
    return *at;
  }
  void Close() { REQUIRE(w_->Close().ok()); }

 private:
  std::unique_ptr<walfmt::WalWriter> w_;
};

walfmt::TxData Data(const TxId& t, size_t value_bytes = 8) {
  return walfmt::TxData{t, {walfmt::Write{walfmt::WriteOp::kPut, "k", std::string(value_bytes, 'v')}}};
}
walfmt::TxCommit Commit(const TxId& t, uint64_t marker, uint64_t time_us) {
  return walfmt::TxCommit{t, marker, time_us, 0, {0}};
}

NodeSummary Scan(const fs::path& wal) {
  walcut::cut::ScanOptions so;
  so.node = 0;
  so.expect_cluster = true;
  so.cluster_id = kCluster;
  auto s = walcut::cut::ScanNode(wal.string(), so);
  REQUIRE(s.ok());
  return std::move(s.value());
}

// Removes the segments of `wal` before segment `index`; how many went.
size_t RemoveSegmentsBefore(const fs::path& wal, uint64_t index) {
  size_t removed = 0;
  for (const auto& e : fs::directory_iterator(wal)) {
    if (std::strtoull(e.path().filename().string().substr(0, 16).c_str(), nullptr, 16) < index) {
      fs::remove(e.path());
      ++removed;
    }
  }
  return removed;
}

std::string FindingsOf(const NodeSummary& s) {
  std::string out;
  for (const auto& f : s.findings) out += f.message + "\n";
  return out;
}

}  // namespace

TEST_CASE("a pruned WAL where only an after transaction began in removed segments: evidence pruned, cut unavailable",
          "[pruned]") {
  walcut::test::ScratchDir d("evidence-after-pruned");
  const fs::path wal = d.path / "wal";
  const TxId a{0, 1};  // after(1): its TX_DATA is in the segment that goes
  const TxId b{0, 2};  // before(1): everything of it stays
  Lsn data_a, data_b, start;
  {
    // Small segments: A's large TX_DATA is followed by a segment of its own.
    Wal w(wal, 512);
    w.Append(walfmt::NodeStart{0, 10});
    data_a = w.Append(Data(a, 600));
    data_b = w.Append(Data(b));
    start = w.Append(walfmt::CutStart{1, 30});
    w.Append(Commit(b, 0, 40));
    w.Append(Commit(a, 1, 50));
    w.Append(walfmt::CutFinish{1, 60, {b}, {a}});
    w.Close();
  }
  REQUIRE(data_b.segment > data_a.segment);
  REQUIRE(start.segment == data_b.segment);
  REQUIRE(RemoveSegmentsBefore(wal, data_b.segment) > 0);

  const NodeSummary s = Scan(wal);
  INFO(FindingsOf(s));
  CHECK(s.findings.empty());
  REQUIRE(s.pruned);
  const auto* nc = s.FindCut(1);
  REQUIRE(nc);
  REQUIRE(nc->before.size() == 1);
  REQUIRE(nc->after.size() == 1);
  CHECK(nc->before[0].committed);
  CHECK(nc->before[0].first_seen == data_b);
  CHECK(nc->after[0].committed);
  CHECK(nc->after[0].first_seen == kFirstSeenPruned);
  CHECK(nc->evidence_pruned);

  std::vector<NodeSummary> nodes;
  nodes.push_back(s);
  auto cc = walcut::cut::Reconstruct(std::move(nodes));
  REQUIRE(cc.ok());
  const auto* g = cc->Find(1);
  REQUIRE(g);
  INFO(g->reason);
  CHECK(g->status == CutStatus::kUnavailable);
  CHECK_FALSE(cc->EvidenceComplete(*g));
  CHECK(g->reason.find("a transaction that cut 1 tracks there began before it") != std::string::npos);
}

TEST_CASE("a node's first restart during a cut marks it restarted and makes the cut inconsistent", "[restart]") {
  walcut::test::ScratchDir d("first-restart");
  const fs::path wal = d.path / "wal";
  // initial: the WAL holds the node's initial NODE_START (incarnation 0)
  // before the cut, so the restart is its first NODE_START after that one;
  // otherwise the restart is the first NODE_START the WAL holds at all.
  const bool initial = GENERATE(true, false);
  INFO(fmt::format("initial NODE_START in the WAL: {}", initial));
  const TxId t{0, 1};
  Lsn restart;
  {
    Wal w(wal);
    if (initial) w.Append(walfmt::NodeStart{0, 10});
    w.Append(Data(t));
    w.Append(Commit(t, 0, 20));
    w.Append(walfmt::CutStart{1, 30});
    restart = w.Append(walfmt::NodeStart{1, 40});
    w.Append(walfmt::CutFinish{1, 50, {}, {}});
    // Cut 2, after the restart, is not touched by it.
    w.Append(walfmt::CutStart{2, 60});
    w.Append(walfmt::CutFinish{2, 70, {}, {}});
    w.Close();
  }
  const NodeSummary s = Scan(wal);
  INFO(FindingsOf(s));
  CHECK(s.findings.empty());
  REQUIRE(s.starts.size() == (initial ? 2u : 1u));
  CHECK(s.starts.back().incarnation == 1);
  CHECK(s.starts.back().at == restart);
  const auto* c1 = s.FindCut(1);
  const auto* c2 = s.FindCut(2);
  REQUIRE(c1);
  REQUIRE(c2);
  CHECK(c1->restarted);
  CHECK(c1->finished);
  CHECK_FALSE(c2->restarted);

  std::vector<NodeSummary> nodes;
  nodes.push_back(s);
  auto cc = walcut::cut::Reconstruct(std::move(nodes));
  REQUIRE(cc.ok());
  const auto* g1 = cc->Find(1);
  REQUIRE(g1);
  CHECK(g1->status == CutStatus::kInconsistent);
  CHECK_FALSE(g1->checks.completeness);
  CHECK(g1->reason == fmt::format("node 0 restarted during cut 1 (NODE_START at {})", restart.ToString()));
  CHECK_FALSE(cc->EvidenceComplete(*g1));
  const auto* g2 = cc->Find(2);
  REQUIRE(g2);
  INFO(g2->reason);
  CHECK(g2->status == CutStatus::kConsistent);
}

TEST_CASE("a NODE_START of incarnation 0 during a cut (the node's creation) is no restart", "[restart]") {
  walcut::test::ScratchDir d("creation-start");
  const fs::path wal = d.path / "wal";
  {
    Wal w(wal);
    w.Append(walfmt::CutStart{1, 30});
    w.Append(walfmt::NodeStart{0, 40});
    w.Append(walfmt::CutFinish{1, 50, {}, {}});
    w.Close();
  }
  const NodeSummary s = Scan(wal);
  const auto* c1 = s.FindCut(1);
  REQUIRE(c1);
  CHECK_FALSE(c1->restarted);
}

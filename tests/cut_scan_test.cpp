// The cut checks on WALs that break the rules on purpose: a real cluster's WAL
// is rewritten with one record changed, and the reconstruction must name the
// node, the cut and the transaction at fault.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cut/cuts.h"
#include "cut/evidence.h"
#include "cut/load.h"
#include "cut/scan.h"
#include "cut_support.h"
#include "node/cluster.h"
#include "walfmt/reader.h"
#include "walfmt/writer.h"

namespace fs = std::filesystem;
using walcut::cut::ClusterCuts;
using walcut::cut::CutStatus;
using walcut::cut::GlobalCut;

using TempDir = walcut::test::ScratchDir;
using walcut::test::LoadCuts;

namespace {

walcut::node::ClusterOptions Healthy(const std::string& dir, uint64_t seed = 11) {
  walcut::node::ClusterOptions o;
  o.dir = dir;
  o.seed = seed;
  o.nodes = 3;
  o.backups = 1;
  o.txs = 1500;
  o.cuts = 5;
  o.segment_bytes = 64 * 1024;
  return o;
}

struct Rec {
  walfmt::Record rec;
  walfmt::Lsn lsn;
};

std::vector<Rec> ReadAll(const std::string& wal_dir) {
  std::vector<Rec> out;
  auto segs = walfmt::ListSegments(wal_dir, [](const walfmt::Problem&) {});
  REQUIRE(segs.ok());
  walfmt::NodeReadOptions ro;
  walfmt::ReadNodeWal(
      *segs, ro,
      [&](const walfmt::RecordView& v) {
        auto r = walfmt::DecodePayload(v.type, v.payload);
        REQUIRE(r.ok());
        out.push_back({std::move(r.value()), v.lsn});
        return true;
      },
      [](const walfmt::Problem&) {});
  return out;
}

// Hands every record of a WAL to `visit` as the cut scan's reader does
// (point-in-time mode: nothing after damage).
void ReadPointInTime(const std::string& wal_dir, const std::function<void(const walfmt::RecordView&)>& visit) {
  auto segs = walfmt::ListSegments(wal_dir, [](const walfmt::Problem&) {});
  REQUIRE(segs.ok());
  walfmt::NodeReadOptions ro;
  ro.mode = walfmt::RecoveryMode::kPointInTime;
  walfmt::ReadNodeWal(
      *segs, ro,
      [&](const walfmt::RecordView& v) {
        visit(v);
        return true;
      },
      [](const walfmt::Problem&) {});
}

// The first record of type R in recs that `match` accepts.
template <typename R, typename F>
std::vector<Rec>::iterator FindRecord(std::vector<Rec>& recs, F&& match) {
  return std::find_if(recs.begin(), recs.end(), [&](const Rec& r) {
    auto* x = std::get_if<R>(&r.rec);
    return x && match(*x);
  });
}

// Rewrites node n's WAL after `edit` changed its records.
void Rewrite(const std::string& dir, uint32_t n, const std::function<void(std::vector<Rec>&)>& edit) {
  const std::string wal = fmt::format("{}/node-{}/wal", dir, n);
  auto recs = ReadAll(wal);
  edit(recs);
  auto layout = walcut::cut::FindClusterLayout(dir);
  REQUIRE(layout.ok());
  fs::remove_all(wal);
  walfmt::WriterOptions wo;
  wo.wal_dir = wal;
  wo.node_id = n;
  wo.cluster_id = layout->cluster_id;
  wo.segment_bytes = 64 * 1024;
  auto w = walfmt::WalWriter::Create(wo);
  REQUIRE(w.ok());
  for (const auto& r : recs) REQUIRE((*w)->Append(r.rec).ok());
  REQUIRE((*w)->Close().ok());
}

// A healthy cluster (Healthy()) run into `dir`, then node n's WAL rewritten
// by `edit`: the cuts as the scanner sees them afterwards.
ClusterCuts RunAndRewrite(const std::string& dir, uint32_t n, const std::function<void(std::vector<Rec>&)>& edit) {
  auto run = walcut::node::RunCluster(Healthy(dir));
  REQUIRE(run.ok());
  Rewrite(dir, n, edit);
  return LoadCuts(dir);
}

bool HasFinding(const GlobalCut& g, const std::string& check, uint32_t node, const std::string& text) {
  for (const auto& f : g.findings) {
    if (walcut::cut::CheckName(f.check) == check && f.node == node && f.message.find(text) != std::string::npos)
      return true;
  }
  return false;
}

std::string Findings(const GlobalCut& g) {
  std::string s;
  for (const auto& f : g.findings) s += std::string(walcut::cut::CheckName(f.check)) + ": " + f.message + "\n";
  return s;
}

// Cut 2 inconsistent, its marker check failed: a marker finding on `node` naming `tx`
// and saying `why`.
void MarkerFindingOfCut2(const ClusterCuts& bad, uint32_t node, const walfmt::TxId& tx, const std::string& why) {
  REQUIRE(tx.seq != 0);
  const GlobalCut* g = bad.Find(2);
  REQUIRE(g);
  INFO(Findings(*g));
  CHECK(g->status == CutStatus::kInconsistent);
  CHECK_FALSE(g->checks.markers);
  CHECK(HasFinding(*g, "marker", node, fmt::format("node {}: transaction {} committed at ", node, tx.ToString())));
  CHECK(HasFinding(*g, "marker", node, why));
}

// The first cut whose CUT_FINISH on `node` has a non-empty `before` set whose
// first member is committed after CUT_START (so moving it changes membership).
const GlobalCut* CutWithBefore(const ClusterCuts& cc, uint32_t node) {
  for (const auto& g : cc.cuts) {
    const auto* nc = g.nodes[node];
    if (nc && !nc->before.empty() && nc->before[0].commit > nc->start) return &g;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("a healthy run: every cut consistent, no finding, summaries survive a JSON round trip") {
  TempDir d("healthy");
  auto run = walcut::node::RunCluster(Healthy(d.path.string()));
  REQUIRE(run.ok());
  ClusterCuts cc = LoadCuts(d.path.string());
  REQUIRE(cc.cuts.size() == run->summary.cuts_started);
  for (const auto& g : cc.cuts) {
    INFO(Findings(g));
    CHECK(g.status == CutStatus::kConsistent);
  }
  CHECK(cc.findings.empty());
  CHECK(cc.window.any);
  CHECK(cc.window.earliest == cc.cuts.front().cut_id);
  CHECK(cc.window.latest == cc.cuts.back().cut_id);

  std::vector<walcut::cut::NodeSummary> back;
  for (const auto& s : cc.nodes) {
    auto r = walcut::cut::SummaryFromJson(walcut::cut::SummaryToJson(s), "mem");
    REQUIRE(r.ok());
    CHECK(walcut::cut::SummaryToJson(*r) == walcut::cut::SummaryToJson(s));
    back.push_back(std::move(r.value()));
  }
  auto again = walcut::cut::Reconstruct(std::move(back));
  REQUIRE(again.ok());
  REQUIRE(again->cuts.size() == cc.cuts.size());
  for (size_t i = 0; i < cc.cuts.size(); ++i) {
    CHECK(again->cuts[i].status == cc.cuts[i].status);
    CHECK(again->cuts[i].transactions == cc.cuts[i].transactions);
    CHECK(again->cuts[i].node_transactions == cc.cuts[i].node_transactions);
  }
}

TEST_CASE("ScanNode refuses a WAL directory that is not there, holds no segment, or lacks the segment to start at") {
  TempDir d("scan-refusals");
  auto run = walcut::node::RunCluster(Healthy(d.path.string()));
  REQUIRE(run.ok());
  const std::string wal = (d.path / "node-0" / "wal").string();
  walcut::cut::ScanOptions so;
  so.node = 0;
  auto refused = [&](const std::string& dir, const std::string& message) {
    auto s = walcut::cut::ScanNode(dir, so);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == walfmt::ErrorCode::kNotFound);
    CHECK(s.status().message() == message);
  };
  SECTION("no such directory") {
    const std::string none = (d.path / "node-0" / "nope").string();
    refused(none, none + ": no such WAL directory");
  }
  SECTION("a directory without segments") {
    const std::string empty = (d.path / "empty").string();
    fs::create_directories(empty);
    refused(empty, empty + ": no WAL segments");
  }
  SECTION("a start position in a segment that is not there") {
    std::vector<uint64_t> indexes;
    for (const auto& e : fs::directory_iterator(wal))
      indexes.push_back(std::stoull(e.path().filename().string(), nullptr, 16));
    std::sort(indexes.begin(), indexes.end());
    REQUIRE(indexes.size() >= 2);
    so.from = walfmt::Lsn{indexes.back() + 1, 0x40};
    refused(wal, fmt::format("{}: no segment {} to start reading at {}", wal, indexes.back() + 1, so.from.ToString()));
    so.from = walfmt::Lsn{indexes[1], 0};
    auto ok = walcut::cut::ScanNode(wal, so);
    INFO((ok.ok() ? "" : ok.status().message()));
    CHECK(ok.ok());
  }
}

TEST_CASE("a before transaction moved to after on one node: marker and atomicity findings name it") {
  TempDir d("moved");
  auto run = walcut::node::RunCluster(Healthy(d.path.string()));
  REQUIRE(run.ok());
  ClusterCuts cc = LoadCuts(d.path.string());
  uint32_t node = 0;
  const GlobalCut* g = nullptr;
  for (node = 0; node < 3 && !g; ++node) g = CutWithBefore(cc, node);
  REQUIRE(g);
  --node;
  const uint64_t k = g->cut_id;
  const walfmt::TxId moved = g->nodes[node]->before[0].tx;
  Rewrite(d.path.string(), node, [&](std::vector<Rec>& recs) {
    for (auto& r : recs) {
      if (auto* f = std::get_if<walfmt::CutFinish>(&r.rec); f && f->cut_id == k) {
        f->before.erase(std::find(f->before.begin(), f->before.end(), moved));
        f->after.push_back(moved);
      }
    }
  });
  ClusterCuts bad = LoadCuts(d.path.string());
  const GlobalCut* b = bad.Find(k);
  REQUIRE(b);
  INFO(Findings(*b));
  CHECK(b->status == CutStatus::kInconsistent);
  CHECK_FALSE(b->checks.markers);
  CHECK(HasFinding(*b, "marker", node, moved.ToString()));
  // The finding of the sets against the marker, on its own.
  CHECK(
      HasFinding(*b, "marker", node,
                 fmt::format("node {}: transaction {} is in after({}) but its marker is ", node, moved.ToString(), k)));
  // Its other participants keep it in the cut: the digests disagree.
  CHECK_FALSE(b->checks.atomicity);
  CHECK(b->reason.find(moved.ToString()) != std::string::npos);
  // The other cuts are untouched and the previous one stays restorable.
  for (const auto& x : bad.cuts) {
    if (x.cut_id != k) CHECK(x.status == CutStatus::kConsistent);
  }
  REQUIRE(b->consistent_before.has_value() == (k > bad.cuts.front().cut_id));
}

TEST_CASE("an after transaction listed on both sides, and one that was never prepared before CUT_START") {
  TempDir d("shape");
  auto run = walcut::node::RunCluster(Healthy(d.path.string()));
  REQUIRE(run.ok());
  ClusterCuts cc = LoadCuts(d.path.string());
  const GlobalCut* g = nullptr;
  uint32_t node = 0;
  for (const auto& x : cc.cuts) {
    for (uint32_t n = 0; n < 3 && !g; ++n) {
      if (x.nodes[n] && !x.nodes[n]->after.empty()) {
        g = &x;
        node = n;
      }
    }
  }
  REQUIRE(g);
  const uint64_t k = g->cut_id;
  const walfmt::TxId both = g->nodes[node]->after[0].tx;
  const walfmt::TxId stranger{node, 987654321};
  Rewrite(d.path.string(), node, [&](std::vector<Rec>& recs) {
    for (auto& r : recs) {
      if (auto* f = std::get_if<walfmt::CutFinish>(&r.rec); f && f->cut_id == k) {
        f->before.push_back(both);
        f->before.push_back(stranger);
      }
    }
  });
  ClusterCuts bad = LoadCuts(d.path.string());
  const GlobalCut* b = bad.Find(k);
  REQUIRE(b);
  INFO(Findings(*b));
  CHECK(b->status == CutStatus::kInconsistent);
  CHECK_FALSE(b->checks.shape);
  CHECK(HasFinding(*b, "shape", node, both.ToString() + " is in both before"));
  CHECK(HasFinding(*b, "shape", node, stranger.ToString() + " in before(" + std::to_string(k) + ") was not prepared"));
}

TEST_CASE("an after transaction with 9 participants committed just before CUT_START is resolved with all of them") {
  // Rule 5 lets an `after` transaction commit before CUT_START. The scan
  // finds such a commit in its ring of recent commits when the cut finishes
  // and moves it to the next cut's bucket with every participant's digest;
  // one participant lost there would show as an atomicity finding.
  TempDir d("wide");
  walcut::node::ClusterOptions o = Healthy(d.path.string());
  o.nodes = 9;
  o.backups = 2;
  o.workload.workload = walcut::node::Workload::kCycle;
  o.txs = 1200;
  o.cut_every = 250;
  auto run = walcut::node::RunCluster(o);
  REQUIRE(run.ok());
  std::map<walfmt::TxId, size_t> width;
  for (const auto& c : run->history.committed) width[c.id] = c.participants.size();
  ClusterCuts cc = LoadCuts(d.path.string());
  // A wide `after` transaction committed after CUT_START on some node.
  const GlobalCut* g = nullptr;
  uint32_t node = 0;
  walfmt::TxId wide;
  for (const auto& x : cc.cuts) {
    for (uint32_t n = 0; n < o.nodes && !g; ++n) {
      if (!x.nodes[n] || x.status != CutStatus::kConsistent) continue;
      for (const auto& t : x.nodes[n]->after) {
        if (t.commit > x.nodes[n]->start && width[t.tx] > 6) {
          g = &x;
          node = n;
          wide = t.tx;
          break;
        }
      }
    }
  }
  REQUIRE(g);
  const uint64_t k = g->cut_id;
  const uint64_t txs = g->transactions;
  INFO("cut " << k << ", node " << node << ", transaction " << wide.ToString() << " of " << width[wide]);
  // Its TX_COMMIT moves to just before CUT_START(k) on that node.
  Rewrite(d.path.string(), node, [&](std::vector<Rec>& recs) {
    auto commit = FindRecord<walfmt::TxCommit>(recs, [&](const walfmt::TxCommit& x) { return x.tx == wide; });
    REQUIRE(commit != recs.end());
    const Rec moved = *commit;
    recs.erase(commit);
    auto start = FindRecord<walfmt::CutStart>(recs, [&](const walfmt::CutStart& x) { return x.cut_id == k; });
    REQUIRE(start != recs.end());
    recs.insert(start, moved);
  });
  ClusterCuts moved = LoadCuts(d.path.string());
  const GlobalCut* b = moved.Find(k);
  REQUIRE(b);
  INFO(Findings(*b));
  CHECK(b->status == CutStatus::kConsistent);
  CHECK(b->findings.empty());
  CHECK(b->transactions == txs);
  CHECK(b->after_before_start == g->after_before_start + 1);
  const auto* nc = b->nodes[node];
  REQUIRE(nc);
  auto it = std::find_if(nc->after.begin(), nc->after.end(), [&](const auto& t) { return t.tx == wide; });
  REQUIRE(it != nc->after.end());
  CHECK(it->committed);
  CHECK(it->commit < nc->start);
  for (const auto& x : moved.cuts) CHECK(x.status == CutStatus::kConsistent);

  // The cut stays open much longer: CUT_FINISH(k) moves past the following
  // commits (up to the next cut record). The scan remembers only the last
  // max(recent_commits, 4 x peak in flight) commits in full, so it must keep
  // those it had at CUT_START until the cut finishes.
  uint64_t passed = 0;
  Rewrite(d.path.string(), node, [&](std::vector<Rec>& recs) {
    auto finish = FindRecord<walfmt::CutFinish>(recs, [&](const walfmt::CutFinish& x) { return x.cut_id == k; });
    REQUIRE(finish != recs.end());
    const Rec f = *finish;
    auto at = recs.erase(finish);
    while (at != recs.end() && passed < 200 && !std::holds_alternative<walfmt::CutStart>(at->rec) &&
           !std::holds_alternative<walfmt::CutFinish>(at->rec) && !std::holds_alternative<walfmt::CutAbort>(at->rec)) {
      passed += std::holds_alternative<walfmt::TxCommit>(at->rec);
      ++at;
    }
    recs.insert(at, f);
  });
  walcut::cut::ScanOptions so;
  so.node = node;
  so.recent_commits = 1;
  auto late = walcut::cut::ScanNode(fmt::format("{}/node-{}/wal", d.path.string(), node), so);
  REQUIRE(late.ok());
  INFO(passed << " commits between CUT_START and CUT_FINISH now; peak in flight " << late->peak_in_flight);
  REQUIRE(passed > 4 * late->peak_in_flight);
  const auto* lc = late->FindCut(k);
  REQUIRE(lc);
  CHECK(lc->end == walcut::cut::CutEnd::kFinished);
  for (const auto& f : late->findings) {
    INFO(f.message);
    CHECK(walcut::cut::CheckName(f.check) != std::string("shape"));
  }
  auto lt = std::find_if(lc->after.begin(), lc->after.end(), [&](const auto& t) { return t.tx == wide; });
  REQUIRE(lt != lc->after.end());
  CHECK(lt->committed);
  CHECK(lt->commit < lc->start);
}

TEST_CASE(
    "a commit naming a participant id far beyond the cluster's nodes is scanned without growing per-peer tables") {
  // Participant ids come from the WAL: a valid record may name node
  // 4,000,000,000. The scan keeps per-peer digests in an array only for small
  // ids, so such an id costs a map entry, not an array of its size.
  TempDir d("far");
  auto run = walcut::node::RunCluster(Healthy(d.path.string()));
  REQUIRE(run.ok());
  const uint64_t txs = LoadCuts(d.path.string()).cuts.back().transactions;
  constexpr uint32_t kFar = 4000000000u;
  walfmt::TxId changed;
  Rewrite(d.path.string(), 1, [&](std::vector<Rec>& recs) {
    for (auto& r : recs) {
      if (auto* c = std::get_if<walfmt::TxCommit>(&r.rec); c && c->participants.size() > 1) {
        c->participants.push_back(kFar);
        changed = c->tx;
        break;
      }
    }
  });
  REQUIRE(changed.seq != 0);
  auto layout = walcut::cut::FindClusterLayout(d.path.string());
  REQUIRE(layout.ok());
  auto sums = walcut::cut::ScanCluster(*layout, {});
  REQUIRE(sums.ok());
  const auto& s1 = sums->at(1);
  REQUIRE(s1.shared.count(kFar));
  uint64_t far_n = 0;
  for (const auto& [f, dg] : s1.shared.at(kFar)) far_n += dg.n;
  CHECK(far_n == 1);
  // No node of the cluster is that peer: the cuts are what they were.
  ClusterCuts cc = LoadCuts(d.path.string());
  CHECK(cc.cuts.back().transactions == txs);
  for (const auto& g : cc.cuts) CHECK(g.status == CutStatus::kConsistent);
}

TEST_CASE("a transaction that finishes twice on a node is named, with both positions") {
  // The scan remembers where recent transactions finished (a window of 4096
  // by default): a second TX_COMMIT, a TX_ROLLBACK after a TX_COMMIT and a
  // TX_COMMIT after a TX_ROLLBACK are findings, and the second commit is not
  // counted again.
  TempDir d("twice");
  auto run = walcut::node::RunCluster(Healthy(d.path.string()));
  REQUIRE(run.ok());
  auto layout = walcut::cut::FindClusterLayout(d.path.string());
  REQUIRE(layout.ok());
  auto bucketed = [](const walcut::cut::NodeSummary& s) {
    uint64_t n = 0;
    for (const auto& [f, c] : s.first_cut) n += c.count;
    return n;
  };
  auto before = walcut::cut::ScanCluster(*layout, {});
  REQUIRE(before.ok());
  const uint64_t commits0 = before->at(1).commits;
  const uint64_t bucketed0 = bucketed(before->at(1));
  walfmt::TxId twice, undone, revived;
  Rewrite(d.path.string(), 1, [&](std::vector<Rec>& recs) {
    std::vector<Rec> out;
    int commits = 0, rollbacks = 0;
    for (auto& r : recs) {
      out.push_back(r);
      if (auto* c = std::get_if<walfmt::TxCommit>(&r.rec)) {
        ++commits;
        if (commits == 100) {
          twice = c->tx;
          out.push_back(r);  // the same TX_COMMIT again, right after
        } else if (commits == 200) {
          undone = c->tx;
          out.push_back(Rec{walfmt::TxRollback{c->tx, c->time_us + 1, 0, c->participants}, {}});
        }
      } else if (auto* rb = std::get_if<walfmt::TxRollback>(&r.rec); rb && ++rollbacks == 3) {
        revived = rb->tx;
        out.push_back(Rec{walfmt::TxCommit{rb->tx, 0, rb->time_us + 1, 0, rb->participants}, {}});
      }
    }
    recs = std::move(out);
  });
  REQUIRE(twice.seq != 0);
  REQUIRE(undone.seq != 0);
  REQUIRE(revived.seq != 0);
  auto sums = walcut::cut::ScanCluster(*layout, {});
  REQUIRE(sums.ok());
  const auto& s1 = sums->at(1);
  auto has = [&](const std::string& check, const std::string& text) {
    for (const auto& f : s1.findings) {
      if (walcut::cut::CheckName(f.check) == check && f.message.find(text) != std::string::npos) return true;
    }
    return false;
  };
  std::string all;
  for (const auto& f : s1.findings) all += std::string(walcut::cut::CheckName(f.check)) + ": " + f.message + "\n";
  INFO(all);
  CHECK(has("shape", fmt::format("transaction {} committed twice, at ", twice.ToString())));
  CHECK(has("rollback", fmt::format("transaction {} rolled back at ", undone.ToString())));
  CHECK(has("rollback", fmt::format("transaction {} committed at ", revived.ToString())));
  CHECK(has("rollback", "after its TX_COMMIT at"));
  CHECK(has("rollback", "after its TX_ROLLBACK at"));
  // Two more TX_COMMIT records, but only the revived transaction joins the
  // committed ones: the duplicate is counted once.
  CHECK(s1.commits == commits0 + 2);
  CHECK(bucketed(s1) == bucketed0 + 1);
}

TEST_CASE("a WAL cut short before the last CUT_FINISH: incomplete cut, the previous one restorable") {
  TempDir d("short");
  auto run = walcut::node::RunCluster(Healthy(d.path.string()));
  REQUIRE(run.ok());
  ClusterCuts cc = LoadCuts(d.path.string());
  const uint64_t last = cc.cuts.back().cut_id;
  Rewrite(d.path.string(), 2, [&](std::vector<Rec>& recs) {
    auto it = FindRecord<walfmt::CutFinish>(recs, [&](const walfmt::CutFinish& x) { return x.cut_id == last; });
    REQUIRE(it != recs.end());
    recs.erase(it, recs.end());
  });
  ClusterCuts bad = LoadCuts(d.path.string());
  const GlobalCut* b = bad.Find(last);
  REQUIRE(b);
  INFO(Findings(*b));
  CHECK(b->status == CutStatus::kIncomplete);
  CHECK(b->reason.find(fmt::format("missing CUT_FINISH({}) on node 2", last)) != std::string::npos);
  CHECK(bad.window.any);
  CHECK(bad.window.latest == last - 1);
  CHECK(bad.window.latest_limit.find(fmt::format("cut {} after it is incomplete", last)) != std::string::npos);
}

TEST_CASE("a damaged record in the middle of a node's WAL limits the restore window and says why") {
  TempDir d("damage");
  auto opt = Healthy(d.path.string());
  opt.segment_bytes = 1 << 20;  // one plain segment per node: the damage is a byte flip in place
  auto run = walcut::node::RunCluster(opt);
  REQUIRE(run.ok());
  ClusterCuts cc = LoadCuts(d.path.string());
  REQUIRE(cc.cuts.size() >= 3);
  // Damage node 1 just after CUT_FINISH of the second cut: that record stays
  // readable, nothing later is.
  const auto* nc = cc.cuts[1].nodes[1];
  REQUIRE(nc);
  const walfmt::Lsn at = nc->finish;
  fs::path seg;
  for (const auto& e : fs::directory_iterator(d.path / "node-1" / "wal")) {
    if (e.path().filename().string().rfind(fmt::format("{:016X}", at.segment), 0) == 0) seg = e.path();
  }
  REQUIRE(seg.extension() == ".wal");
  std::string bytes;
  {
    std::ifstream in(seg, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The record after CUT_FINISH: skip CUT_FINISH's own header and payload.
  const uint32_t len = static_cast<uint8_t>(bytes[at.offset + 4]) | static_cast<uint8_t>(bytes[at.offset + 5]) << 8 |
                       static_cast<uint8_t>(bytes[at.offset + 6]) << 16 |
                       static_cast<uint8_t>(bytes[at.offset + 7]) << 24;
  const uint64_t next = at.offset + 16 + len;
  REQUIRE(next + 20 < bytes.size());
  bytes[next + 18] ^= 0x5A;
  {
    std::ofstream out(seg, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  ClusterCuts bad = LoadCuts(d.path.string());
  CHECK(bad.nodes[1].damaged);
  CHECK(bad.nodes[1].damage_at == walfmt::Lsn{at.segment, next});
  CHECK(bad.window.any);
  CHECK(bad.window.latest == cc.cuts[1].cut_id);
  CHECK(bad.window.latest_limit.find(fmt::format("node 1's WAL is damaged at {}",
                                                 (walfmt::Lsn{at.segment, next}).ToString())) != std::string::npos);
  CHECK(bad.window.latest_limit.find(fmt::format("no cut after {} can be restored", cc.cuts[1].cut_id)) !=
        std::string::npos);
  const GlobalCut* b = bad.Find(cc.cuts[2].cut_id);
  REQUIRE(b);
  CHECK(b->status != CutStatus::kConsistent);
}

TEST_CASE("a summary counts the records and bytes its scan read: none after damage, no skipped unknown type") {
  TempDir d("counts");
  auto run = walcut::node::RunCluster(Healthy(d.path.string(), 31));
  REQUIRE(run.ok());
  const std::string wal = (d.path / "node-2" / "wal").string();
  // What the reader hands over in point-in-time mode, counted independently.
  auto expect = [&](uint64_t& records, uint64_t& bytes) {
    records = bytes = 0;
    ReadPointInTime(wal, [&](const walfmt::RecordView& v) {
      ++records;
      bytes += v.size();
    });
  };
  auto scan = [&] {
    walcut::cut::ScanOptions so;
    so.node = 2;
    auto s = walcut::cut::ScanNode(wal, so);
    REQUIRE(s.ok());
    return std::move(s.value());
  };
  uint64_t records = 0, bytes = 0;
  SECTION("intact, with a skippable record of an unknown type in the middle") {
    auto recs = ReadAll(wal);
    const size_t total = recs.size();
    fs::remove_all(wal);
    walfmt::WriterOptions wo;
    wo.wal_dir = wal;
    wo.node_id = 2;
    wo.cluster_id = walcut::cut::FindClusterLayout(d.path.string())->cluster_id;
    wo.segment_bytes = 64 * 1024;
    auto w = walfmt::WalWriter::Create(wo);
    REQUIRE(w.ok());
    const uint8_t extra[5] = {1, 2, 3, 4, 5};
    for (size_t i = 0; i < recs.size(); ++i) {
      if (i == recs.size() / 2) REQUIRE((*w)->AppendRaw(200, walfmt::kRecordFlagSkippable, extra).ok());
      REQUIRE((*w)->Append(recs[i].rec).ok());
    }
    REQUIRE((*w)->Close().ok());
    expect(records, bytes);
    CHECK(records == total);  // the unknown record is not handed over
    const auto s = scan();
    CHECK(s.records == records);
    CHECK(s.bytes == bytes);
    CHECK_FALSE(s.damaged);
    uint64_t in_segments = 0;
    for (const auto& seg : s.segments) in_segments += seg.records;
    CHECK(in_segments == total + 1);  // the segment table counts every intact record
  }
  SECTION("damage in the third segment: the records before it") {
    auto segs = walfmt::ListSegments(wal, [](const walfmt::Problem&) {});
    REQUIRE(segs.ok());
    REQUIRE(segs->size() >= 4);
    {
      std::fstream f((*segs)[2].path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(7000);
      f.put('\x5a');
    }
    expect(records, bytes);
    const auto s = scan();
    CHECK(s.damaged);
    CHECK(s.records == records);
    CHECK(s.bytes == bytes);
    CHECK(s.records < ReadAll(wal).size() + 1000);  // sanity: the count is of this WAL
    CHECK(s.damage_at.segment == (*segs)[2].index);
  }
}

TEST_CASE("SummaryBuilder fed the records of a WAL gives ScanNode's summary, less the WAL facts") {
  TempDir d("builder");
  auto run = walcut::node::RunCluster(Healthy(d.path.string(), 37));
  REQUIRE(run.ok());
  const std::string wal = (d.path / "node-1" / "wal").string();
  walcut::cut::ScanOptions so;
  so.node = 1;
  auto scanned = walcut::cut::ScanNode(wal, so);
  REQUIRE(scanned.ok());
  walcut::cut::SummaryBuilder b(so);
  ReadPointInTime(wal, [&](const walfmt::RecordView& v) { b.Visit(v); });
  walcut::cut::NodeSummary built = b.Finish();
  REQUIRE(scanned->cuts.size() >= 3);
  CHECK(built.records == scanned->records);
  CHECK(built.bytes == scanned->bytes);
  CHECK(built.commits == scanned->commits);
  CHECK(built.peak_in_flight == scanned->peak_in_flight);
  // The WAL facts are the caller's: copy them over, then everything agrees.
  built.wal_dir = scanned->wal_dir;
  built.segments = scanned->segments;
  built.end = scanned->end;
  built.cluster_known = scanned->cluster_known;
  built.cluster_id = scanned->cluster_id;
  CHECK(walcut::cut::SummaryToJson(built) == walcut::cut::SummaryToJson(*scanned));
}

TEST_CASE("the nodes' scans interleaved segment by segment on 1-4 threads equal one ScanNode per node") {
  TempDir d("interleave");
  auto o = Healthy(d.path.string(), 23);
  o.nodes = 5;
  o.backups = 2;
  o.txs = 2500;
  o.random_crashes = 3;
  o.segment_bytes = 32 * 1024;  // dozens of segments per node, so the turns really alternate
  auto run = walcut::node::RunCluster(o);
  REQUIRE(run.ok());
  // Node 3's WAL ends early: damage in its second segment stops its scan
  // while the others go on.
  auto segs = walfmt::ListSegments(fmt::format("{}/node-3/wal", d.path.string()), [](const walfmt::Problem&) {});
  REQUIRE(segs.ok());
  REQUIRE(segs->size() > 4);
  {
    std::fstream f((*segs)[1].path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5000);
    f.put('\x5a');
  }
  auto layout = walcut::cut::FindClusterLayout(d.path.string());
  REQUIRE(layout.ok());
  std::vector<std::string> expected;
  for (uint32_t n = 0; n < layout->wal_dirs.size(); ++n) {
    walcut::cut::ScanOptions so;
    so.node = n;
    so.expect_cluster = true;
    so.cluster_id = layout->cluster_id;
    auto s = walcut::cut::ScanNode(layout->wal_dirs[n], so);
    REQUIRE(s.ok());
    REQUIRE(layout->epoch_unix_us.has_value());  // ScanCluster adds cluster.json's epoch to every summary
    s->epoch_unix_us = layout->epoch_unix_us;
    expected.push_back(walcut::cut::SummaryToJson(*s));
  }
  CHECK(expected[3].find("\"damage\"") != std::string::npos);
  for (unsigned jobs = 1; jobs <= 4; ++jobs) {
    INFO("jobs " << jobs);
    walcut::cut::LoadOptions lo;
    lo.jobs = jobs;
    auto sums = walcut::cut::ScanCluster(*layout, lo);
    REQUIRE(sums.ok());
    REQUIRE(sums->size() == expected.size());
    for (size_t n = 0; n < expected.size(); ++n) CHECK(walcut::cut::SummaryToJson((*sums)[n]) == expected[n]);
  }
  // A node whose WAL directory is gone fails the whole scan, naming it.
  fs::remove_all(layout->wal_dirs[2]);
  for (unsigned jobs = 1; jobs <= 3; ++jobs) {
    walcut::cut::LoadOptions lo;
    lo.jobs = jobs;
    auto sums = walcut::cut::ScanCluster(*layout, lo);
    REQUIRE_FALSE(sums.ok());
    CHECK(sums.status().message().find("node-2/wal") != std::string::npos);
  }
}

TEST_CASE("the per-peer digests of a WAL without cuts equal a count made from the decoded commits") {
  // Without cuts every commit is in first-cut bucket 1. The scan counts a
  // commit whose participants are distinct and all below 8 by its set of
  // participants and hands the set's digest to each member later; others are
  // counted one by one. 3 nodes take the first way (and the second for one
  // rewritten commit), 9 nodes with 2 backups both.
  for (uint32_t nodes : {3u, 9u}) {
    INFO(nodes << " nodes");
    TempDir d(fmt::format("digests{}", nodes));
    auto opt = Healthy(d.path.string(), 5);
    opt.nodes = nodes;
    opt.backups = nodes == 9 ? 2 : 1;
    opt.cuts = 0;
    REQUIRE(walcut::node::RunCluster(opt).ok());
    if (nodes == 3) {
      // One commit on node 0 names a participant twice: counted one by one,
      // as the reference below counts it, not as a set.
      bool done = false;
      Rewrite(d.path.string(), 0, [&](std::vector<Rec>& recs) {
        for (auto& r : recs) {
          if (auto* c = std::get_if<walfmt::TxCommit>(&r.rec); c && c->participants.size() > 1) {
            c->participants.push_back(c->participants.back());
            done = true;
            break;
          }
        }
      });
      REQUIRE(done);
    }
    bool wide_ids = false;
    for (uint32_t n = 0; n < nodes; ++n) {
      INFO("node " << n);
      const std::string wal = fmt::format("{}/node-{}/wal", d.path.string(), n);
      std::map<uint32_t, walcut::cut::TxDigest> want;
      uint64_t commits = 0, owned = 0;
      for (const auto& r : ReadAll(wal)) {
        const auto* c = std::get_if<walfmt::TxCommit>(&r.rec);
        if (!c) continue;
        ++commits;
        owned += c->participants.empty() || c->participants.front() >= n;
        for (uint32_t p : c->participants) {
          if (p >= 8) wide_ids = true;
          if (p == n) continue;
          want[p].x ^= walcut::cut::TxHash(c->tx);
          ++want[p].n;
        }
      }
      REQUIRE(commits > 0);
      walcut::cut::ScanOptions so;
      so.node = n;
      auto s = walcut::cut::ScanNode(wal, so);
      REQUIRE(s.ok());
      CHECK(s->cuts.empty());
      REQUIRE(s->first_cut.size() == 1);
      CHECK(s->first_cut.begin()->first == 1);
      CHECK(s->first_cut.begin()->second.count == commits);
      CHECK(s->first_cut.begin()->second.owned == owned);
      std::map<uint32_t, walcut::cut::TxDigest> got;
      for (const auto& [peer, buckets] : s->shared) {
        REQUIRE(buckets.size() == 1);
        CHECK(buckets.begin()->first == 1);
        got[peer] = buckets.begin()->second;
      }
      CHECK(got == want);
    }
    if (nodes == 9) CHECK(wide_ids);
  }
}

TEST_CASE("ScanCluster: an exception on a scanning thread reaches the caller") {
  TempDir d("throws");
  REQUIRE(walcut::node::RunCluster(Healthy(d.path.string())).ok());
  auto layout = walcut::cut::FindClusterLayout(d.path.string());
  REQUIRE(layout.ok());
  walcut::cut::LoadOptions lo;
  lo.jobs = 2;
  int calls = 0;  // the progress callback is called under a lock
  lo.progress = [&](uint64_t) {
    if (++calls == 3) throw std::runtime_error("progress failed");
  };
  CHECK_THROWS_WITH(walcut::cut::ScanCluster(*layout, lo), "progress failed");
  CHECK(calls >= 3);
}

namespace {

// Removes, on every node of `dir`, the segments before the one holding the
// SNAPSHOT record named `name`. Returns how many went.
size_t PruneBefore(const std::string& dir, uint32_t nodes, const std::string& name) {
  size_t removed = 0;
  for (uint32_t n = 0; n < nodes; ++n) {
    const std::string wal = fmt::format("{}/node-{}/wal", dir, n);
    auto recs = ReadAll(wal);
    auto at = FindRecord<walfmt::Snapshot>(recs, [&](const walfmt::Snapshot& s) { return s.name == name; });
    REQUIRE(at != recs.end());
    for (const auto& e : fs::directory_iterator(wal)) {
      if (std::strtoull(e.path().filename().string().substr(0, 16).c_str(), nullptr, 16) < at->lsn.segment) {
        fs::remove(e.path());
        ++removed;
      }
    }
  }
  return removed;
}

}  // namespace

TEST_CASE("a pruned WAL: a commit dropped after the full snapshot is still found, cuts before it are unavailable",
          "[pruned]") {
  TempDir d("pruned-drop");
  walcut::node::ClusterOptions o = Healthy(d.path.string());
  o.full_snapshot_at_tx = 900;
  o.segment_bytes = 8 * 1024;
  auto run = walcut::node::RunCluster(o);
  REQUIRE(run.ok());
  REQUIRE(run->snapshots.size() == 1);
  const std::string snap = run->snapshots[0].name;
  ClusterCuts cc = LoadCuts(d.path.string());
  // A two-participant transaction committed on node 1 after its SNAPSHOT
  // record and well before the last cut, tracked by no cut.
  std::set<walfmt::TxId> tracked;
  for (const auto& s : cc.nodes) {
    for (const auto& c : s.cuts) {
      for (const auto* l : {&c.before, &c.after}) {
        for (const auto& t : *l) tracked.insert(t.tx);
      }
    }
  }
  const walfmt::Lsn snap_at = run->snapshots[0].wal_position[1];
  const walfmt::Lsn last_start = cc.cuts.back().nodes[1]->start;
  auto recs = ReadAll(fmt::format("{}/node-1/wal", d.path.string()));
  auto victim = std::find_if(recs.begin(), recs.end(), [&](const Rec& r) {
    auto* c = std::get_if<walfmt::TxCommit>(&r.rec);
    return c && r.lsn > snap_at && !tracked.count(c->tx) && c->participants.size() == 2;
  });
  REQUIRE(victim != recs.end());
  REQUIRE(victim->lsn < last_start);
  const walfmt::TxId tx = std::get<walfmt::TxCommit>(victim->rec).tx;
  INFO("dropped the TX_COMMIT of " << tx.ToString() << " at " << victim->lsn.ToString() << " on node 1");
  Rewrite(d.path.string(), 1, [&](std::vector<Rec>& all) {
    all.erase(std::find_if(all.begin(), all.end(), [&](const Rec& r) {
      auto* c = std::get_if<walfmt::TxCommit>(&r.rec);
      return c && c->tx == tx;
    }));
  });
  REQUIRE(PruneBefore(d.path.string(), o.nodes, snap) > 0);
  ClusterCuts bad = LoadCuts(d.path.string());
  REQUIRE(bad.pruned);
  size_t inconsistent = 0, unavailable = 0;
  for (const auto& g : bad.cuts) {
    INFO("cut " << g.cut_id << " " << CutStatusName(g.status) << ": " << g.reason);
    if (g.status == CutStatus::kUnavailable) ++unavailable;
    if (g.status != CutStatus::kInconsistent) continue;
    ++inconsistent;
    CHECK_FALSE(g.checks.atomicity);
    CHECK(g.checked_against.find(snap) != std::string::npos);
    CHECK(g.reason.find("disagree on the transactions they share") != std::string::npos);
  }
  CHECK(inconsistent > 0);
  CHECK(unavailable > 0);
  // The second pass names the transaction, against the snapshot base.
  auto layout = walcut::cut::FindClusterLayout(d.path.string());
  REQUIRE(layout.ok());
  REQUIRE(walcut::cut::NameDisagreements(bad, *layout).ok());
  size_t named = 0;
  for (const auto& g : bad.cuts) {
    for (const auto& dis : g.disagreements) {
      const auto& f = g.findings[dis.finding];
      INFO(f.message);
      CHECK(f.has_tx);
      CHECK(f.tx == tx);
      CHECK(f.message.find(tx.ToString() + " (not committed on node 1)") != std::string::npos);
      ++named;
    }
  }
  CHECK(named > 0);
  // A layout that lacks the node a disagreement names is refused, naming the node.
  {
    const walcut::cut::GlobalCut* first = nullptr;
    for (const auto& g : bad.cuts) {
      if (!first && !g.disagreements.empty()) first = &g;
    }
    REQUIRE(first);
    walcut::cut::ClusterLayout none = *layout;
    none.wal_dirs.clear();
    const auto st = walcut::cut::NameDisagreements(bad, none);
    REQUIRE_FALSE(st.ok());
    CHECK(st.code() == walfmt::ErrorCode::kInvalidArgument);
    CHECK(st.message() == fmt::format("node {} is not in the cluster layout", first->disagreements.front().a));
  }
  // The same WAL without the damage: nothing is inconsistent.
  TempDir clean("pruned-clean");
  o.dir = clean.path.string();
  REQUIRE(walcut::node::RunCluster(o).ok());
  REQUIRE(PruneBefore(clean.path.string(), o.nodes, snap) > 0);
  for (const auto& g : LoadCuts(clean.path.string()).cuts) {
    INFO("cut " << g.cut_id << ": " << g.reason);
    CHECK(g.status != CutStatus::kInconsistent);
  }
}

namespace {

// Every transaction a cut tracks on some node (listed in a CUT_FINISH).
std::set<walfmt::TxId> Tracked(const ClusterCuts& cc) {
  std::set<walfmt::TxId> tracked;
  for (const auto& s : cc.nodes) {
    for (const auto& c : s.cuts) {
      for (const auto* l : {&c.before, &c.after}) {
        for (const auto& t : *l) tracked.insert(t.tx);
      }
    }
  }
  return tracked;
}

// The latest time a commit record of node n carries.
uint64_t LastCommitTime(const std::vector<Rec>& recs) {
  uint64_t t = 0;
  for (const auto& r : recs) {
    if (auto* c = std::get_if<walfmt::TxCommit>(&r.rec)) t = std::max(t, c->time_us);
  }
  return t;
}

}  // namespace

TEST_CASE("a commit dropped or turned into a rollback on one participant of an untracked transaction is named",
          "[evidence]") {
  const bool to_rollback = GENERATE(false, true);
  INFO((to_rollback ? "turned into a TX_ROLLBACK" : "dropped"));
  TempDir d("named");
  walcut::node::ClusterOptions o = Healthy(d.path.string());
  o.txs = 15000;
  REQUIRE(walcut::node::RunCluster(o).ok());
  ClusterCuts cc = LoadCuts(d.path.string());
  const auto tracked = Tracked(cc);
  auto recs = ReadAll(fmt::format("{}/node-1/wal", d.path.string()));
  // Shared with node 0, in the first quarter of the WAL, tracked by no cut.
  auto victim = std::find_if(recs.begin() + static_cast<long>(recs.size() / 8), recs.end(), [&](const Rec& r) {
    auto* c = std::get_if<walfmt::TxCommit>(&r.rec);
    return c && !tracked.count(c->tx) && c->participants == std::vector<uint32_t>{0, 1};
  });
  REQUIRE(victim != recs.end());
  const walfmt::TxCommit commit = std::get<walfmt::TxCommit>(victim->rec);
  INFO("the TX_COMMIT of " << commit.tx.ToString() << " at " << victim->lsn.ToString() << " on node 1");
  Rewrite(d.path.string(), 1, [&](std::vector<Rec>& all) {
    auto it = std::find_if(all.begin(), all.end(), [&](const Rec& r) {
      auto* c = std::get_if<walfmt::TxCommit>(&r.rec);
      return c && c->tx == commit.tx;
    });
    if (to_rollback) {
      it->rec = walfmt::TxRollback{commit.tx, commit.time_us, 0, commit.participants};
    } else {
      all.erase(it);
    }
  });
  // ReadCuts, as the commands read a cluster directory: the second pass
  // runs by itself.
  auto read = walcut::cut::ReadCuts({d.path.string()}, {});
  REQUIRE(read.ok());
  ClusterCuts bad = std::move(read.value());
  size_t named = 0;
  for (const auto& g : bad.cuts) {
    for (const auto& dis : g.disagreements) {
      const auto& f = g.findings[dis.finding];
      INFO("cut " << g.cut_id << ": " << f.message);
      CHECK(dis.a == 0);
      CHECK(dis.b == 1);
      CHECK(f.has_tx);
      CHECK(f.tx == commit.tx);
      CHECK(f.message.find(fmt::format("in the cut on node 0 only: {} (not committed on node 1)",
                                       commit.tx.ToString())) != std::string::npos);
      ++named;
    }
  }
  CHECK(named > 0);
  // Dropped, the transaction stays in flight on node 1 while its WAL goes on:
  // its missing outcome is a finding of its own. Rolled back, it is not.
  bool overdue = false;
  for (const auto& f : bad.findings) {
    overdue |=
        f.node == 1 && f.has_tx && f.tx == commit.tx && f.message.find("never finished here") != std::string::npos;
  }
  INFO("WAL time after the commit: " << LastCommitTime(recs) - commit.time_us << " us");
  REQUIRE(LastCommitTime(recs) - commit.time_us > walcut::cut::ScanOptions{}.outcome_overdue_us);
  CHECK(overdue == !to_rollback);
}

TEST_CASE("a one-phase commit dropped on a cluster without backups: the missing outcome names the transaction",
          "[evidence]") {
  TempDir d("overdue-1pc");
  walcut::node::ClusterOptions o = Healthy(d.path.string());
  o.backups = 0;
  o.txs = 15000;
  REQUIRE(walcut::node::RunCluster(o).ok());
  for (const auto& g : LoadCuts(d.path.string()).cuts) REQUIRE(g.status == CutStatus::kConsistent);
  auto recs = ReadAll(fmt::format("{}/node-2/wal", d.path.string()));
  const uint64_t end_time = LastCommitTime(recs);
  auto victim = std::find_if(recs.begin(), recs.end(), [&](const Rec& r) {
    auto* c = std::get_if<walfmt::TxCommit>(&r.rec);
    return c && (c->flags & walfmt::kTxFlagOnePhase) && c->participants.size() == 1 &&
           end_time - c->time_us > walcut::cut::ScanOptions{}.outcome_overdue_us + 100000;
  });
  REQUIRE(victim != recs.end());
  const walfmt::TxId tx = std::get<walfmt::TxCommit>(victim->rec).tx;
  INFO("dropped the TX_COMMIT of " << tx.ToString() << " at " << victim->lsn.ToString() << " on node 2");
  Rewrite(d.path.string(), 2, [&](std::vector<Rec>& all) {
    all.erase(std::find_if(all.begin(), all.end(), [&](const Rec& r) {
      auto* c = std::get_if<walfmt::TxCommit>(&r.rec);
      return c && c->tx == tx;
    }));
  });
  ClusterCuts bad = LoadCuts(d.path.string());
  const walcut::cut::Finding* found = nullptr;
  for (const auto& f : bad.findings) {
    if (f.has_tx && f.tx == tx) found = &f;
  }
  REQUIRE(found != nullptr);
  CHECK(found->node == 2);
  CHECK(walcut::cut::CheckName(found->check) == std::string("atomicity"));
  CHECK(found->message.find(fmt::format("node 2: transaction {} began at", tx.ToString())) != std::string::npos);
  // Every cut that starts on node 2 after it contains the broken transaction.
  size_t failed = 0;
  for (const auto& g : bad.cuts) {
    if (g.nodes[2] && g.nodes[2]->started && found->position < g.nodes[2]->start) {
      CHECK(g.status == CutStatus::kInconsistent);
      ++failed;
    }
  }
  CHECK(failed > 0);
  // With the check off, the WAL passes every check: nothing else sees it.
  auto layout = walcut::cut::FindClusterLayout(d.path.string());
  REQUIRE(layout.ok());
  walcut::cut::ScanOptions so;
  so.node = 2;
  so.expect_cluster = true;
  so.cluster_id = layout->cluster_id;
  so.outcome_overdue_us = 0;
  auto s = walcut::cut::ScanNode(layout->wal_dirs[2], so);
  REQUIRE(s.ok());
  CHECK(s->findings.empty());
}

namespace {

// Cut k as the scans that stop once k is decided (ScanOptions::settle_cut)
// see it: the same status and reason as the whole WAL's. `settled` counts
// the nodes whose scan did stop early.
ClusterCuts SettledSameAsWhole(const std::string& dir, uint64_t k, size_t& settled) {
  auto layout = walcut::cut::FindClusterLayout(dir);
  REQUIRE(layout.ok());
  const ClusterCuts whole = LoadCuts(dir);
  walcut::cut::LoadOptions lo;
  lo.settle_cut = k;
  auto sums = walcut::cut::ScanCluster(*layout, lo);
  REQUIRE(sums.ok());
  auto cc = walcut::cut::Reconstruct(std::move(sums.value()));
  REQUIRE(cc.ok());
  const GlobalCut* a = whole.Find(k);
  const GlobalCut* b = cc->Find(k);
  REQUIRE(a);
  REQUIRE(b);
  INFO("whole WAL: " << Findings(*a) << "scan up to cut " << k << ": " << Findings(*b));
  CHECK(b->status == a->status);
  CHECK(b->reason == a->reason);
  CHECK(b->findings.size() == a->findings.size());
  settled = 0;
  for (size_t i = 0; i < cc->nodes.size(); ++i) {
    settled += cc->nodes[i].settled_cut == k;
    CHECK(cc->nodes[i].bytes <= whole.nodes[i].bytes);
  }
  return std::move(cc.value());
}

}  // namespace

TEST_CASE("settle_cut: a healthy WAL is read in part", "[settle]") {
  TempDir d("settle");
  walcut::node::ClusterOptions o = Healthy(d.path.string());
  o.txs = 6000;
  REQUIRE(walcut::node::RunCluster(o).ok());
  size_t settled = 0;
  const ClusterCuts cc = SettledSameAsWhole(d.path.string(), 1, settled);
  CHECK(settled == 3);
  const ClusterCuts whole = LoadCuts(d.path.string());
  for (size_t i = 0; i < 3; ++i) {
    // Past CUT_START(2) on the node, short of the end of its WAL.
    CHECK(whole.Find(2)->nodes[i]->start < cc.nodes[i].end);
    CHECK(cc.nodes[i].bytes < whole.nodes[i].bytes / 2);
  }
  // The last cut has no later CUT_START: read to the end.
  const uint64_t last = whole.cuts.back().cut_id;
  SettledSameAsWhole(d.path.string(), last, settled);
  CHECK(settled == 0);
}

TEST_CASE("settle_cut: read to the next CUT_START, a late CUT_ABORT(K) fails K", "[settle]") {
  // As the initiator writes when a participant was lost (its own
  // CUT_FINISH came first).
  TempDir d("settle-abort");
  walcut::node::ClusterOptions o = Healthy(d.path.string());
  o.txs = 6000;
  REQUIRE(walcut::node::RunCluster(o).ok());
  const uint64_t k = 2;
  Rewrite(d.path.string(), 0, [&](std::vector<Rec>& recs) {
    auto next = FindRecord<walfmt::CutStart>(recs, [&](const walfmt::CutStart& c) { return c.cut_id == k + 1; });
    REQUIRE(next != recs.end());
    walfmt::CutAbort a{k, std::get<walfmt::CutStart>(next->rec).time_us, walfmt::CutAbortReason::kParticipantLost,
                       "node 2 was lost"};
    recs.insert(next, Rec{a, {}});
  });
  size_t settled = 0;
  const ClusterCuts cc = SettledSameAsWhole(d.path.string(), k, settled);
  CHECK(cc.Find(k)->status == CutStatus::kInconsistent);
  CHECK(cc.Find(k)->reason.find("CUT_ABORT(2) on node 0") != std::string::npos);
  CHECK(settled == 3);
}

TEST_CASE("settle_cut: an unfinished transaction begun before K fails K", "[settle]") {
  TempDir d("settle-overdue");
  walcut::node::ClusterOptions o = Healthy(d.path.string());
  o.backups = 0;
  o.txs = 15000;
  REQUIRE(walcut::node::RunCluster(o).ok());
  const uint64_t k = 2;
  const ClusterCuts whole = LoadCuts(d.path.string());
  REQUIRE(whole.Find(k)->status == CutStatus::kConsistent);
  const walfmt::Lsn start = whole.Find(k)->nodes[2]->start;
  const walfmt::Lsn prev_start = whole.Find(k - 1)->nodes[2]->start;
  // The last one-phase transaction of node 2 alone that commits between
  // CUT_START(K-1) and CUT_START(K): its commit dropped, it began before
  // CUT_START(K) and never finishes.
  auto tracked = [&](const walfmt::TxId& t) {
    for (const auto* set : {&whole.Find(k)->nodes[2]->before, &whole.Find(k)->nodes[2]->after}) {
      for (const auto& x : *set) {
        if (x.tx == t) return true;
      }
    }
    return false;
  };
  auto recs = ReadAll(fmt::format("{}/node-2/wal", d.path.string()));
  walfmt::TxId tx;
  bool found = false;
  for (const auto& r : recs) {
    auto* c = std::get_if<walfmt::TxCommit>(&r.rec);
    if (c && (c->flags & walfmt::kTxFlagOnePhase) && c->participants.size() == 1 && prev_start < r.lsn &&
        r.lsn < start && !tracked(c->tx) &&
        LastCommitTime(recs) - c->time_us > walcut::cut::ScanOptions{}.outcome_overdue_us + 100000) {
      tx = c->tx;
      found = true;
    }
  }
  REQUIRE(found);
  INFO("dropped the TX_COMMIT of " << tx.ToString() << " on node 2");
  Rewrite(d.path.string(), 2, [&](std::vector<Rec>& all) {
    all.erase(std::find_if(all.begin(), all.end(), [&](const Rec& r) {
      auto* c = std::get_if<walfmt::TxCommit>(&r.rec);
      return c && c->tx == tx;
    }));
  });
  size_t settled = 0;
  const ClusterCuts cc = SettledSameAsWhole(d.path.string(), k, settled);
  CHECK(cc.Find(k)->status == CutStatus::kInconsistent);
  CHECK(cc.Find(k)->reason.find(tx.ToString()) != std::string::npos);
  CHECK(cc.nodes[2].settled_cut == 0);  // node 2 read to the end
  CHECK(settled == 2);
  // The cut before it is decided before the transaction began.
  SettledSameAsWhole(d.path.string(), k - 1, settled);
  CHECK(settled == 3);
}

TEST_CASE("settle_cut: a later after set moving a commit of K fails K", "[settle]") {
  // Cuts close together (fewer commits between them than the ring of
  // recent commits holds): a commit of cut K is still among the recent
  // commits when cut K+1 starts, and CUT_FINISH(K+1) lists it in after(K+1).
  TempDir d("settle-move");
  walcut::node::ClusterOptions o = Healthy(d.path.string());
  o.cuts = 8;
  o.cut_every = 120;
  REQUIRE(walcut::node::RunCluster(o).ok());
  const ClusterCuts whole = LoadCuts(d.path.string());
  const uint64_t k = 3;
  REQUIRE(whole.Find(k)->status == CutStatus::kConsistent);
  REQUIRE(whole.Find(k + 1)->status == CutStatus::kConsistent);
  // A transaction of node 0 and another node, committed on node 0 just before
  // CUT_START(K) (so in cut K), not tracked.
  const walfmt::Lsn start = whole.Find(k)->nodes[0]->start;
  auto recs = ReadAll(fmt::format("{}/node-0/wal", d.path.string()));
  walfmt::TxId tx;
  bool found = false;
  for (const auto& r : recs) {
    auto* c = std::get_if<walfmt::TxCommit>(&r.rec);
    if (c && c->participants.size() > 1 && r.lsn < start) {
      tx = c->tx;
      found = true;
    }
  }
  REQUIRE(found);
  for (const auto* set : {&whole.Find(k)->nodes[0]->before, &whole.Find(k)->nodes[0]->after}) {
    for (const auto& t : *set) REQUIRE(t.tx != tx);
  }
  INFO("listed " << tx.ToString() << " in after(" << k + 1 << ") on node 0");
  Rewrite(d.path.string(), 0, [&](std::vector<Rec>& all) {
    auto f = FindRecord<walfmt::CutFinish>(all, [&](const walfmt::CutFinish& c) { return c.cut_id == k + 1; });
    REQUIRE(f != all.end());
    std::get<walfmt::CutFinish>(f->rec).after.push_back(tx);
  });
  size_t settled = 0;
  const ClusterCuts cc = SettledSameAsWhole(d.path.string(), k, settled);
  // Cut K no longer holds it on node 0: its digests disagree with its peers'.
  CHECK(cc.Find(k)->status == CutStatus::kInconsistent);
  CHECK_FALSE(cc.Find(k)->checks.atomicity);
}

TEST_CASE(
    "a commit whose marker is ahead of every cut the node reached: a marker finding naming node, cut and "
    "transaction") {
  // The marker check alone: the commit stays where it was and its other
  // participants still count it where they did, so only the marker says
  // anything is wrong.
  TempDir d("future-marker");
  const uint32_t node = 0;
  walfmt::TxId bumped;
  ClusterCuts bad = RunAndRewrite(d.path.string(), node, [&](std::vector<Rec>& recs) {
    // The first commit after CUT_FINISH(1) and before CUT_START(2): the node
    // has reached cut 1 there, so a valid marker is 1 or 2.
    auto finish1 = FindRecord<walfmt::CutFinish>(recs, [](const walfmt::CutFinish& f) { return f.cut_id == 1; });
    REQUIRE(finish1 != recs.end());
    for (auto it = finish1; it != recs.end(); ++it) {
      if (auto* s = std::get_if<walfmt::CutStart>(&it->rec); s && s->cut_id == 2) break;
      if (auto* c = std::get_if<walfmt::TxCommit>(&it->rec)) {
        c->marker = 9;
        bumped = c->tx;
        break;
      }
    }
  });
  MarkerFindingOfCut2(bad, node, bumped, "with marker 9, but the node had only reached cut 1");
  // Cut 1 was decided before that commit: untouched.
  CHECK(bad.Find(1)->status == CutStatus::kConsistent);
}

namespace {

// Index in recs of the first record of type R with cut id k.
template <typename R>
size_t CutRecord(std::vector<Rec>& recs, uint64_t k) {
  auto it = FindRecord<R>(recs, [&](const R& r) { return r.cut_id == k; });
  REQUIRE(it != recs.end());
  return static_cast<size_t>(it - recs.begin());
}

bool Listed(const walfmt::CutFinish& f, const walfmt::TxId& t) {
  return std::find(f.before.begin(), f.before.end(), t) != f.before.end() ||
         std::find(f.after.begin(), f.after.end(), t) != f.after.end();
}

}  // namespace

TEST_CASE("a commit inside cut 2 with marker 1 that is not in before(2): a marker finding naming it") {
  TempDir d("marker-not-before");
  const uint32_t node = 0;
  walfmt::TxId moved;
  ClusterCuts bad = RunAndRewrite(d.path.string(), node, [&](std::vector<Rec>& recs) {
    const size_t s = CutRecord<walfmt::CutStart>(recs, 2);
    const size_t f = CutRecord<walfmt::CutFinish>(recs, 2);
    const auto& fin = std::get<walfmt::CutFinish>(recs[f].rec);
    for (size_t i = s + 1; i < f; ++i) {
      if (auto* c = std::get_if<walfmt::TxCommit>(&recs[i].rec); c && !Listed(fin, c->tx)) {
        c->marker = 1;
        moved = c->tx;
        break;
      }
    }
  });
  MarkerFindingOfCut2(bad, node, moved,
                      "after CUT_START(2) with marker 1 < 2 but is not in before(2): the marker puts it in the cut, "
                      "the WAL does not");
}

TEST_CASE("a commit before CUT_START(2) with marker 2 that is not in after(2): a marker finding naming it") {
  TempDir d("marker-not-after");
  const uint32_t node = 0;
  walfmt::TxId bumped;
  ClusterCuts bad = RunAndRewrite(d.path.string(), node, [&](std::vector<Rec>& recs) {
    const size_t f1 = CutRecord<walfmt::CutFinish>(recs, 1);
    const size_t s = CutRecord<walfmt::CutStart>(recs, 2);
    const auto& fin = std::get<walfmt::CutFinish>(recs[CutRecord<walfmt::CutFinish>(recs, 2)].rec);
    for (size_t i = s; i-- > f1;) {
      if (auto* c = std::get_if<walfmt::TxCommit>(&recs[i].rec); c && c->marker == 1 && !Listed(fin, c->tx)) {
        c->marker = 2;
        bumped = c->tx;
        break;
      }
    }
  });
  MarkerFindingOfCut2(bad, node, bumped,
                      "before CUT_START(2) with marker 2 >= 2 but is not in after(2): the WAL puts it in the cut, "
                      "the marker does not");
}

TEST_CASE("a CUT_START repeated and a CUT_FINISH repeated or for a cut never started: shape findings") {
  TempDir d("repeated-markers");
  const uint32_t node = 1;
  ClusterCuts bad = RunAndRewrite(d.path.string(), node, [&](std::vector<Rec>& recs) {
    const size_t f = CutRecord<walfmt::CutFinish>(recs, 2);
    walfmt::CutStart again = std::get<walfmt::CutStart>(recs[CutRecord<walfmt::CutStart>(recs, 2)].rec);
    walfmt::CutFinish twice = std::get<walfmt::CutFinish>(recs[f].rec);
    walfmt::CutFinish stray;
    stray.cut_id = 77;
    stray.time_us = twice.time_us;
    recs.insert(recs.begin() + static_cast<std::ptrdiff_t>(f) + 1, {Rec{again, {}}, Rec{twice, {}}, Rec{stray, {}}});
  });
  const GlobalCut* g = bad.Find(2);
  REQUIRE(g);
  INFO(Findings(*g));
  CHECK(g->status == CutStatus::kInconsistent);
  CHECK_FALSE(g->checks.shape);
  CHECK(HasFinding(*g, "shape", node, "node 1: CUT_START(2) at "));
  CHECK(HasFinding(*g, "shape", node, "after CUT_START(2): cut ids must increase"));
  CHECK(HasFinding(*g, "shape", node, "after the cut had ended here"));
  const GlobalCut* s = bad.Find(77);
  REQUIRE(s);
  INFO(Findings(*s));
  CHECK(HasFinding(*s, "shape", node, "node 1: CUT_FINISH(77) at "));
  CHECK(HasFinding(*s, "shape", node, "without a CUT_START"));
}

TEST_CASE("a tracked transaction whose commit became a rollback on one node: a rollback finding naming it") {
  TempDir d("tracked-rollback");
  auto run = walcut::node::RunCluster(Healthy(d.path.string()));
  REQUIRE(run.ok());
  ClusterCuts cc = LoadCuts(d.path.string());
  uint32_t node = 0;
  const GlobalCut* g = nullptr;
  for (node = 0; node < 3 && !g; ++node) g = CutWithBefore(cc, node);
  REQUIRE(g);
  --node;
  const uint64_t k = g->cut_id;
  const walfmt::TxId t = g->nodes[node]->before[0].tx;
  Rewrite(d.path.string(), node, [&](std::vector<Rec>& recs) {
    auto it = FindRecord<walfmt::TxCommit>(recs, [&](const walfmt::TxCommit& c) { return c.tx == t; });
    REQUIRE(it != recs.end());
    const auto c = std::get<walfmt::TxCommit>(it->rec);
    it->rec = walfmt::TxRollback{c.tx, c.time_us, c.flags, c.participants};
  });
  ClusterCuts bad = LoadCuts(d.path.string());
  const GlobalCut* b = bad.Find(k);
  REQUIRE(b);
  INFO(Findings(*b));
  CHECK(b->status == CutStatus::kInconsistent);
  CHECK(HasFinding(*b, "rollback", node, fmt::format("node {}: transaction {} rolled back at ", node, t.ToString())));
  CHECK(HasFinding(*b, "rollback", node, fmt::format("but listed in before({}) of CUT_FINISH at ", k)));
}

TEST_CASE("a commit made before CUT_START(1) listed in after(2): a monotonicity finding naming it") {
  TempDir d("monotonicity");
  const uint32_t node = 0;
  walfmt::TxId old;
  ClusterCuts bad = RunAndRewrite(d.path.string(), node, [&](std::vector<Rec>& recs) {
    const size_t s1 = CutRecord<walfmt::CutStart>(recs, 1);
    const size_t s2 = CutRecord<walfmt::CutStart>(recs, 2);
    for (size_t i = s1; i-- > 0;) {
      if (auto* c = std::get_if<walfmt::TxCommit>(&recs[i].rec)) {
        old = c->tx;
        // It must still be among the recent commits the scan keeps at CUT_START(2).
        size_t between = 0;
        for (size_t j = i; j < s2; ++j) between += std::holds_alternative<walfmt::TxCommit>(recs[j].rec);
        REQUIRE(between < 256);
        break;
      }
    }
    std::get<walfmt::CutFinish>(recs[CutRecord<walfmt::CutFinish>(recs, 2)].rec).after.push_back(old);
  });
  REQUIRE(old.seq != 0);
  const GlobalCut* g = bad.Find(2);
  REQUIRE(g);
  INFO(Findings(*g));
  CHECK(g->status == CutStatus::kInconsistent);
  CHECK_FALSE(g->checks.monotonicity);
  CHECK(HasFinding(*g, "monotonicity", node, fmt::format("node 0: transaction {} (committed at ", old.ToString())));
  CHECK(HasFinding(*g, "monotonicity", node, "is in cut 1 but in after(2): cut 2 does not contain cut 1"));
}

TEST_CASE(
    "an intact TX_DATA or CUT_START record whose payload does not decode is a wal finding, no segments is an "
    "error") {
  TempDir d("undecodable");
  const fs::path wal = d.path / "wal";
  walfmt::WriterOptions wo;
  wo.wal_dir = wal.string();
  wo.node_id = 0;
  wo.cluster_id = 0x5eed;
  auto w = walfmt::WalWriter::Create(wo);
  REQUIRE(w.ok());
  const std::vector<uint8_t> three{1, 2, 3};
  auto at_data = (*w)->AppendRaw(static_cast<uint16_t>(walfmt::RecordType::kTxData), 0, three);
  REQUIRE(at_data.ok());
  auto at_start = (*w)->AppendRaw(static_cast<uint16_t>(walfmt::RecordType::kCutStart), 0, three);
  REQUIRE(at_start.ok());
  REQUIRE((*w)->Close().ok());
  walcut::cut::ScanOptions so;
  so.node = 0;
  auto s = walcut::cut::ScanNode(wal.string(), so);
  REQUIRE(s.ok());
  auto decode = walfmt::DecodePayload(walfmt::RecordType::kCutStart, three);
  REQUIRE_FALSE(decode.ok());
  std::set<std::string> messages;
  for (const auto& f : s->findings) {
    if (f.check == walcut::cut::Check::kWal) messages.insert(f.message);
  }
  INFO(fmt::format("{}", fmt::join(messages, "\n")));
  CHECK(
      messages.count(fmt::format("node 0: intact TX_DATA record at {} does not decode: TX_DATA payload shorter than "
                                 "a transaction id",
                                 at_data->ToString())));
  CHECK(messages.count(fmt::format("node 0: intact CUT_START record at {} does not decode: {}", at_start->ToString(),
                                   decode.status().message())));
  fs::create_directories(d.path / "empty");
  auto none = walcut::cut::ScanNode((d.path / "empty").string(), so);
  CHECK_FALSE(none.ok());
  CHECK(none.status().code() == walfmt::ErrorCode::kNotFound);
  CHECK(none.status().message() == (d.path / "empty").string() + ": no WAL segments");
}

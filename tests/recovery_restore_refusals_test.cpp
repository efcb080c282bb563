// Restore and WriteRestore refusals: a cut the WAL does not hold, summaries
// that do not match the cluster, a node without the cut's markers, an output
// that exists. Each refusal names what is wrong.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "cut_support.h"
#include "node/cluster.h"
#include "recovery/restore.h"
#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"
#include "walfmt/reader.h"
#include "walfmt/record.h"
#include "walfmt/segment.h"

namespace fs = std::filesystem;

namespace {
// 3 nodes, 300 transactions, 2 cuts, run into ROOT/cluster; its cuts, its
// layout, and the index of cut 1 (consistent) among the cuts.
struct Small {
  walcut::node::ClusterOptions o;
  walcut::cut::ClusterCuts cc;
  walcut::cut::ClusterLayout layout;
  size_t cut1 = 0;
};
Small RunSmall(const fs::path& root) {
  Small s;
  s.o.dir = (root / "cluster").string();
  s.o.seed = 3;
  s.o.nodes = 3;
  s.o.backups = 1;
  s.o.txs = 300;
  s.o.cuts = 2;
  s.o.segment_bytes = 64 * 1024;
  REQUIRE(walcut::node::RunCluster(s.o).ok());
  s.cc = walcut::test::LoadCuts(s.o.dir);
  auto layout = walcut::cut::FindClusterLayout(s.o.dir);
  REQUIRE(layout.ok());
  s.layout = std::move(layout.value());
  const walcut::cut::GlobalCut* g = s.cc.Find(1);
  REQUIRE(g);
  REQUIRE(g->status == walcut::cut::CutStatus::kConsistent);
  s.cut1 = static_cast<size_t>(g - s.cc.cuts.data());
  return s;
}
}  // namespace

TEST_CASE("Restore refuses a cut it cannot restore and an output that exists", "[recovery][restore]") {
  walcut::test::ScratchDir d("restore-refusals");
  Small small = RunSmall(d.path);
  const walcut::node::ClusterOptions& o = small.o;
  walcut::cut::ClusterCuts& cc = small.cc;
  const walcut::cut::ClusterLayout& layout = small.layout;
  const size_t gi = small.cut1;
  walcut::recovery::RestoreRequest req;
  req.cluster_dir = o.dir;
  req.cut = 1;
  req.out = (d.path / "out").string();
  auto refused = [&](const walcut::cut::ClusterCuts& c, const walcut::cut::ClusterLayout& l, walfmt::ErrorCode code,
                     const std::string& message) {
    auto r = walcut::recovery::Restore(c, l, req);
    CHECK_FALSE(r.ok());
    CHECK(r.status().code() == code);
    CHECK(r.status().message() == message);
  };

  SECTION("a cut the WAL does not hold") {
    req.cut = 99;
    refused(cc, layout, walfmt::ErrorCode::kNotFound, "cut 99 is not in the WAL");
  }
  SECTION("summaries of another number of nodes than the cluster") {
    walcut::cut::ClusterLayout two = layout;
    two.wal_dirs.pop_back();
    refused(cc, two, walfmt::ErrorCode::kInvalidArgument, fmt::format("2 nodes in {}, 3 summaries", two.dir));
  }
  SECTION("a node with no record of the cut") {
    cc.cuts[gi].nodes[1] = nullptr;
    refused(cc, layout, walfmt::ErrorCode::kInvalidArgument,
            "cut 1 has no CUT_START on node 1: there is nothing to restore that node to");
  }
  SECTION("a node whose cut did not finish") {
    walcut::cut::NodeCut unfinished = *cc.cuts[gi].nodes[2];
    unfinished.finished = false;
    cc.cuts[gi].nodes[2] = &unfinished;
    refused(cc, layout, walfmt::ErrorCode::kInvalidArgument, "cut 1 has no CUT_FINISH on node 2");
  }
  SECTION("an output that exists, refused before the base is looked at") {
    fs::create_directories(req.out);
    req.base = "no-such-base";
    refused(cc, layout, walfmt::ErrorCode::kInvalidArgument, req.out + ": already exists; refusing to overwrite");
  }
  SECTION("an output made while the restore ran") {
    auto r = walcut::recovery::Restore(cc, layout, req);
    REQUIRE(r.ok());
    fs::create_directories(req.out);
    const auto st = walcut::recovery::WriteRestore(*r, req.out);
    CHECK_FALSE(st.ok());
    CHECK(st.code() == walfmt::ErrorCode::kInvalidArgument);
    CHECK(st.message() == req.out + ": already exists; refusing to overwrite");
  }
}

// The apply pass decodes each TX_DATA as it reads it. An intact record whose
// payload does not decode (here: a write count far beyond the payload, both
// checksums made right again) fails the restore when its transaction is one
// the restore applies, naming node and transaction; nothing is written. The
// cuts were scanned before the change, so only the apply pass can notice.
TEST_CASE("Restore refuses an applied transaction whose TX_DATA does not decode", "[recovery][restore]") {
  walcut::test::ScratchDir d("restore-undecodable");
  Small small = RunSmall(d.path);
  const walcut::node::ClusterOptions& o = small.o;
  const walcut::cut::ClusterLayout& layout = small.layout;
  const walcut::cut::GlobalCut* g = &small.cc.cuts[small.cut1];
  REQUIRE(g->nodes[0]);
  const walfmt::Lsn start = g->nodes[0]->start;

  // Node 0's first TX_DATA of a transaction it committed before CUT_START(1),
  // with another record after it in the same segment.
  const std::string wal = (fs::path(o.dir) / "node-0" / "wal").string();
  auto segs = walfmt::ListSegments(wal, [](const walfmt::Problem&) {});
  REQUIRE(segs.ok());
  struct Data {
    walfmt::TxId tx;
    walfmt::Lsn at;
    bool followed = false;
  };
  std::vector<Data> data;
  std::vector<std::pair<uint32_t, uint64_t>> committed;
  walfmt::NodeReadOptions ro;
  walfmt::ReadNodeWal(
      *segs, ro,
      [&](const walfmt::RecordView& v) {
        if (!data.empty() && data.back().at.segment == v.lsn.segment) data.back().followed = true;
        auto r = walfmt::DecodePayload(v.type, v.payload);
        REQUIRE(r.ok());
        if (const auto* x = std::get_if<walfmt::TxData>(&*r); x && !x->writes.empty()) data.push_back({x->tx, v.lsn});
        if (const auto* c = std::get_if<walfmt::TxCommit>(&*r); c && v.lsn < start)
          committed.emplace_back(c->tx.node, c->tx.seq);
        return true;
      },
      [](const walfmt::Problem&) {});
  const Data* victim = nullptr;
  for (const auto& x : data) {
    const bool applied =
        std::find(committed.begin(), committed.end(), std::make_pair(x.tx.node, x.tx.seq)) != committed.end();
    if (applied && x.followed && x.at < start) {
      victim = &x;
      break;
    }
  }
  REQUIRE(victim);
  const std::string seg = fmt::format("{}/{:016X}.wal", wal, victim->at.segment);
  std::string bytes;
  {
    std::ifstream in(seg, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  REQUIRE(bytes.size() > victim->at.offset + walfmt::kRecordHeaderSize + walfmt::layout::kTxDataWrites);
  auto* rec = reinterpret_cast<uint8_t*>(bytes.data()) + victim->at.offset;
  const uint32_t len = walfmt::LoadU32(rec + 4);
  walfmt::StoreU32(rec + walfmt::kRecordHeaderSize + walfmt::layout::kTxDataCount, 0x7fffffff);
  walfmt::StoreU32(rec + 12, walfmt::MaskCrc(walfmt::crc32c::Value(rec + walfmt::kRecordHeaderSize, len)));
  walfmt::StoreU32(rec, walfmt::MaskCrc(walfmt::crc32c::Value(rec + 4, 12)));
  std::ofstream(seg, std::ios::binary | std::ios::trunc) << bytes;

  walcut::recovery::RestoreRequest req;
  req.cluster_dir = o.dir;
  req.cut = 1;
  req.out = (d.path / "out").string();
  auto r = walcut::recovery::Restore(small.cc, layout, req);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
  CHECK(r.status().message() == fmt::format("node 0: TX_DATA of {} does not decode", victim->tx.ToString()));
  CHECK_FALSE(fs::exists(req.out));
}

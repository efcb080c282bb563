// An exception thrown on a worker thread reaches the caller instead of ending
// the process (walfmt/workers.h).
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "test_files.h"
#include "walfmt/parallel_scan.h"
#include "walfmt/workers.h"
#include "walfmt/writer.h"

using walcut::testing::TempDir;

TEST_CASE("FirstError keeps the first exception and rethrows it, none, nothing") {
  walfmt::FirstError e;
  e.Run([] {});
  CHECK_FALSE(e.failed());
  CHECK_NOTHROW(e.Rethrow());
  e.Run([] { throw std::runtime_error("first"); });
  e.Run([] { throw std::logic_error("second"); });
  CHECK(e.failed());
  CHECK_THROWS_AS(e.Rethrow(), std::runtime_error);
  CHECK_THROWS_WITH(e.Rethrow(), "first");
}

TEST_CASE("ScanInParallel: a visitor that throws on a worker thread makes the scan throw, on the caller's thread") {
  TempDir d;
  const std::string wal = d.path() + "/wal";
  walfmt::WriterOptions wo;
  wo.wal_dir = wal;
  wo.segment_bytes = 2000;
  auto w = walfmt::WalWriter::Open(wo, 1);
  REQUIRE(w.ok());
  for (uint64_t seq = 1; seq <= 300; ++seq) {
    const walfmt::TxId t{0, seq};
    REQUIRE((*w)->Append(walfmt::TxData{t, {walfmt::Write{walfmt::WriteOp::kPut, "k", "v"}}}).ok());
  }
  REQUIRE((*w)->Close().ok());
  auto segs = walfmt::ListSegments(wal, [](const walfmt::Problem&) {});
  REQUIRE(segs.ok());
  REQUIRE(segs->size() >= 4);
  std::vector<walfmt::NodeSegments> nodes(1);
  nodes[0].segments = *segs;
  for (size_t bad : {size_t{0}, segs->size() - 1}) {
    INFO("throwing in segment " << bad);
    walfmt::ParallelScanOptions o;
    o.jobs = 2;
    o.make_visitor = [bad](size_t, size_t seg) -> walfmt::RecordVisitor {
      if (seg != bad) return [](const walfmt::RecordView&) { return true; };
      return [](const walfmt::RecordView&) -> bool { throw std::runtime_error("visitor failed"); };
    };
    CHECK_THROWS_WITH(walfmt::ScanInParallel(nodes, o), "visitor failed");
  }
  // Without the throwing visitor the same scan reads every record.
  walfmt::ParallelScanOptions o;
  o.jobs = 2;
  auto out = walfmt::ScanInParallel(nodes, o);
  uint64_t records = 0;
  for (const auto& s : out[0]) records += s.scan.records;
  CHECK(records == 300);
}

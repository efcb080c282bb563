// walfmt as a library: writes the WAL of one node of a two-node cluster (its
// start, three transactions, one of them rolled back, and a consistent cut)
// with WalWriter, then reads it back with ListSegments and ReadNodeWal and
// prints one line per record, as `walcut dump` describes it.
//
//   wal_roundtrip DIR     writes DIR/node-0/wal/ (DIR must not hold a WAL yet)
//
// It includes only installed walfmt headers; examples/CMakeLists.txt builds
// it against an installed walfmt found with find_package(walcut).
// Exit 0 when every record read back equals the record written, 1 when not,
// 3 when the WAL cannot be written or read.
#include <cstdio>
#include <string>
#include <vector>

#include <walfmt/reader.h>
#include <walfmt/record.h>
#include <walfmt/record_text.h>
#include <walfmt/writer.h>

namespace {

int Fail(const walfmt::Status& s, const char* what) {
  std::fprintf(stderr, "wal_roundtrip: %s: %s\n", what, s.message().c_str());
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: wal_roundtrip DIR\n");
    return 2;
  }
  const std::string wal_dir = std::string(argv[1]) + "/node-0/wal";

  // What node 0 logs: it starts; it coordinates two transactions with node 1
  // (the first commits, the second rolls back) and one of its own; it joins
  // cut 1 and finishes it with the first transaction inside the cut.
  const walfmt::TxId t1{0, 1}, t2{0, 2}, t3{0, 3};
  const std::vector<walfmt::Record> records = {
      walfmt::NodeStart{0, 1000},
      walfmt::TxData{t1, {{walfmt::WriteOp::kPut, "acct/000001", "90"}, {walfmt::WriteOp::kPut, "acct/000002", "110"}}},
      walfmt::TxPrepare{t1, 1100, {0, 1}},
      walfmt::TxCommit{t1, 0, 1200, 0, {0, 1}},
      walfmt::TxData{t2, {{walfmt::WriteOp::kDelete, "acct/000003", ""}}},
      walfmt::TxPrepare{t2, 1300, {0, 1}},
      walfmt::TxRollback{t2, 1400, 0, {0, 1}},
      walfmt::CutStart{1, 1500},
      walfmt::TxData{t3, {{walfmt::WriteOp::kPut, "acct/000004", "100"}}},
      walfmt::TxCommit{t3, 1, 1600, walfmt::kTxFlagOnePhase, {0}},
      walfmt::CutFinish{1, 1700, {t1}, {}},
  };

  walfmt::WriterOptions opt;
  opt.wal_dir = wal_dir;
  opt.node_id = 0;
  opt.cluster_id = 0x5EED;
  opt.segment_bytes = 256;        // small segments: the WAL spans several
  opt.archive_compressed = true;  // rolled segments become .wal.zst
  auto writer = walfmt::WalWriter::Create(opt, 1000);
  if (!writer.ok()) return Fail(writer.status(), "create");
  for (const walfmt::Record& r : records) {
    auto at = (*writer)->Append(r);
    if (!at.ok()) return Fail(at.status(), "append");
  }
  if (walfmt::Status s = (*writer)->Close(); !s.ok()) return Fail(s, "close");

  // Read it back: strict, since the log was closed cleanly.
  std::vector<walfmt::Problem> problems;
  const walfmt::ProblemSink sink = [&](const walfmt::Problem& p) { problems.push_back(p); };
  auto segments = walfmt::ListSegments(wal_dir, sink);
  if (!segments.ok()) return Fail(segments.status(), "list");
  walfmt::NodeReadOptions ro;
  ro.mode = walfmt::RecoveryMode::kStrict;
  size_t n = 0;
  bool equal = true;
  const walfmt::NodeRead read = walfmt::ReadNodeWal(
      *segments, ro,
      [&](const walfmt::RecordView& v) {
        auto r = walfmt::DecodePayload(v.type, v.payload);
        if (!r.ok() || n >= records.size() || !(*r == records[n])) equal = false;
        if (r.ok())
          std::printf("%s %s %s\n", v.lsn.ToString().c_str(), std::string(walfmt::RecordTypeName(v.type)).c_str(),
                      walfmt::Describe(*r).c_str());
        ++n;
        return true;
      },
      sink);
  for (const walfmt::Problem& p : problems) std::fprintf(stderr, "wal_roundtrip: %s\n", p.ToString().c_str());
  if (read.failed) return 3;
  std::printf("%zu records in %zu segments, end %s\n", n, segments->size(), read.end.ToString().c_str());
  if (!equal || n != records.size()) {
    std::fprintf(stderr, "wal_roundtrip: read back %zu records, wrote %zu, or they differ\n", n, records.size());
    return 1;
  }
  return 0;
}

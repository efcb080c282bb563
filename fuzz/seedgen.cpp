// Writes the seed corpus of fuzz_segment_reader into a directory: small WAL
// segments written by WalWriter (every record type, plain and zstd archived),
// and copies damaged the ways a crash or a bad disk damages them (torn tail,
// zero-filled tail, flipped byte, unknown record types). Deterministic; every
// file is well under 8 KiB.
//
//   fuzz_seedgen OUT_DIR
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "walfmt/file_io.h"
#include "walfmt/reader.h"
#include "walfmt/record.h"
#include "walfmt/writer.h"

namespace fs = std::filesystem;
using namespace walfmt;

namespace {

bool Must(const Status& st, const char* what) {
  if (!st.ok()) std::fprintf(stderr, "fuzz_seedgen: %s: %s\n", what, st.message().c_str());
  return st.ok();
}

std::vector<Record> SampleRecords() {
  std::vector<Record> v;
  v.push_back(NodeStart{0, 1000});
  v.push_back(Snapshot{"base-0", 1001, 0x1234567890abcdefull});
  uint64_t t = 1100;
  for (uint64_t seq = 1; seq <= 6; ++seq) {
    const TxId tx{static_cast<uint32_t>(seq % 3), seq};
    TxData d{tx, {}};
    for (uint64_t w = 0; w <= seq % 4; ++w) {
      Write wr;
      wr.op = (seq + w) % 5 == 0 ? WriteOp::kDelete : WriteOp::kPut;
      wr.key = "acct/" + std::to_string(1000 + seq * 7 + w);
      if (wr.op == WriteOp::kPut)
        wr.value = "{\"balance\":" + std::to_string(seq * 100 + w) + ",\"note\":\"x\\y\x01\"}";
      d.writes.push_back(std::move(wr));
    }
    v.push_back(d);
    if (seq % 3 != 0) v.push_back(TxPrepare{tx, t++, {0, 1, 2}});
    if (seq == 3) v.push_back(CutStart{1, t++});
    if (seq % 5 == 0) {
      v.push_back(TxRollback{tx, t++, 0, {0, 1, 2}});
    } else {
      v.push_back(
          TxCommit{tx, seq > 3 ? 1u : 0u, t++, static_cast<uint16_t>(seq % 3 == 0 ? kTxFlagOnePhase : 0), {0, 1, 2}});
    }
  }
  v.push_back(CutFinish{1, t++, {TxId{1, 1}, TxId{2, 2}}, {TxId{1, 4}}});
  v.push_back(CutStart{2, t++});
  v.push_back(CutAbort{2, t++, CutAbortReason::kNodeRestart, "node 2 restarted"});
  v.push_back(NodeStart{1, t++});
  return v;
}

// Writes the sample records to a fresh WAL dir; returns its segment files.
std::vector<SegmentFile> WriteWal(const std::string& dir, uint64_t segment_bytes, bool compress, bool raw_extras) {
  fs::remove_all(dir);
  WriterOptions o;
  o.wal_dir = dir;
  o.node_id = 1;
  o.cluster_id = 0x5eed5eed5eed5eedull;
  o.segment_bytes = segment_bytes;
  o.archive_compressed = compress;
  auto w = WalWriter::Create(o, 999);
  if (!w.ok()) {
    Must(w.status(), "create");
    return {};
  }
  for (const Record& r : SampleRecords()) {
    if (!Must((*w)->Append(r).status(), "append")) return {};
    if (raw_extras && std::holds_alternative<CutStart>(r)) {
      const uint8_t blob[] = {1, 2, 3, 4, 5, 6, 7, 8};
      // An unknown type marked skippable, then one that is not.
      if (!Must((*w)->AppendRaw(77, kRecordFlagSkippable, blob).status(), "append raw")) return {};
      if (!Must((*w)->AppendRaw(78, 0, blob).status(), "append raw")) return {};
    }
  }
  if (!Must((*w)->Close(), "close")) return {};
  auto segs = ListSegments(dir, nullptr);
  return segs.ok() ? *segs : std::vector<SegmentFile>{};
}

// Every seed is well under 8 KiB; the bound only stops a surprise.
constexpr uint64_t kMaxSeedBytes = 1u << 20;

bool ReadAll(const std::string& path, std::string& out) {
  auto r = ReadWholeFile(path, kMaxSeedBytes);
  if (!Must(r.status(), "read")) return false;
  out = std::move(r.value());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seedgen OUT_DIR\n");
    return 2;
  }
  const std::string out = argv[1];
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) {
    std::fprintf(stderr, "fuzz_seedgen: %s: %s\n", out.c_str(), ec.message().c_str());
    return 3;
  }
  const std::string work = out + "/.work";
  int n = 0;
  bool written = true;
  auto emit = [&](const std::string& name, const std::string& data) {
    written = Must(WriteFileAtomic(out + "/" + name, data), "write") && written;
    ++n;
  };

  // One segment with every record type; the same cut into small segments,
  // plain and archived with zstd; one with unknown record types.
  struct Variant {
    const char* name;
    uint64_t seg_bytes;
    bool compress;
    bool raw;
  } variants[] = {{"all", 1u << 20, false, false},
                  {"small", 512, false, false},
                  {"zst", 512, true, false},
                  {"unknown", 1u << 20, false, true}};
  std::string whole;  // the one-segment WAL, for the damaged copies
  for (const Variant& v : variants) {
    const auto segs = WriteWal(work + "/" + v.name, v.seg_bytes, v.compress, v.raw);
    if (segs.empty()) return 3;
    for (size_t i = 0; i < segs.size() && i < 4; ++i) {
      std::string data;
      if (!ReadAll(segs[i].path, data)) return 3;
      emit(std::string("seed-") + v.name + "-" + std::to_string(i) + (segs[i].compressed ? ".wal.zst" : ".wal"), data);
      if (std::string(v.name) == "all") whole = data;
    }
  }
  if (whole.size() < 200) return 3;

  // Damaged copies of the one-segment WAL.
  emit("seed-torn.wal", whole.substr(0, whole.size() - 5));
  emit("seed-torn-header.wal", whole.substr(0, whole.size() - 30));
  emit("seed-zero-tail.wal", whole + std::string(300, '\0'));
  std::string flipped = whole;
  flipped[150] = static_cast<char>(flipped[150] ^ 0x20);
  emit("seed-flipped.wal", flipped);
  std::string biglen = whole;
  biglen[64 + 4] = '\xff';  // the first record's length byte: 4 GiB-ish with a bad header CRC
  biglen[64 + 7] = '\xff';
  emit("seed-biglen.wal", biglen);
  emit("seed-header-only.wal", whole.substr(0, 64));
  emit("seed-short-header.wal", whole.substr(0, 40));
  emit("seed-empty.wal", std::string());

  fs::remove_all(work, ec);
  if (!written) return 3;
  std::printf("fuzz_seedgen: wrote %d seed files to %s\n", n, out.c_str());
  return 0;
}

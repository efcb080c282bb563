// End-to-end tests of walcut dump, stats and verify: output, exit codes, and
// every bad-input case of the WAL-format issue.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "walfmt/crc32c.h"
#include "walfmt/reader.h"
#include "walfmt/segment.h"

using walcut::test::Lines;
using walcut::test::MakeCluster;
using walcut::test::Slurp;
using walcut::test::Spit;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

std::vector<std::string> SegmentPaths(const std::string& wal_dir) {
  auto segs = walfmt::ListSegments(wal_dir, nullptr);
  REQUIRE(segs.ok());
  std::vector<std::string> v;
  for (const auto& s : *segs) v.push_back(s.path);
  return v;
}

// Offsets of the records of a plain segment, read back with the library.
std::vector<uint64_t> RecordOffsets(const std::string& path) {
  std::vector<uint64_t> offs;
  walfmt::SegmentFile f{path, 0, false};
  uint64_t idx = 0;
  bool comp = false;
  const std::string base = path.substr(path.rfind('/') + 1);
  REQUIRE(walfmt::ParseSegmentName(base, idx, comp));
  f.index = idx;
  walfmt::ScanOptions so;
  walfmt::ScanSegmentFile(
      f, so,
      [&](const walfmt::RecordView& v) {
        offs.push_back(v.lsn.offset);
        return true;
      },
      nullptr);
  return offs;
}

// A fingerprint of every file below dir: names, sizes, contents, mtimes.
std::string TreeFingerprint(const std::string& dir) {
  std::string acc;
  std::vector<std::string> stack{dir};
  std::map<std::string, std::string> files;
  while (!stack.empty()) {
    const std::string d = stack.back();
    stack.pop_back();
    DIR* h = opendir(d.c_str());
    if (h == nullptr) continue;
    while (dirent* e = readdir(h)) {
      const std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      const std::string p = d + "/" + n;
      struct stat sb {};
      stat(p.c_str(), &sb);
      if (S_ISDIR(sb.st_mode)) {
        stack.push_back(p);
      } else {
        const std::string c = Slurp(p);
        files[p] = fmt::format("{}:{}:{}:{}", sb.st_size, sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec,
                               walfmt::crc32c::Value(c.data(), c.size()));
      }
    }
    closedir(h);
  }
  for (const auto& [p, f] : files) acc += p + "=" + f + "\n";
  return acc;
}

void FlipByte(const std::string& path, uint64_t offset) {
  std::string data = Slurp(path);
  REQUIRE(offset < data.size());
  data[offset] = static_cast<char>(data[offset] ^ 0x5A);
  Spit(path, data);
}

}  // namespace

TEST_CASE("verify: a clean cluster passes with exit 0 and the input is untouched", "[cli][verify]") {
  TempDir t;
  MakeCluster(t.path, 3, 200);
  const std::string before = TreeFingerprint(t.path);
  auto r = Walcut("verify " + t.path);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("verified 3 nodes") != std::string::npos);
  CHECK(r.out.find(": OK") != std::string::npos);
  CHECK(TreeFingerprint(t.path) == before);

  auto j = Walcut("verify --format json " + t.path);
  REQUIRE(j.code == 0);
  auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["schema"] == "walcut.verify/1");
  CHECK(doc["ok"] == true);
  CHECK(doc["nodes"].size() == 3);
  // 200 txs: 1 NODE_START + 3 records each + 10 cuts × 2 records.
  CHECK(doc["nodes"][0]["records"] == 1 + 600 + 10);
  CHECK(doc["summary"]["findings"] == 0);
}

TEST_CASE("verify: accepts a node dir, a wal dir and loose segment files", "[cli][verify]") {
  TempDir t;
  MakeCluster(t.path, 2, 200);
  CHECK(Walcut("verify " + t.path + "/node-1").code == 0);
  CHECK(Walcut("verify " + t.path + "/node-1/wal").code == 0);
  const auto segs = SegmentPaths(t.path + "/node-0/wal");
  REQUIRE(segs.size() >= 3);
  auto r = Walcut("verify " + segs[0] + " " + segs[1]);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("node 0 (segment files): 2 segments") != std::string::npos);
}

TEST_CASE("verify: a torn tail at the end is reported and is not a failure", "[cli][verify]") {
  TempDir t;
  MakeCluster(t.path, 2, 100);
  const auto segs = SegmentPaths(t.path + "/node-1/wal");
  const std::string last = segs.back();
  const auto offs = RecordOffsets(last);
  REQUIRE(offs.size() >= 2);
  const uint64_t cut_at = offs.back() + 7;  // inside the last record
  REQUIRE(truncate(last.c_str(), static_cast<off_t>(cut_at)) == 0);
  auto r = Walcut("verify " + t.path);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  const std::string lsn = walfmt::Lsn{segs.size() - 1, offs.back()}.ToString();
  CHECK(r.out.find("torn-tail") != std::string::npos);
  CHECK(r.out.find(lsn) != std::string::npos);
  CHECK(r.out.find("7 bytes lost") != std::string::npos);
  CHECK(r.out.find("OK (1 torn tail") != std::string::npos);

  // dump reads up to the torn record, notes it on stderr, exits 0; strict mode fails.
  auto d = Walcut("dump --node 1 " + t.path);
  CHECK(d.code == 0);
  CHECK(d.err.find("note:") != std::string::npos);
  CHECK(Walcut("dump --mode strict --node 1 " + t.path).code == 1);
}

TEST_CASE("verify: a flipped byte in a middle segment is corruption at that record", "[cli][verify]") {
  TempDir t;
  MakeCluster(t.path, 1, 200);
  const auto segs = SegmentPaths(t.path + "/node-0/wal");
  REQUIRE(segs.size() >= 3);
  const auto offs = RecordOffsets(segs[1]);
  REQUIRE(offs.size() > 4);
  FlipByte(segs[1], offs[3] + 20);  // inside the payload of the 4th record
  auto r = Walcut("verify " + t.path);
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.out.find(walfmt::Lsn{1, offs[3]}.ToString() + ": record payload checksum mismatch") != std::string::npos);
  CHECK(r.out.find("0000000000000001.wal") != std::string::npos);
  CHECK(r.out.find("FAILED (1 finding in 1 segment)") != std::string::npos);
  // dump stops there with exit 1 and the same position on stderr.
  auto d = Walcut("dump " + t.path);
  CHECK(d.code == 1);
  CHECK(d.err.find(walfmt::Lsn{1, offs[3]}.ToString()) != std::string::npos);
  CHECK(d.out.find(walfmt::Lsn{1, offs[2]}.ToString()) != std::string::npos);
  CHECK(d.out.find(walfmt::Lsn{1, offs[4]}.ToString()) == std::string::npos);
  // salvage keeps reading after it.
  auto s = Walcut("dump --mode salvage " + t.path);
  CHECK(s.code == 1);
  CHECK(s.out.find(walfmt::Lsn{1, offs[4]}.ToString()) != std::string::npos);
}

TEST_CASE("verify: a missing middle segment is a finding", "[cli][verify]") {
  TempDir t;
  MakeCluster(t.path, 1, 200);
  const auto segs = SegmentPaths(t.path + "/node-0/wal");
  REQUIRE(segs.size() >= 4);
  REQUIRE(std::remove(segs[2].c_str()) == 0);
  auto r = Walcut("verify --format json " + t.path);
  CHECK(r.code == 1);
  auto doc = nlohmann::json::parse(r.out);
  bool found = false;
  for (const auto& s : doc["nodes"][0]["segments"]) {
    for (const auto& p : s["problems"]) {
      if (p["kind"] == "missing-segment") {
        found = true;
        CHECK(p["detail"] == "missing segment 2 before this one");
      }
    }
  }
  CHECK(found);
}

TEST_CASE("verify: compressed archives are read transparently", "[cli][verify]") {
  TempDir t;
  MakeCluster(t.path, 2, 150, /*compress=*/true);
  const auto segs = SegmentPaths(t.path + "/node-0/wal");
  REQUIRE(segs.size() >= 3);
  CHECK(segs[0].size() > 4);
  CHECK(segs[0].substr(segs[0].size() - 4) == ".zst");
  auto a = Walcut("stats --format json " + t.path);
  REQUIRE(a.code == 0);
  auto doc = nlohmann::json::parse(a.out);
  CHECK(doc["records"] == 2 * (1 + 450 + 6));
  CHECK(Walcut("verify " + t.path).code == 0);
}

TEST_CASE("bad input: each case gives one clear line and a documented exit code", "[cli][badinput]") {
  TempDir t;
  MakeCluster(t.path, 1, 60);
  const std::string wal = t.path + "/node-0/wal";
  const auto segs = SegmentPaths(wal);
  REQUIRE(segs.size() >= 2);

  SECTION("missing path: exit 2, names the path") {
    auto r = Walcut("verify " + t.path + "/nope");
    CHECK(r.code == 2);
    CHECK(r.err == "walcut: " + t.path + "/nope: No such file or directory\n");
  }
  SECTION("empty directory: exit 2") {
    TempDir e;
    auto r = Walcut("dump " + e.path);
    CHECK(r.code == 2);
    CHECK(r.err.find("no WAL here") != std::string::npos);
    CHECK(Lines(r.err).size() == 1);
  }
  SECTION("a file that is not a WAL segment: exit 1, bad magic at offset 0") {
    const std::string f = t.path + "/notes.txt";
    Spit(f, "hello, this is not a write-ahead log at all, but it is longer than sixty-four bytes......\n");
    auto r = Walcut("verify " + f);
    CHECK(r.code == 1);
    CHECK(r.out.find(f + " at 0/00000000: not a walcut WAL segment (bad magic)") != std::string::npos);
    auto d = Walcut("dump " + f);
    CHECK(d.code == 1);
    CHECK(Lines(d.err).size() == 1);
  }
  SECTION("a zero-length segment: exit 1, header cut short") {
    Spit(segs.back(), "");
    auto r = Walcut("verify " + t.path);
    CHECK(r.code == 1);
    CHECK(r.out.find("segment header cut short: expected 64 bytes, found 0 bytes") != std::string::npos);
  }
  SECTION("a length field larger than the file (checksum re-signed): torn tail at the end") {
    std::string data = Slurp(segs.back());
    const auto offs = RecordOffsets(segs.back());
    auto* p = reinterpret_cast<uint8_t*>(data.data()) + offs.back();
    walfmt::StoreU32(p + 4, 100000);
    walfmt::StoreU32(p, walfmt::ComputeRecordHeaderCrc(p));
    Spit(segs.back(), data);
    auto r = Walcut("verify " + t.path);
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(r.out.find("torn tail (record runs past the end of the segment)") != std::string::npos);
  }
  SECTION("a length field of 4 GiB (checksum re-signed) in a middle segment: exit 1, bad length") {
    std::string data = Slurp(segs[0]);
    const auto offs = RecordOffsets(segs[0]);
    auto* p = reinterpret_cast<uint8_t*>(data.data()) + offs[1];
    walfmt::StoreU32(p + 4, 0xFFFFFFFFu);
    walfmt::StoreU32(p, walfmt::ComputeRecordHeaderCrc(p));
    Spit(segs[0], data);
    auto r = Walcut("verify " + t.path);
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK(r.out.find(walfmt::Lsn{0, offs[1]}.ToString() + ": record length over the limit (next intact record at " +
                     walfmt::Lsn{0, offs[2]}.ToString() + "): expected at most 1048576, found 4294967295") !=
          std::string::npos);
  }
  SECTION("a zero-filled tail: torn tail, exit 0") {
    std::string data = Slurp(segs.back());
    const size_t valid = data.size();
    data.append(4096, '\0');
    Spit(segs.back(), data);
    auto r = Walcut("verify " + t.path);
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(r.out.find(walfmt::Lsn{segs.size() - 1, valid}.ToString() + ": torn tail (zero-filled)") !=
          std::string::npos);
  }
  SECTION("an unknown record type: exit 1; skippable ones are counted, not errors") {
    walfmt::WriterOptions o;
    o.wal_dir = t.path + "/x/wal";
    o.node_id = 9;
    auto w = walfmt::WalWriter::Create(o);
    REQUIRE(w.ok());
    const uint8_t payload[3] = {1, 2, 3};
    REQUIRE((*w)->AppendRaw(200, walfmt::kRecordFlagSkippable, payload).ok());
    REQUIRE((*w)->Append(walfmt::CutStart{1, 2}).ok());
    REQUIRE((*w)->Close().ok());
    auto ok = Walcut("stats " + t.path + "/x");
    INFO(ok.out << ok.err);
    CHECK(ok.code == 0);
    CHECK(ok.out.find("(skipped unknown)") != std::string::npos);
    auto w2 = walfmt::WalWriter::Open(o);
    REQUIRE(w2.ok());
    REQUIRE((*w2)->AppendRaw(201, 0, payload).ok());
    REQUIRE((*w2)->Append(walfmt::CutStart{2, 3}).ok());
    REQUIRE((*w2)->Close().ok());
    auto bad = Walcut("verify " + t.path + "/x");
    CHECK(bad.code == 1);
    CHECK(bad.out.find("at 0/00000073: unknown record type (not marked skippable) (next intact record at "
                       "0/00000086): expected a type up to 9, found type 201; 19 bytes dropped") != std::string::npos);
  }
  SECTION("an unreadable segment (a directory named like one): exit 3") {
    REQUIRE(mkdir((wal + "/00000000000000FF.wal").c_str(), 0755) == 0);
    auto r = Walcut("verify " + t.path);
    INFO(r.out << r.err);
    CHECK(r.code == 3);
    CHECK(r.out.find("00000000000000FF.wal: not a regular file") != std::string::npos);
  }
  SECTION("a bad option: exit 2") {
    CHECK(Walcut("dump --from nonsense " + t.path).code == 2);
    CHECK(Walcut("dump --tx 12 " + t.path).code == 2);
    CHECK(Walcut("verify --format yaml " + t.path).code == 2);
    CHECK(Walcut("nosuchcommand").code == 2);
  }
}

TEST_CASE("dump: filters by type, transaction, key, position, node and count", "[cli][dump]") {
  TempDir t;
  MakeCluster(t.path, 3, 100);
  SECTION("--type") {
    auto r = Walcut("dump --type commit,cut_start " + t.path);
    REQUIRE(r.code == 0);
    const auto lines = Lines(r.out);
    // Per node: 90 commits and 2 cut starts.
    CHECK(lines.size() == 3 * (90 + 2));
    for (const auto& l : lines) {
      CHECK((l.find(" TX_COMMIT ") != std::string::npos || l.find(" CUT_START ") != std::string::npos));
    }
  }
  SECTION("--tx finds the transaction's records on every node") {
    auto r = Walcut("dump --tx 2:5 " + t.path);
    REQUIRE(r.code == 0);
    CHECK(Lines(r.out).size() == 9);  // DATA, PREPARE, COMMIT on 3 nodes
  }
  SECTION("--key") {
    auto r = Walcut("dump --key key-0042 --node 1 " + t.path);
    REQUIRE(r.code == 0);
    REQUIRE(Lines(r.out).size() == 1);
    CHECK(r.out.find("key-0042=value-294") != std::string::npos);
  }
  SECTION("--from/--to/--limit") {
    auto all = Lines(Walcut("dump --node 0 " + t.path).out);
    REQUIRE(all.size() == 1 + 300 + 4);
    auto pos = [](const std::string& line) {
      std::stringstream ss(line);
      std::string a, b, lsn;
      ss >> a >> b >> lsn;
      return lsn;
    };
    auto r = Walcut(fmt::format("dump --node 0 --from {} --to {} {}", pos(all[10]), pos(all[20]), t.path));
    REQUIRE(r.code == 0);
    const auto got = Lines(r.out);
    REQUIRE(got.size() == 10);
    CHECK(got.front() == all[10]);
    CHECK(got.back() == all[19]);
    CHECK(Lines(Walcut("dump -n 7 " + t.path).out).size() == 7);
  }
  SECTION("--format json: one object per record with the schema") {
    auto r = Walcut("dump --format json --node 2 --type tx_data -n 3 " + t.path);
    REQUIRE(r.code == 0);
    const auto lines = Lines(r.out);
    REQUIRE(lines.size() == 3);
    for (const auto& l : lines) {
      auto j = nlohmann::json::parse(l);
      CHECK(j["schema"] == "walcut.dump/1");
      CHECK(j["node"] == 2);
      CHECK(j["type"] == "TX_DATA");
      CHECK(j["record"]["writes"].size() == 1);
    }
    CHECK(nlohmann::json::parse(lines[0])["record"]["writes"][0]["key"] == "key-0001");
  }
}

TEST_CASE("stats: counts per type, per node and transactions once cluster-wide", "[cli][stats]") {
  TempDir t;
  MakeCluster(t.path, 3, 100);
  auto r = Walcut("stats --format json " + t.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["schema"] == "walcut.stats/1");
  CHECK(doc["transactions"]["committed"] == 90);
  CHECK(doc["transactions"]["rolled_back"] == 10);
  CHECK(doc["transactions"]["commit_records"] == 270);
  CHECK(doc["cuts"]["min_id"] == 1);
  CHECK(doc["cuts"]["max_id"] == 2);
  CHECK(doc["nodes"].size() == 3);
  std::map<std::string, uint64_t> by_type;
  for (const auto& ty : doc["types"]) by_type[ty["type"]] = ty["count"];
  CHECK(by_type["TX_DATA"] == 300);
  CHECK(by_type["TX_PREPARE"] == 300);
  CHECK(by_type["NODE_START"] == 3);
  auto text = Walcut("stats " + t.path);
  CHECK(text.code == 0);
  CHECK(text.out.find("transactions: 90 committed (0 one-phase, 90 two-phase), 10 rolled back") != std::string::npos);
  // One thread and two give the same numbers.
  CHECK(Walcut("stats --format json --jobs 1 " + t.path).out == r.out);
}

TEST_CASE("dump: an intact record whose payload does not decode is a finding at its position", "[cli][dump]") {
  TempDir t;
  walfmt::WriterOptions o;
  o.wal_dir = t.path + "/wal";
  o.node_id = 4;
  auto w = walfmt::WalWriter::Create(o);
  REQUIRE(w.ok());
  REQUIRE((*w)->Append(walfmt::CutStart{1, 2}).ok());
  const uint8_t short_commit[5] = {1, 0, 0, 0, 7};  // a TX_COMMIT needs at least 34 bytes
  auto at = (*w)->AppendRaw(static_cast<uint16_t>(walfmt::RecordType::kTxCommit), 0, short_commit);
  REQUIRE(at.ok());
  REQUIRE((*w)->Append(walfmt::CutStart{2, 3}).ok());
  REQUIRE((*w)->Close().ok());
  auto r = Walcut("dump " + t.path + "/wal");
  CHECK(r.code == 1);
  CHECK(Lines(r.out).size() == 2);  // the records around it are printed
  CHECK(r.err == "walcut: corruption: node 4, " + t.path + "/wal at " + at->ToString() +
                     ": TX_COMMIT payload: TX_COMMIT: transaction id cut short\n");
}

TEST_CASE("dump: segments read ahead on worker threads print exactly what one thread prints", "[cli][dump]") {
  // Segments large enough that one holds several 1 MiB chunks of text, and
  // damage of every kind the main thread handles differently: a bad record in
  // the middle of a chunk (the worker's text and problem kept), a predecessor
  // cut at a record boundary (the header check fails: the segment is read
  // again on the main thread), a bad segment header, and an undecodable
  // payload.
  TempDir t;
  MakeCluster(t.path, 3, 20000, false, 1u << 20);
  const auto n0 = SegmentPaths(t.path + "/node-0/wal");
  const auto n1 = SegmentPaths(t.path + "/node-1/wal");
  const auto n2 = SegmentPaths(t.path + "/node-2/wal");
  REQUIRE(n0.size() >= 3);
  REQUIRE(n1.size() >= 3);
  REQUIRE(n2.size() >= 3);
  const auto offs0 = RecordOffsets(n0[0]);
  REQUIRE(offs0.size() > 1000);
  const uint64_t damaged = offs0[offs0.size() / 2];  // in the middle of a chunk of text
  FlipByte(n0[0], damaged + 20);
  const auto offs1 = RecordOffsets(n1[1]);
  REQUIRE(truncate(n1[1].c_str(), static_cast<off_t>(offs1[offs1.size() - 5])) == 0);
  FlipByte(n2[1], 3);  // magic
  {
    walfmt::WriterOptions o;
    o.wal_dir = t.path + "/node-3/wal";
    o.node_id = 3;
    o.cluster_id = 0xC0FFEE;
    o.segment_bytes = 4096;
    auto w = walfmt::WalWriter::Create(o);
    REQUIRE(w.ok());
    for (uint64_t i = 1; i <= 200; ++i) {
      REQUIRE((*w)->Append(walfmt::CutStart{i, i}).ok());
      if (i % 37 == 0) {
        const uint8_t short_commit[5] = {1, 0, 0, 0, 7};
        REQUIRE((*w)->AppendRaw(static_cast<uint16_t>(walfmt::RecordType::kTxCommit), 0, short_commit).ok());
      }
    }
    REQUIRE((*w)->Close().ok());
  }

  // Node 0 is printed first: one line per record before the damaged one.
  const size_t next = offs0.size() / 2;
  const std::string at = walfmt::Lsn{0, damaged}.ToString();

  const std::vector<std::string> argsets = {
      "",
      "--mode salvage",
      "--mode point-in-time",
      "--mode strict",
      "--mode salvage --format json --type commit,cut_start,tx_data",
      "--mode salvage --max-bytes 3 --from 1/00020000 --to 2/00004000",
      "--mode salvage --key key-0042",
      "--mode salvage --tx 1:4711",
      "--mode salvage --node 1,3",
      fmt::format("--mode salvage -n {}", next),      // stops on the line before the damage: no problem
      fmt::format("--mode salvage -n {}", next + 1),  // one line past it: the problem comes first
      "--mode salvage -n 60000",
  };
  for (const std::string& a : argsets) {
    const auto one = Walcut("dump -j 1 " + a + " " + t.path);
    INFO("dump " << a << "\n" << one.err);
    CHECK(!one.out.empty());
    for (const char* jobs : {"-j 2", "-j 3", ""}) {
      INFO(jobs);
      const auto many = Walcut(fmt::format("dump {} {} {}", jobs, a, t.path));
      CHECK(many.code == one.code);
      CHECK(many.err == one.err);
      CHECK(many.out.size() == one.out.size());
      CHECK(many.out == one.out);
    }
  }
  // The limit cases say where the problem goes.
  const auto stop_before = Walcut(fmt::format("dump --mode salvage -n {} {}", next, t.path));
  CHECK(stop_before.err.empty());
  const auto stop_after = Walcut(fmt::format("dump --mode salvage -n {} {}", next + 1, t.path));
  CHECK(stop_after.err.find(at + ": record payload checksum mismatch") != std::string::npos);
}

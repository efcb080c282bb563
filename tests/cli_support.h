// Helpers for end-to-end tests: build small WALs with the real writer, run
// the walcut binary, capture stdout, stderr and the exit code.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "scratch_dir.h"
#include "walfmt/source.h"
#include "walfmt/writer.h"

namespace walcut::test {

// ScratchDir, created, with its path as a string (the CLI suites build
// shell command lines from it).
struct TempDir {
  ScratchDir dir{"cli"};
  std::string path = dir.path.string();
  TempDir() { std::filesystem::create_directories(dir.path); }
};

struct Run {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void Spit(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

// Runs `walcut ARGS` (ARGS is shell text) with stdout/stderr to files.
inline Run Walcut(const std::string& args) {
  TempDir io;
  const std::string cmd = fmt::format("'{}' {} >'{}/out' 2>'{}/err' </dev/null", WALCUT_BIN, args, io.path, io.path);
  const int st = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = Slurp(io.path + "/out");
  r.err = Slurp(io.path + "/err");
  return r;
}

// Every JUnit report a test produces goes through this: tests/junit_check.py
// (the rules of the common junit-10.xsd, well-formed XML 1.0, counts that
// add up) must accept it.
inline void RequireValidJunit(const std::string& xml) {
  TempDir t;
  Spit(t.path + "/report.xml", xml);
  const std::string cmd = fmt::format("python3 '{}/tests/junit_check.py' '{}/report.xml' >'{}/out' 2>&1",
                                      WALCUT_SOURCE_DIR, t.path, t.path);
  const int st = std::system(cmd.c_str());
  INFO("tests/junit_check.py: " << Slurp(t.path + "/out") << "report:\n" << xml);
  REQUIRE(WIFEXITED(st));
  REQUIRE(WEXITSTATUS(st) == 0);
}

inline std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string l; std::getline(ss, l);) v.push_back(l);
  return v;
}

// Compares `got` with the golden file at `path`, naming the first line that
// differs; under WALCUT_UPDATE_GOLDEN=1 rewrites the file instead.
inline void CompareGolden(const std::string& path, const std::string& got) {
  const char* update = std::getenv("WALCUT_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    Spit(path, got);
    return;
  }
  INFO("golden file " << path << " (WALCUT_UPDATE_GOLDEN=1 rewrites it)");
  REQUIRE(std::filesystem::exists(path));
  const std::string want = Slurp(path);
  if (want != got) {
    const auto a = Lines(want), b = Lines(got);
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      const std::string wa = i < a.size() ? a[i] : "<end>";
      const std::string gb = i < b.size() ? b[i] : "<end>";
      if (wa != gb) {
        INFO("first difference at line " << i + 1 << "\n  want: " << wa << "\n  got:  " << gb);
        CHECK(want == got);
        return;
      }
    }
  }
  CHECK(want == got);
}

// Decompressed bytes of an archived segment, read with walfmt's own decoder.
inline std::string Decompress(const std::string& path) {
  auto src = walfmt::OpenSegmentSource(path, true);
  REQUIRE(src.ok());
  std::string out;
  for (uint64_t at = 0;;) {
    const uint8_t* p = nullptr;
    size_t got = 0;
    REQUIRE((*src)->Get(at, 4096, p, got).ok());
    if (got == 0) break;
    out.append(reinterpret_cast<const char*>(p), got);
    at += got;
    (*src)->Release(at);
  }
  return out;
}

// Writes a cluster: `nodes` nodes, each `txs` transactions (TX_DATA + TX_PREPARE
// + TX_COMMIT, every 10th rolled back), a cut every 40 transactions; small
// segments so there are several. Archived segments compressed when asked.
inline void MakeCluster(const std::string& dir, uint32_t nodes, int txs, bool compress = false,
                        uint64_t segment_bytes = 8192) {
  using namespace walfmt;
  for (uint32_t n = 0; n < nodes; ++n) {
    WriterOptions o;
    o.wal_dir = fmt::format("{}/node-{}/wal", dir, n);
    o.node_id = n;
    o.cluster_id = 0xC0FFEE;
    o.segment_bytes = segment_bytes;
    o.archive_compressed = compress;
    auto w = WalWriter::Create(o);
    if (!w.ok()) std::abort();
    auto must = [](const Result<Lsn>& r) {
      if (!r.ok()) std::abort();
    };
    must((*w)->Append(NodeStart{0, 0}));
    uint64_t cut = 0;
    for (int i = 1; i <= txs; ++i) {
      const TxId tx{static_cast<uint32_t>(i % nodes), static_cast<uint64_t>(i)};
      std::vector<uint32_t> parts;
      for (uint32_t p = 0; p < nodes; ++p) parts.push_back(p);
      must((*w)->Append(TxData{tx, {{WriteOp::kPut, fmt::format("key-{:04}", i), fmt::format("value-{}", i * 7)}}}));
      must((*w)->Append(TxPrepare{tx, static_cast<uint64_t>(i) * 10, parts}));
      if (i % 10 == 0) {
        must((*w)->Append(TxRollback{tx, static_cast<uint64_t>(i) * 10 + 5, 0, parts}));
      } else {
        must((*w)->Append(TxCommit{tx, cut, static_cast<uint64_t>(i) * 10 + 5, 0, parts}));
      }
      if (i % 40 == 0) {
        ++cut;
        must((*w)->Append(CutStart{cut, static_cast<uint64_t>(i) * 10 + 6}));
        must((*w)->Append(CutFinish{cut, static_cast<uint64_t>(i) * 10 + 7, {}, {}}));
      }
    }
    if (!(*w)->Close().ok()) std::abort();
  }
}

}  // namespace walcut::test

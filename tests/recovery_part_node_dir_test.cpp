// What the per-node restore decides before and after RestorePart
// (recovery/part_node_dir.h), one decision at a time: where node I's WAL is
// and which node it is (ResolveNodeDir, NodeOutOfRange), the verdict of
// --verdict FILE and its cut (ReadPartVerdict), and how a restored part
// comes out (PartOutcome). End-to-end runs are in cli_restore_node_test.cpp.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "recovery/part_node_dir.h"
#include "recovery/verdict.h"
#include "scratch_dir.h"

namespace fs = std::filesystem;
using walcut::recovery::NodeOutOfRange;
using walcut::recovery::PartOutcome;
using walcut::recovery::ReadPartVerdict;
using walcut::recovery::ResolveNodeDir;
using walcut::recovery::RestoreResult;
using walcut::recovery::Verdict;
using walcut::recovery::VerdictNode;
using walfmt::ErrorCode;
using walfmt::Outcome;

namespace {

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void WriteText(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

// A cluster directory with the samples' cluster.json (3 nodes) and node-1/wal.
fs::path MakeCluster(const fs::path& root) {
  fs::create_directories(root / "node-1" / "wal");
  fs::copy_file(fs::path(WALCUT_SOURCE_DIR) / "samples" / "healthy" / "cluster.json", root / "cluster.json");
  return root;
}

// A verdict of cut `cut` over `nodes` nodes from genesis, as a file.
std::string WriteVerdictFile(const fs::path& p, uint64_t cut, uint32_t nodes) {
  Verdict v;
  v.cut = cut;
  v.base_name = "genesis";
  for (uint32_t i = 0; i < nodes; ++i) {
    VerdictNode n;
    n.node = i;
    v.nodes.push_back(n);
  }
  WriteText(p, walcut::recovery::VerdictToJson(v));
  return p.string();
}

}  // namespace

TEST_CASE("ResolveNodeDir: NODE_DIR or its WAL directory, the node id from --node or from the name") {
  walcut::test::ScratchDir d("nodedir");
  const fs::path c = MakeCluster(d.path / "c");

  SECTION("a node directory: its wal/ inside, the id from the name node-<i>") {
    auto t = ResolveNodeDir((c / "node-1").string(), -1);
    REQUIRE(t.ok());
    CHECK(t->wal_dir == (c / "node-1" / "wal").string());
    CHECK(t->node_dir == (c / "node-1").string());
    CHECK(t->node == 1);
  }
  SECTION("the WAL directory itself: the node directory is its parent") {
    auto t = ResolveNodeDir((c / "node-1" / "wal").string(), -1);
    REQUIRE(t.ok());
    CHECK(t->wal_dir == (c / "node-1" / "wal").string());
    CHECK(t->node_dir == (c / "node-1").string());
    CHECK(t->node == 1);
  }
  SECTION("--node wins over the name, when it is a node of the cluster") {
    auto t = ResolveNodeDir((c / "node-1").string(), 2);
    REQUIRE(t.ok());
    CHECK(t->node == 2);
  }
  SECTION("a path that is not a directory is a usage error naming it") {
    for (const fs::path& p : {c / "node-7", c / "cluster.json"}) {
      auto t = ResolveNodeDir(p.string(), 1);
      REQUIRE_FALSE(t.ok());
      CHECK(t.status().code() == ErrorCode::kInvalidArgument);
      CHECK(t.status().message() == p.string() + ": no such directory");
    }
  }
  SECTION("--node beyond the cluster.json beside NODE_DIR is refused, naming the range") {
    auto t = ResolveNodeDir((c / "node-1").string(), 3);
    REQUIRE_FALSE(t.ok());
    CHECK(t.status().code() == ErrorCode::kInvalidArgument);
    CHECK(Contains(t.status().message(), "--node 3: no such node"));
    CHECK(Contains(t.status().message(), "has nodes 0..2"));
  }
  SECTION("a directory whose name says no node needs --node") {
    fs::create_directories(d.path / "host" / "wal");
    auto t = ResolveNodeDir((d.path / "host").string(), -1);
    REQUIRE_FALSE(t.ok());
    CHECK(t.status().code() == ErrorCode::kInvalidArgument);
    CHECK(Contains(t.status().message(), "cannot tell the node id from the path; give --node"));
    auto given = ResolveNodeDir((d.path / "host").string(), 5);  // no cluster.json beside it: any id
    REQUIRE(given.ok());
    CHECK(given->node == 5);
  }
}

TEST_CASE("NodeOutOfRange: a negative id, or one the cluster.json beside NODE_DIR does not have") {
  walcut::test::ScratchDir d("nodedir-range");
  const fs::path c = MakeCluster(d.path / "c");
  const std::string nd = (c / "node-1").string();
  CHECK(NodeOutOfRange(-1, nd) == "--node -1: a node id is 0 or more");
  CHECK(NodeOutOfRange(0, nd).empty());
  CHECK(NodeOutOfRange(2, nd).empty());
  CHECK(NodeOutOfRange(3, nd) == fmt::format("--node 3: no such node; the cluster {} has nodes 0..2", c.string()));
  // No cluster.json, or one that does not read: nothing to check against.
  fs::create_directories(d.path / "bare" / "node-1");
  CHECK(NodeOutOfRange(9, (d.path / "bare" / "node-1").string()).empty());
  WriteText(d.path / "bare" / "cluster.json", "{ not json");
  CHECK(NodeOutOfRange(9, (d.path / "bare" / "node-1").string()).empty());
}

TEST_CASE("ReadPartVerdict: the verdict of --verdict FILE, for the cut asked") {
  walcut::test::ScratchDir d("nodedir-verdict");
  fs::create_directories(d.path);
  const std::string path = WriteVerdictFile(d.path / "v.json", 6, 3);

  SECTION("any cut when none is asked, and the cut asked when it is the verdict's") {
    for (uint64_t cut : {uint64_t{0}, uint64_t{6}}) {
      auto v = ReadPartVerdict(path, cut);
      REQUIRE(v.ok());
      CHECK(v->cut == 6);
      CHECK(v->nodes.size() == 3);
    }
  }
  SECTION("a verdict for another cut is a usage error naming both cuts") {
    auto v = ReadPartVerdict(path, 5);
    REQUIRE_FALSE(v.ok());
    CHECK(v.status().code() == ErrorCode::kInvalidArgument);
    CHECK(v.status().message() == path + ": the verdict is for cut 6, not cut 5");
  }
  SECTION("a file that is not there or not a verdict is a usage error, not a finding") {
    WriteText(d.path / "bad.json", "{\"schema\": \"walcut.verdict/1\"}");
    WriteText(d.path / "tampered.json", [&] {
      std::ifstream f(path);
      std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      s.replace(s.find("\"cut\": 6"), 8, "\"cut\": 7");  // the id no longer matches
      return s;
    }());
    for (const char* name : {"missing.json", "bad.json", "tampered.json"}) {
      auto v = ReadPartVerdict((d.path / name).string(), 0);
      REQUIRE_FALSE(v.ok());
      INFO(v.status().message());
      CHECK(v.status().code() == ErrorCode::kInvalidArgument);
      CHECK(Contains(v.status().message(), (d.path / name).string()));
    }
  }
  SECTION("a verdict that cannot be read is I/O") {
    fs::create_directories(d.path / "dir.json");
    auto v = ReadPartVerdict((d.path / "dir.json").string(), 0);
    REQUIRE_FALSE(v.ok());
    CHECK(v.status().code() == ErrorCode::kIo);
  }
}

TEST_CASE("PartOutcome: a part restored from a cut that is not consistent (--force) is a finding") {
  RestoreResult r;
  r.status = walcut::cut::CutStatus::kConsistent;
  CHECK(PartOutcome(r) == Outcome::kOk);
  for (auto s : {walcut::cut::CutStatus::kInconsistent, walcut::cut::CutStatus::kIncomplete}) {
    r.status = s;
    CHECK(PartOutcome(r) == Outcome::kFindings);
  }
}

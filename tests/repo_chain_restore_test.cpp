// The chain restore of a full artifact alone: every file is copied and checked
// against the manifest, its size and its checksum; a file of the right size
// with one byte changed is refused like a file of another size, naming the
// file, and OUT is not made.
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "recovery_support.h"
#include "repo/repository.h"

namespace walcut::repo {
namespace {
namespace fs = std::filesystem;
using recovery::testing::ReadAll;
using recovery::testing::TempDir;
using recovery::testing::WriteAll;

// A repository holding one full artifact "f-s" of two nodes, written by
// hand: the chain restore copies its files and checks them, nothing more.
std::string FullArtifactRepo(const std::string& parent) {
  const std::string repo = parent + "/repo";
  REQUIRE(InitRepository(repo).ok());
  Manifest m;
  m.name = "f-s";
  m.type = "full";
  m.source = "runtime-snapshot";
  m.seq = 1;
  m.snapshot = "s";
  m.verdict = "snapshot";
  fs::create_directories(repo + "/f-s");
  for (uint32_t i = 0; i < 2; ++i) {
    const std::string rel = "node-" + std::to_string(i) + ".snap";
    const std::string data(4096 + i, static_cast<char>('a' + i));
    WriteAll(repo + "/f-s/" + rel, data);
    ArtifactNode n;
    n.node = i;
    n.snap_file = rel;
    n.fingerprint = 100 + i;
    m.nodes.push_back(n);
    m.files.push_back({rel, data.size(), Xxh3Hex(data)});
  }
  WriteAll(repo + "/f-s/manifest.json", EncodeManifest(m));
  return repo;
}

walfmt::Result<RepoRestoreResult> RestoreTo(const std::string& repo, const std::string& out) {
  RepoRestoreRequest rq;
  rq.repo = repo;
  rq.name = "f-s";
  rq.out = out;
  return RestoreFromRepository(rq);
}

}  // namespace

TEST_CASE("repo: restoring a full artifact refuses a node file with one byte flipped (same size), naming it",
          "[repo]") {
  TempDir t("repo-full-flip");
  const std::string repo = FullArtifactRepo(t.str());
  auto good = RestoreTo(repo, t.str() + "/good");
  INFO(good.status().message());
  REQUIRE(good.ok());
  CHECK(good->fingerprints == std::vector<uint64_t>{100, 101});
  CHECK(ReadAll(t.str() + "/good/node-1.snap") == ReadAll(repo + "/f-s/node-1.snap"));

  const std::string file = repo + "/f-s/node-1.snap";
  std::string bytes = ReadAll(file);
  bytes[bytes.size() / 2] ^= 0x01;  // the size stays what the manifest says
  WriteAll(file, bytes);
  auto r = RestoreTo(repo, t.str() + "/out");
  REQUIRE_FALSE(r.ok());
  INFO(r.status().message());
  CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
  CHECK(r.status().message().rfind(repo + "/f-s/node-1.snap: xxh3-128 ", 0) == 0);
  CHECK_FALSE(fs::exists(t.str() + "/out"));
}

TEST_CASE("repo: restoring a full artifact refuses a node file of another size, naming it", "[repo]") {
  TempDir t("repo-full-size");
  const std::string repo = FullArtifactRepo(t.str());
  const std::string file = repo + "/f-s/node-0.snap";
  WriteAll(file, ReadAll(file) + "a");  // one byte more, the same byte as the others
  auto r = RestoreTo(repo, t.str() + "/out");
  REQUIRE_FALSE(r.ok());
  INFO(r.status().message());
  CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
  CHECK(r.status().message().rfind(repo + "/f-s/node-0.snap: xxh3-128 ", 0) == 0);
  CHECK_FALSE(fs::exists(t.str() + "/out"));
}

}  // namespace walcut::repo

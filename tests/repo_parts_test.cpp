// Increments made where the WAL lives (repo/parts.h, repo/REPOSITORY.md
// "Increments from parts"), end to end through the walcut binary: each
// node's WAL moved into a tree of its own, scanned there, the verdict of the
// cut made from the summaries, every node's part uploaded from its own tree
// (concurrently for some seeds), assembled; the artifact equals the
// single-host increment of the same cut byte for byte, and restores to the
// same node files; on a directory and on an S3 server. Then the refusals.
// An encrypted repository: repo_parts_crypt_test.cpp.
#include <sys/wait.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "repo_parts_support.h"

namespace fs = std::filesystem;
using nlohmann::json;
using walcut::test::Run;
using walcut::test::Slurp;
using walcut::test::Spit;
using walcut::test::TempDir;
using walcut::test::Walcut;
using namespace walcut::test::parts;

TEST_CASE("repo parts: per-node parts assembled equal the single-host increment, and restore alike", "[repo][parts]") {
  for (uint64_t seed : {3, 8, 13, 21}) {
    INFO("seed " << seed);
    TempDir t;
    const std::string c = MakeCluster(t.path, seed);
    const std::string r1 = t.path + "/r1", r2 = t.path + "/r2";
    const auto [parent, k] = TwoRepos(c, r1, r2, seed % 2 == 1);
    INFO("parent " << parent << ", cut " << k);
    Verdict(t.path, c, k, t.path + "/v.json");
    UploadParts(t.path, r2, t.path + "/v.json", seed % 3 != 0);
    Run r = Must(fmt::format("snapshot list '{}' --format json", r2));
    CHECK(json::parse(r.out)["pending_parts"].size() == 3);
    r = Must(fmt::format("snapshot create --repo '{}' --incremental --assemble --verdict '{}/v.json'", r2, t.path));
    CHECK(r.out.find(fmt::format("chain: f-full-300 <- ")) != std::string::npos);
    const std::string name = fmt::format("i-cut-{}", k);
    RequireSameFiles(r1 + "/" + name, r2 + "/" + name);
    CHECK(!fs::exists(r2 + "/.parts"));
    Must(fmt::format("snapshot check '{}' --restore", r2));
    Must(fmt::format("restore --repo '{}' {} --out '{}/o1'", r1, name, t.path));
    Must(fmt::format("restore --repo '{}' {} --out '{}/o2'", r2, name, t.path));
    RequireSameNodes(t.path + "/o1", t.path + "/o2");
    r = Must(fmt::format("snapshot list '{}' --format json", r2));
    CHECK(json::parse(r.out)["pending_parts"].empty());
    Must(fmt::format("snapshot expire '{}' --keep-full 1", r2));
  }
}

TEST_CASE("repo parts: on an S3 server, parts uploaded at once and assembled equal the single-host increment",
          "[repo][parts][s3]") {
  for (uint64_t seed : {5, 6}) {
    INFO("seed " << seed);
    TempDir t;
    const std::string bucket = "walcut-parts";
    auto store = StartStore(bucket);
    const std::string c = MakeCluster(t.path, seed);
    const std::string r1 = t.path + "/r1";
    const std::string s3 = fmt::format("s3://{}/repo{}", bucket, seed);
    const std::string e = store->Env() + " '" + WALCUT_BIN + "'";
    Must(fmt::format("snapshot create '{}' --repo '{}' --full --from full-300", c, r1));
    auto sh = [&](const std::string& args, int code = 0) {
      const std::string cmd = fmt::format("{} {} >'{}/sh.out' 2>&1 </dev/null", e, args, t.path);
      const int st = std::system(cmd.c_str());
      INFO(cmd << "\n" << Slurp(t.path + "/sh.out"));
      REQUIRE(WIFEXITED(st));
      REQUIRE(WEXITSTATUS(st) == code);
      return Slurp(t.path + "/sh.out");
    };
    sh(fmt::format("snapshot create '{}' --repo '{}' --full --from full-300", c, s3));
    const Run r = Must(fmt::format("snapshot create '{}' --repo '{}' --incremental --latest --format json", c, r1));
    const uint64_t k = json::parse(r.out)["cut"].get<uint64_t>();
    Verdict(t.path, c, k, t.path + "/v.json");
    // Every node's part at once, each from its own tree.
    Spit(t.path + "/up.sh",
         fmt::format("ls -d '{0}'/hosts/host-*/node-* | xargs -P 3 -I{{}} {1} snapshot create {{}} --repo '{2}' "
                     "--incremental --verdict '{0}/v.json'\n",
                     t.path, e, s3));
    {
      const std::string cmd = fmt::format("sh '{0}/up.sh' >'{0}/up.out' 2>&1 </dev/null", t.path);
      const int st = std::system(cmd.c_str());
      INFO(cmd << "\n" << Slurp(t.path + "/up.out"));
      REQUIRE(WIFEXITED(st));
      REQUIRE(WEXITSTATUS(st) == 0);
    }
    CHECK(sh(fmt::format("snapshot list '{}'", s3)).find("pending part") != std::string::npos);
    sh(fmt::format("snapshot expire '{}' --keep-full 1", s3));  // leaves the parts alone
    sh(fmt::format("snapshot create --repo '{}' --incremental --assemble --verdict '{}/v.json'", s3, t.path));
    const std::string name = fmt::format("i-cut-{}", k);
    // The objects of the artifact: the single-host increment's files, byte for byte.
    size_t files = 0;
    for (const auto& entry : fs::recursive_directory_iterator(r1 + "/" + name)) {
      if (!entry.is_regular_file()) continue;
      const std::string rel = fs::relative(entry.path(), r1 + "/" + name).string();
      auto got = store->client->GetObject(bucket, fmt::format("repo{}/{}/{}", seed, name, rel));
      INFO(rel);
      REQUIRE(got.ok());
      CHECK(*got == Slurp(entry.path().string()));
      ++files;
    }
    CHECK(files > 3);
    auto left = store->client->ListObjects(bucket, fmt::format("repo{}/.parts/", seed));
    REQUIRE(left.ok());
    CHECK(left->objects.empty());
    sh(fmt::format("snapshot check '{}' --restore", s3));
    Must(fmt::format("restore --repo '{}' {} --out '{}/o1'", r1, name, t.path));
    sh(fmt::format("restore --repo '{}' {} --out '{}/o2'", s3, name, t.path));
    RequireSameNodes(t.path + "/o1", t.path + "/o2");
  }
}

TEST_CASE("repo parts: the flow of docs/scale-out.md (xargs -P) as written", "[repo][parts]") {
  const uint64_t seed = 9;
  INFO("seed " << seed);
  TempDir t;
  const std::string c = MakeCluster(t.path, seed);
  const std::string r1 = t.path + "/r1", r2 = t.path + "/r2";
  const auto [parent, k] = TwoRepos(c, r1, r2, false);
  RunDocFlow(t.path, c, k, r2);
  RequireSameFiles(fmt::format("{}/i-cut-{}", r1, k), fmt::format("{}/i-cut-{}", r2, k));
}

TEST_CASE("repo parts: refusals (missing, twice, another verdict, a changed byte, the wrong node, a late parent)",
          "[repo][parts]") {
  const uint64_t seed = 4;
  INFO("seed " << seed);
  TempDir t;
  const std::string c = MakeCluster(t.path, seed);
  const std::string r1 = t.path + "/r1", r2 = t.path + "/r2";
  const auto [parent, k] = TwoRepos(c, r1, r2, false);
  const std::string v = t.path + "/v.json";
  Verdict(t.path, c, k, v);
  const std::string assemble =
      fmt::format("snapshot create --repo '{}' --incremental --assemble --verdict '{}'", r2, v);
  const std::string parts = fmt::format("{}/.parts/i-cut-{}", r2, k);

  // NODE_DIR is not node I: refused before anything is written.
  Run r = Must(
      fmt::format("snapshot create '{}' --node 1 --repo '{}' --incremental --verdict '{}'", NodeDir(t.path, 0), r2, v),
      2);
  CHECK(r.err.find("holds node 0's WAL") != std::string::npos);
  CHECK(!fs::exists(parts));

  // A part missing.
  Must(fmt::format("snapshot create '{}' --repo '{}' --incremental --verdict '{}'", NodeDir(t.path, 0), r2, v));
  Must(fmt::format("snapshot create '{}' --repo '{}' --incremental --verdict '{}'", NodeDir(t.path, 1), r2, v));
  r = Must(assemble, 2);
  CHECK(r.err.find("no complete part of node(s) 2") != std::string::npos);

  // Uploaded twice: refused at the upload; two of one node (two hosts at
  // once) refused by the assembly.
  r = Must(fmt::format("snapshot create '{}' --repo '{}' --incremental --verdict '{}'", NodeDir(t.path, 1), r2, v), 2);
  CHECK(r.err.find("already there") != std::string::npos);
  Must(fmt::format("snapshot create '{}' --repo '{}' --incremental --verdict '{}'", NodeDir(t.path, 2), r2, v));
  std::string node1;
  for (const auto& e : fs::directory_iterator(parts)) {
    if (e.path().filename().string().rfind("node-1.", 0) == 0) node1 = e.path().string();
  }
  REQUIRE(!node1.empty());
  fs::copy(node1, parts + "/node-1.twice", fs::copy_options::recursive);
  r = Must(assemble, 2);
  CHECK(r.err.find("node 1's part is there twice") != std::string::npos);
  fs::remove_all(parts + "/node-1.twice");

  // A part of another verdict (the same cut from another base) under the same artifact.
  Verdict(t.path, c, k, t.path + "/v-genesis.json", "genesis");
  fs::rename(node1, t.path + "/node1.kept");
  Must(fmt::format("snapshot create '{}' --repo '{}' --incremental --verdict '{}/v-genesis.json'", NodeDir(t.path, 1),
                   r2, t.path));
  r = Must(assemble, 2);
  CHECK(r.err.find("does not belong") != std::string::npos);
  CHECK(r.err.find("verdict") != std::string::npos);
  for (const auto& e : fs::directory_iterator(parts)) {
    if (e.path().filename().string().rfind("node-1.", 0) == 0) fs::remove_all(e.path());
  }
  fs::rename(t.path + "/node1.kept", node1);

  // A changed byte in a part: exit 1, and nothing published.
  std::string seg;
  for (const auto& e : fs::recursive_directory_iterator(node1)) {
    if (e.path().extension() == ".zst") seg = e.path().string();
  }
  REQUIRE(!seg.empty());
  std::string bytes = Slurp(seg);
  bytes[bytes.size() / 2] ^= 0x20;
  Spit(seg, bytes);
  r = Must(assemble, 1);
  CHECK(r.err.find("its part's manifest says") != std::string::npos);
  CHECK(!fs::exists(fmt::format("{}/i-cut-{}", r2, k)));
  bytes[bytes.size() / 2] ^= 0x20;
  Spit(seg, bytes);

  // A parent that is not before the cut.
  r = Must(fmt::format("snapshot create '{}' --repo '{}' --incremental --verdict '{}' --parent i-cut-{} --name late",
                       NodeDir(t.path, 0), r1, v, k),
           2);
  CHECK(r.err.find("does not come after the parent") != std::string::npos);

  // Put right: assembled, equal to the single-host increment.
  Must(assemble);
  RequireSameFiles(fmt::format("{}/i-cut-{}", r1, k), fmt::format("{}/i-cut-{}", r2, k));
}

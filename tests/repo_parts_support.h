// What the suites of increments made of parts (repo_parts_test.cpp,
// repo_parts_crypt_test.cpp) share: a cluster whose nodes each live in a
// host tree of their own, the verdict of a cut, every node's part uploaded,
// two repositories alike up to the parent, file and restore comparisons, and
// an S3 server (moto_server, else tests/s3_server.py).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "repo/s3_client.h"
#include "repo/s3_config.h"
#include "s3_moto_server.h"
#include "s3_test_server.h"

namespace walcut::test::parts {

inline constexpr const char* kKey = "AKIDWALCUTTEST";  // tests/s3_server.py's key pair (moto takes any)
inline constexpr const char* kSecret = "walcut-test-secret";

// `env ENV walcut ARGS` (ARGS shell text; ENV "" for none).
inline Run WalcutEnv(const std::string& env, const std::string& args) {
  if (env.empty()) return Walcut(args);
  TempDir io;
  const std::string cmd =
      fmt::format("env {} '{}' {} >'{}/out' 2>'{}/err' </dev/null", env, WALCUT_BIN, args, io.path, io.path);
  const int st = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = Slurp(io.path + "/out");
  r.err = Slurp(io.path + "/err");
  return r;
}

inline Run Must(const std::string& args, int code = 0, const std::string& env = "") {
  const Run r = WalcutEnv(env, args);
  INFO("walcut " << args << "\n" << r.out << r.err);
  REQUIRE(r.code == code);
  return r;
}

// A cluster of `seed` (3 nodes, small segments, a runtime full snapshot
// full-300) in DIR/cluster, each node copied into DIR/hosts/host-<i>/node-<i>
// (nothing else of the cluster there).
inline std::string MakeCluster(const std::string& dir, uint64_t seed) {
  namespace fs = std::filesystem;
  const std::string c = dir + "/cluster";
  Must(
      fmt::format("run '{}' --nodes 3 --backups 1 --txs 1200 --cuts 6 --full-snapshot-at 300 --seed {} "
                  "--segment-size 64KiB --epoch 2026-11-30T12:00:00Z",
                  c, seed));
  for (int i = 0; i < 3; ++i) {
    const fs::path host = fs::path(dir) / "hosts" / fmt::format("host-{}", i);
    fs::create_directories(host);
    fs::copy(fs::path(c) / fmt::format("node-{}", i), host / fmt::format("node-{}", i), fs::copy_options::recursive);
  }
  return c;
}

// Every node scanned on its host; the verdict of cut K (base: `base`, or chosen) into `out`.
inline void Verdict(const std::string& dir, const std::string& c, uint64_t k, const std::string& out,
                    const std::string& base = "") {
  std::string sums;
  for (int i = 0; i < 3; ++i) {
    const std::string s = fmt::format("{}/s{}.json", dir, i);
    if (!std::filesystem::exists(s)) Must(fmt::format("scan '{}/hosts/host-{}/node-{}' --out '{}'", dir, i, i, s));
    sums += " '" + s + "'";
  }
  Must(fmt::format("cuts{} --cluster-json '{}/cluster.json' --verdict-out '{}' --cut {}{}", sums, c, out, k,
                   base.empty() ? "" : " --base " + base));
}

inline std::string NodeDir(const std::string& dir, int i) { return fmt::format("{}/hosts/host-{}/node-{}", dir, i, i); }

// Every node's part uploaded: one after the other, or all at once (xargs
// -P); `extra` appended to each command, which runs under `env ENV`.
inline void UploadParts(const std::string& dir, const std::string& repo, const std::string& verdict, bool concurrent,
                        const std::string& extra = "", const std::string& env = "") {
  if (!concurrent) {
    for (int i = 0; i < 3; ++i) {
      Must(fmt::format("snapshot create '{}' --repo '{}' --incremental --verdict '{}'{}", NodeDir(dir, i), repo,
                       verdict, extra),
           0, env);
    }
    return;
  }
  const std::string cmd = fmt::format(
      "ls -d '{}'/hosts/host-*/node-* | env {} xargs -P 3 -I{{}} '{}' snapshot create {{}} --repo '{}' --incremental "
      "--verdict '{}'{} >'{}/xargs.out' 2>&1",
      dir, env, WALCUT_BIN, repo, verdict, extra, dir);
  const int st = std::system(cmd.c_str());
  INFO(cmd << "\n" << Slurp(dir + "/xargs.out"));
  REQUIRE(WIFEXITED(st));
  REQUIRE(WEXITSTATUS(st) == 0);
}

inline void RequireSameFiles(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(a)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), a).string();
    INFO(rel);
    REQUIRE(fs::exists(b + "/" + rel));
    CHECK(Slurp(e.path().string()) == Slurp(b + "/" + rel));
    ++files;
  }
  size_t other = 0;
  for (const auto& e : fs::recursive_directory_iterator(b)) other += e.is_regular_file();
  CHECK(files == other);
  CHECK(files > 0);
}

// Node files of two restores: the same bytes.
inline void RequireSameNodes(const std::string& a, const std::string& b) {
  for (int i = 0; i < 3; ++i) {
    const std::string f = fmt::format("node-{}.snap", i);
    INFO(f);
    REQUIRE(std::filesystem::exists(a + "/" + f));
    CHECK(Slurp(a + "/" + f) == Slurp(b + "/" + f));
  }
}

// The single-host repository R1 and the one of parts R2, alike up to the
// parent: the full of full-300, and for `chained` an increment of the first
// consistent cut J (`extra` appended to each create). Returns {parent, K}: K
// the latest consistent cut, made an increment of in R1 alone.
inline std::pair<std::string, uint64_t> TwoRepos(const std::string& c, const std::string& r1, const std::string& r2,
                                                 bool chained, const std::string& extra = "") {
  for (const auto& r : {r1, r2}) {
    Must(fmt::format("snapshot create '{}' --repo '{}' --full --from full-300{}", c, r, extra));
  }
  std::string parent = "f-full-300";
  if (chained) {
    for (uint64_t j = 1; j < 7 && parent == "f-full-300"; ++j) {
      if (Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --cut {}{}", c, r1, j, extra)).code != 0)
        continue;
      Must(fmt::format("snapshot create '{}' --repo '{}' --incremental --cut {}{}", c, r2, j, extra));
      parent = fmt::format("i-cut-{}", j);
    }
    REQUIRE(parent != "f-full-300");
  }
  const Run r =
      Must(fmt::format("snapshot create '{}' --repo '{}' --incremental --latest --format json{}", c, r1, extra));
  return {parent, nlohmann::json::parse(r.out)["cut"].get<uint64_t>()};
}

// The flow of docs/scale-out.md ("<!-- tested: parts -->") run as written
// for cut K into REPO (KEY: the key file, or "").
inline void RunDocFlow(const std::string& dir, const std::string& c, uint64_t k, const std::string& repo,
                       const std::string& key = "") {
  const std::string doc = Slurp(std::string(WALCUT_SOURCE_DIR) + "/docs/scale-out.md");
  const size_t m = doc.find("<!-- tested: parts -->");
  REQUIRE(m != std::string::npos);
  const size_t open = doc.find("```sh\n", m);
  REQUIRE(open != std::string::npos);
  const size_t close = doc.find("```", open + 6);
  Spit(dir + "/flow.sh", doc.substr(open + 6, close - open - 6));
  std::filesystem::create_directories(dir + "/work");
  const std::string cmd = fmt::format(
      "env WALCUT='{}' HOSTS='{}/hosts' WORK='{}/work' CLUSTER_JSON='{}/cluster.json' CUT={} REPO='{}'{} "
      "sh '{}/flow.sh' >'{}/flow.out' 2>&1 </dev/null",
      WALCUT_BIN, dir, dir, c, k, repo, key.empty() ? "" : fmt::format(" KEY='{}'", key), dir, dir);
  const int st = std::system(cmd.c_str());
  INFO(Slurp(dir + "/flow.out"));
  REQUIRE(WIFEXITED(st));
  REQUIRE(WEXITSTATUS(st) == 0);
}

struct Store {
  std::unique_ptr<MotoServer> moto;
  std::unique_ptr<S3TestServer> py;
  std::string endpoint;
  std::unique_ptr<repo::S3Client> client;
  // What `env` takes to reach the store (WalcutEnv's ENV).
  std::string Vars() const {
    return fmt::format(
        "-u AWS_SESSION_TOKEN -u AWS_PROFILE -u AWS_ENDPOINT_URL_S3 AWS_ACCESS_KEY_ID={} AWS_SECRET_ACCESS_KEY={} "
        "AWS_REGION=us-east-1 AWS_ENDPOINT_URL={}",
        kKey, kSecret, endpoint);
  }
  std::string Env() const { return "env " + Vars(); }
};

// moto_server when installed, else tests/s3_server.py (said which).
inline std::unique_ptr<Store> StartStore(const std::string& bucket) {
  auto s = std::make_unique<Store>();
  const std::string moto = FindMotoServer();
  if (!moto.empty()) {
    s->moto = std::make_unique<MotoServer>(moto);
    if (!s->moto->error.empty()) FAIL(s->moto->error);
    s->endpoint = s->moto->endpoint();
  } else {
    if (!HavePython3()) FAIL("these tests need python3 (tests/s3_server.py) or moto_server");
    s->py = std::make_unique<S3TestServer>(std::vector<std::string>{"--bucket", bucket, "--max-seconds", "300"});
    if (!s->py->error.empty()) FAIL(s->py->error);
    s->endpoint = s->py->endpoint();
  }
  WARN("S3 server: " << (moto.empty() ? "tests/s3_server.py" : moto) << " at " << s->endpoint);
  const std::map<std::string, std::string> env = {
      {"AWS_ACCESS_KEY_ID", kKey}, {"AWS_SECRET_ACCESS_KEY", kSecret}, {"AWS_ENDPOINT_URL", s->endpoint}};
  auto config = repo::ResolveS3Config({}, [env](const std::string& n) -> std::optional<std::string> {
    auto it = env.find(n);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
  REQUIRE(config.ok());
  auto client = repo::S3Client::Create(std::move(config.value()));
  REQUIRE(client.ok());
  s->client = std::move(client.value());
  if (s->moto) REQUIRE(s->client->CreateBucket(bucket).ok());
  return s;
}

}  // namespace walcut::test::parts

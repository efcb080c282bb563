// The repository on S3 end to end through the walcut binary (--repo
// s3://BUCKET/PREFIX): create, list, check, expire and restore against a real
// S3-compatible server on the loopback, compared with the same commands on a
// local directory; interrupted creates, changed bytes, the writer lock (local
// and S3), refused schemes, and multipart transfers.
//
// Servers: the end-to-end tests use moto_server (moto) when it is installed,
// else tests/s3_server.py, and say which one ran; the fault-injection tests
// use tests/s3_server.py. Both need python3: without it they FAIL, saying so.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "repo/s3_client.h"
#include "repo/s3_config.h"
#include "repo/s3_store.h"
#include "s3_moto_server.h"
#include "s3_test_server.h"
#include "scratch_dir.h"
#include "walfmt/staging.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using walcut::repo::S3Client;
using walcut::test::MotoServer;
using walcut::test::S3TestServer;
using walcut::test::ScratchDir;

constexpr const char* kKey = "AKIDWALCUTTEST";  // tests/s3_server.py's key pair (moto takes any)
constexpr const char* kSecret = "walcut-test-secret";

struct Dir {
  ScratchDir d{"s3repo"};
  std::string path = d.path.string();
  Dir() { fs::create_directories(d.path); }
};

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// An S3 server for a test: moto_server (when installed and `e2e`) or tests/s3_server.py.
struct Store {
  std::unique_ptr<MotoServer> moto;
  std::unique_ptr<S3TestServer> py;
  std::string endpoint;
  std::string which;
  std::unique_ptr<S3Client> client;

  // The environment walcut runs with: credentials only (the endpoint goes as --s3-endpoint or AWS_ENDPOINT_URL).
  std::string Env() const {
    return fmt::format(
        "env -u AWS_SESSION_TOKEN -u AWS_PROFILE -u AWS_ENDPOINT_URL_S3 -u AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID={} "
        "AWS_SECRET_ACCESS_KEY={} AWS_REGION=us-east-1",
        kKey, kSecret);
  }
};

std::unique_ptr<Store> StartStore(bool e2e, const std::string& bucket,
                                  const std::vector<std::string>& py_options = {}) {
  auto s = std::make_unique<Store>();
  const std::string moto = e2e ? walcut::test::FindMotoServer() : "";
  if (!moto.empty()) {
    s->moto = std::make_unique<MotoServer>(moto);
    if (!s->moto->error.empty()) FAIL(s->moto->error);
    s->endpoint = s->moto->endpoint();
    s->which = "moto_server (" + moto + ")";
  } else {
    if (!walcut::test::HavePython3()) {
      FAIL("these tests need python3 (tests/s3_server.py) or moto's moto_server (WALCUT_MOTO_SERVER, PATH)");
    }
    std::vector<std::string> opts = {"--bucket", bucket, "--max-seconds", "300"};
    opts.insert(opts.end(), py_options.begin(), py_options.end());
    s->py = std::make_unique<S3TestServer>(opts);
    if (!s->py->error.empty()) FAIL(s->py->error);
    s->endpoint = s->py->endpoint();
    s->which = e2e ? "tests/s3_server.py (moto_server is not installed)" : "tests/s3_server.py";
  }
  WARN("S3 server: " << s->which << " at " << s->endpoint);
  const std::map<std::string, std::string> env = {
      {"AWS_ACCESS_KEY_ID", kKey}, {"AWS_SECRET_ACCESS_KEY", kSecret}, {"AWS_ENDPOINT_URL", s->endpoint}};
  auto config = walcut::repo::ResolveS3Config({}, [env](const std::string& n) -> std::optional<std::string> {
    auto it = env.find(n);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
  REQUIRE(config.ok());
  config->retry = {5, 1, 20, 42};
  auto client = S3Client::Create(std::move(config.value()));
  REQUIRE(client.ok());
  s->client = std::move(client.value());
  if (s->moto) {
    auto st = s->client->CreateBucket(bucket);
    INFO(st.message());
    REQUIRE(st.ok());
  }
  return s;
}

struct Run {
  int code = -1;
  std::string out, err;
};

// `ENV walcut ARGS` (shell text) in `cwd` (when given).
Run Walcut(const std::string& env, const std::string& args, const std::string& cwd = "") {
  Dir io;
  const std::string cmd =
      fmt::format("{}{} '{}' {} >'{}/out' 2>'{}/err' </dev/null", cwd.empty() ? "" : fmt::format("cd '{}' && ", cwd),
                  env, WALCUT_BIN, args, io.path, io.path);
  const int st = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = Slurp(io.path + "/out");
  r.err = Slurp(io.path + "/err");
  return r;
}

std::string MakeRunCluster(const std::string& dir) {
  const std::string c = dir + "/cluster";
  auto r = Walcut("", fmt::format("run '{}' --nodes 3 --backups 1 --txs 2400 --cuts 4 --full-snapshot-at 800 --seed 5 "
                                  "--segment-size 16MiB --epoch 2026-11-30T12:00:00Z",
                                  c));
  INFO(r.err);
  REQUIRE(r.code == 0);
  return c;
}

std::vector<std::string> Keys(const Store& s, const std::string& bucket, const std::string& prefix) {
  auto l = s.client->ListObjects(bucket, prefix);
  REQUIRE(l.ok());
  std::vector<std::string> keys;
  for (const auto& o : l->objects) keys.push_back(o.key);
  return keys;
}

// The artifacts of the run cluster: a full, two increments and a synthetic
// full of the latest cut (rolled up from the chain); returns that cut.
uint64_t CreateFour(const std::string& env, const std::string& c, const std::string& repo, const std::string& extra) {
  auto r = Walcut(env, fmt::format("snapshot create '{}' --repo '{}' {} --full --from full-800", c, repo, extra));
  INFO(repo << ": " << r.out << r.err);
  REQUIRE(r.code == 0);
  r = Walcut(env, fmt::format("snapshot create '{}' --repo '{}' {} --incremental --cut 3", c, repo, extra));
  REQUIRE(r.code == 0);
  r = Walcut(env,
             fmt::format("snapshot create '{}' --repo '{}' {} --incremental --latest --format json", c, repo, extra));
  REQUIRE(r.code == 0);
  const uint64_t latest = json::parse(r.out)["cut"].get<uint64_t>();
  r = Walcut(env, fmt::format("snapshot create --repo '{}' {} --full --cut {}", repo, extra, latest));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  return latest;
}

// `j` without its "dir" members (paths of the machine that wrote it).
json WithoutDirs(json j) {
  if (j.is_object()) {
    j.erase("dir");
    for (auto& [k, v] : j.items()) v = WithoutDirs(v);
  } else if (j.is_array()) {
    for (auto& v : j) v = WithoutDirs(v);
  }
  return j;
}

void RequireSameTree(const std::string& a, const std::string& b) {
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(a)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), a).string();
    INFO(rel);
    if (rel == "manifest.json") {  // the same but for where things were: the repository, each step's base
      CHECK(WithoutDirs(json::parse(Slurp(e.path().string()))) == WithoutDirs(json::parse(Slurp(b + "/" + rel))));
    } else {
      CHECK(Slurp(e.path().string()) == Slurp(b + "/" + rel));
    }
    ++files;
  }
  size_t other = 0;
  for (const auto& e : fs::recursive_directory_iterator(b)) other += e.is_regular_file();
  CHECK(files == other);
  CHECK(files > 0);
}

size_t Entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("repo s3: create, list, check, restore and expire against an S3 server equal a local directory",
          "[repo][s3]") {
  Dir t;
  auto store = StartStore(true, "walcut-e2e");
  const std::string c = MakeRunCluster(t.path);
  const std::string local = t.path + "/repo";
  const std::string url = "s3://walcut-e2e/team/repo";
  const std::string env = store->Env();
  const std::string with_endpoint = env + " AWS_ENDPOINT_URL=" + store->endpoint;
  const uint64_t latest = CreateFour("", c, local, "");
  CHECK(CreateFour(env, c, url, "--s3-endpoint " + store->endpoint) == latest);

  // Same manifests, so the same listing but for where it is.
  auto l = Walcut("", fmt::format("snapshot list '{}' --format json", local));
  auto s = Walcut(with_endpoint, fmt::format("snapshot list {} --format json", url));
  INFO(s.err);
  REQUIRE(s.code == 0);
  const json lj = json::parse(l.out), sj = json::parse(s.out);
  CHECK(sj["repo"] == url);
  for (const char* k : {"artifacts", "restore_targets", "summary", "leftovers"}) CHECK(lj[k] == sj[k]);
  CHECK(sj["artifacts"].size() == 4);
  s = Walcut(with_endpoint, fmt::format("snapshot list {}", url));
  CHECK(s.out.find("repository s3://walcut-e2e/team/repo: 4 artifacts") != std::string::npos);

  s = Walcut(with_endpoint, fmt::format("snapshot check {} --format json", url));
  INFO(s.out << s.err);
  CHECK(s.code == 0);
  l = Walcut("", fmt::format("snapshot check '{}' --format json", local));
  CHECK(json::parse(s.out)["summary"] == json::parse(l.out)["summary"]);
  CHECK(json::parse(s.out)["repo"] == url);
  s = Walcut(with_endpoint, fmt::format("snapshot check {} i-cut-3 --restore", url));
  CHECK(s.code == 0);

  // restore --repo s3://... == restore --repo DIR, byte for byte; nothing left beside OUT.
  fs::create_directories(t.path + "/out");
  s = Walcut(env, fmt::format("restore --repo {} --s3-endpoint {} i-cut-{} --out '{}/out/s3'", url, store->endpoint,
                              latest, t.path));
  INFO(s.out << s.err);
  REQUIRE(s.code == 0);
  l = Walcut("", fmt::format("restore --repo '{}' i-cut-{} --out '{}/out/local'", local, latest, t.path));
  REQUIRE(l.code == 0);
  RequireSameTree(t.path + "/out/local", t.path + "/out/s3");
  CHECK(json::parse(Slurp(t.path + "/out/s3/manifest.json"))["repository"]["dir"] == url);
  CHECK(Entries(t.path + "/out") == 2);
  s = Walcut(with_endpoint, fmt::format("restore --repo {} --latest --dry-run", url));
  CHECK(s.code == 0);

  // Expire plans the same removals and deletes every object of them.
  l = Walcut("", fmt::format("snapshot expire '{}' --keep-full 1 --format json", local));
  s = Walcut(with_endpoint, fmt::format("snapshot expire {} --keep-full 1 --format json", url));
  INFO(s.out << s.err);
  REQUIRE(s.code == 0);
  CHECK(json::parse(s.out)["removed"] == json::parse(l.out)["removed"]);
  CHECK(json::parse(s.out)["removed"].size() == 3);
  const json removed = json::parse(s.out)["removed"];
  for (const auto& name : removed) {
    CHECK(Keys(*store, "walcut-e2e", "team/repo/" + name.get<std::string>() + "/").empty());
  }
  s = Walcut(with_endpoint, fmt::format("snapshot list {} --format json", url));
  CHECK(json::parse(s.out)["artifacts"].size() == 1);
  CHECK(Keys(*store, "walcut-e2e", "team/repo/.walcut-lock").empty());  // released
}

TEST_CASE("repo s3: an interrupted create leaves a leftover that list and check name and expire removes",
          "[repo][s3]") {
  Dir t;
  auto store = StartStore(false, "test", {"--deny-key-suffix", "/manifest.json"});
  const std::string c = MakeRunCluster(t.path);
  const std::string env = store->Env() + " AWS_ENDPOINT_URL=" + store->endpoint;
  const std::string url = "s3://test/r";
  auto r = Walcut(env, fmt::format("snapshot create '{}' --repo {} --full --from full-800", c, url));
  INFO(r.out << r.err);
  CHECK(r.code == 3);
  CHECK(r.err.find("AccessDenied") != std::string::npos);
  CHECK(!Keys(*store, "test", "r/f-full-800/").empty());  // the files went up, the manifest did not
  CHECK(Keys(*store, "test", "r/.walcut-lock").empty());

  r = Walcut(env, fmt::format("snapshot list {} --format json", url));
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["leftovers"] == json::array({"f-full-800/"}));
  CHECK(json::parse(r.out)["artifacts"].empty());
  r = Walcut(env, fmt::format("snapshot list {}", url));
  CHECK(r.out.find("note: f-full-800/: left by an unfinished create or expire") != std::string::npos);
  r = Walcut(env, fmt::format("snapshot check {}", url));
  CHECK(r.code == 0);
  CHECK(r.out.find("NOTE f-full-800/: left by a create or expire that did not finish") != std::string::npos);
  r = Walcut(env, fmt::format("snapshot expire {} --keep-full 1 --dry-run", url));
  CHECK(r.out.find("would remove leftover f-full-800/") != std::string::npos);
  CHECK(!Keys(*store, "test", "r/f-full-800/").empty());
  r = Walcut(env, fmt::format("snapshot expire {} --keep-full 1", url));
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("removed leftover f-full-800/") != std::string::npos);
  CHECK(Keys(*store, "test", "r/f-full-800/").empty());
  r = Walcut(env, fmt::format("snapshot list {} --format json", url));
  CHECK(json::parse(r.out)["leftovers"].empty());
}

TEST_CASE("repo s3: a segment upload refused during an incremental create leaves a leftover, never an artifact",
          "[repo][s3]") {
  Dir t;
  auto store = StartStore(false, "test", {"--deny-key-suffix", ".wal.zst"});
  const std::string c = MakeRunCluster(t.path);
  const std::string env = store->Env() + " AWS_ENDPOINT_URL=" + store->endpoint;
  const std::string url = "s3://test/r";
  REQUIRE(Walcut(env, fmt::format("snapshot create '{}' --repo {} --full --from full-800", c, url)).code == 0);
  // Segments go up while the increment is built: the first refused one stops it.
  auto r = Walcut(env, fmt::format("snapshot create '{}' --repo {} --incremental --cut 3", c, url));
  INFO(r.out << r.err);
  CHECK(r.code == 3);
  CHECK(r.err.find("snapshot create refused: s3://test/r/i-cut-3/node-") != std::string::npos);
  CHECK(r.err.find(".wal.zst: PUT: HTTP 403 AccessDenied") != std::string::npos);
  CHECK(Keys(*store, "test", "r/i-cut-3/manifest.json").empty());
  CHECK(Keys(*store, "test", "r/.walcut-lock").empty());
  r = Walcut(env, fmt::format("snapshot list {} --format json", url));
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["artifacts"].size() == 1);
  r = Walcut(env, fmt::format("snapshot check {}", url));
  CHECK(r.code == 0);
}

TEST_CASE("repo s3: a leftover under the name an incremental create takes is removed before its segments go up",
          "[repo][s3]") {
  Dir t;
  auto store = StartStore(false, "test");
  const std::string c = MakeRunCluster(t.path);
  const std::string env = store->Env() + " AWS_ENDPOINT_URL=" + store->endpoint;
  const std::string url = "s3://test/r";
  REQUIRE(Walcut(env, fmt::format("snapshot create '{}' --repo {} --full --from full-800", c, url)).code == 0);
  REQUIRE(store->client->PutObject("test", "r/i-cut-3/node-0/wal/stray.wal.zst", "left by a killed create").ok());
  auto r = Walcut(env, fmt::format("snapshot list {} --format json", url));
  CHECK(json::parse(r.out)["leftovers"] == json::array({"i-cut-3/"}));
  r = Walcut(env, fmt::format("snapshot create '{}' --repo {} --incremental --cut 3", c, url));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(Keys(*store, "test", "r/i-cut-3/node-0/wal/stray.wal.zst").empty());
  CHECK(!Keys(*store, "test", "r/i-cut-3/node-0/wal/").empty());
  r = Walcut(env, fmt::format("snapshot check {}", url));
  CHECK(r.code == 0);
  r = Walcut(env, fmt::format("snapshot list {} --format json", url));
  CHECK(json::parse(r.out)["leftovers"].empty());
}

TEST_CASE("repo s3: a changed byte of an object is caught by check and by restore", "[repo][s3]") {
  Dir t;
  auto store = StartStore(true, "walcut-bytes");
  const std::string c = MakeRunCluster(t.path);
  const std::string env = store->Env() + " AWS_ENDPOINT_URL=" + store->endpoint;
  const std::string url = "s3://walcut-bytes/r";
  REQUIRE(Walcut(env, fmt::format("snapshot create '{}' --repo {} --full --from full-800", c, url)).code == 0);
  REQUIRE(Walcut(env, fmt::format("snapshot create '{}' --repo {} --incremental --cut 3", c, url)).code == 0);
  REQUIRE(Walcut(env, fmt::format("snapshot check {}", url)).code == 0);
  std::string victim;
  for (const auto& k : Keys(*store, "walcut-bytes", "r/i-cut-3/node-1/wal/")) victim = k;
  REQUIRE(!victim.empty());
  auto bytes = store->client->GetObject("walcut-bytes", victim);
  REQUIRE(bytes.ok());
  std::string changed = *bytes;
  changed[changed.size() / 2] ^= 0x10;
  REQUIRE(store->client->PutObject("walcut-bytes", victim, changed).ok());

  auto r = Walcut(env, fmt::format("snapshot check {}", url));
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.out.find("FINDING [files i-cut-3") != std::string::npos);
  CHECK(r.out.find("s3://walcut-bytes/r/i-cut-3/node-1/wal/") != std::string::npos);
  CHECK(r.out.find("/tmp/") == std::string::npos);  // the private directory is never named
  r = Walcut(env, fmt::format("restore --repo {} i-cut-3 --out '{}/out'", url, t.path));
  INFO(r.out << r.err);
  CHECK(r.code != 0);
  CHECK(r.err.find("s3://walcut-bytes/r/i-cut-3/") != std::string::npos);
  CHECK(!fs::exists(t.path + "/out"));
  CHECK(Entries(t.path) == 1);  // the cluster alone: no private directory left beside OUT
  // The full is intact: restoring it still works.
  r = Walcut(env, fmt::format("restore --repo {} f-full-800 --out '{}/full'", url, t.path));
  CHECK(r.code == 0);
}

TEST_CASE("repo s3: any scheme but s3:// and file:// is refused by every command, never made a directory",
          "[repo][s3]") {
  Dir t;
  const std::string c = MakeRunCluster(t.path);
  const std::string cwd = t.path + "/cwd";
  fs::create_directories(cwd);
  for (const std::string bad : {"gs://x/y", "http://x/y", "S3://bkt/r", "s3://Bad_Bucket/r", "s3://"}) {
    INFO(bad);
    for (const std::string& args : {fmt::format("snapshot create '{}' --repo '{}' --full --from full-800", c, bad),
                                    fmt::format("snapshot create '{}' --repo '{}' --incremental --latest", c, bad),
                                    fmt::format("snapshot list '{}'", bad), fmt::format("snapshot check '{}'", bad),
                                    fmt::format("snapshot expire '{}' --keep-full 1", bad),
                                    fmt::format("restore --repo '{}' --latest --out '{}/out'", bad, t.path)}) {
      INFO(args);
      auto r = Walcut("", args, cwd);
      CHECK(r.code == 2);
      CHECK(r.err.find('\n') == r.err.size() - 1);  // one line
      CHECK(r.err.find(bad) != std::string::npos);
      CHECK(Entries(cwd) == 0);
    }
  }
  // file://PATH is a directory.
  auto r = Walcut("", fmt::format("snapshot create '{}' --repo 'file://{}/repo' --full --from full-800", c, t.path));
  CHECK(r.code == 0);
  r = Walcut("", fmt::format("snapshot list 'file://{}/repo' --format json", t.path));
  CHECK(r.code == 0);
  CHECK(json::parse(r.out)["artifacts"].size() == 1);
  CHECK(Walcut("", fmt::format("snapshot check 'file://{}/repo'", t.path)).code == 0);
}

TEST_CASE("repo lock: a local repository has one writer at a time", "[repo][lock]") {
  Dir t;
  const std::string c = MakeRunCluster(t.path);
  const std::string repo = t.path + "/repo";
  REQUIRE(Walcut("", fmt::format("snapshot create '{}' --repo '{}' --full --from full-800", c, repo)).code == 0);
  {
    auto held = walfmt::OutputLock::Acquire(repo + "/walcut-lock");  // what a running create holds
    REQUIRE(held.ok());
    auto r = Walcut("", fmt::format("snapshot create '{}' --repo '{}' --incremental --cut 3", c, repo));
    CHECK(r.code == 3);
    CHECK(r.err.find(fmt::format("locked by another writer (process {} on this host", ::getpid())) !=
          std::string::npos);
    r = Walcut("", fmt::format("snapshot expire '{}' --keep-full 1", repo));
    CHECK(r.code == 3);
    CHECK(r.err.find("locked by another writer") != std::string::npos);
    CHECK(Walcut("", fmt::format("snapshot expire '{}' --keep-full 1 --dry-run", repo)).code == 0);
    CHECK(Walcut("", fmt::format("snapshot list '{}'", repo)).code == 0);
  }
  CHECK(Walcut("", fmt::format("snapshot create '{}' --repo '{}' --incremental --cut 3", c, repo)).code == 0);
  CHECK(!fs::exists(repo + "/.walcut-lock.lock"));  // removed when released

  // Racing creates: never two artifacts with the same seq.
  const std::string sh = fmt::format(
      "for n in a b c; do ('{0}' snapshot create '{1}' --repo '{2}' --incremental --cut 4 --parent i-cut-3 --name "
      "$n >/dev/null 2>'{3}/err-'$n; echo $? >'{3}/rc-'$n) & done; wait",
      WALCUT_BIN, c, repo, t.path);
  REQUIRE(std::system(sh.c_str()) == 0);
  int created = 0;
  for (const char* n : {"a", "b", "c"}) {
    const int rc = std::stoi(Slurp(t.path + "/rc-" + n));
    INFO(n << ": " << Slurp(t.path + "/err-" + n));
    CHECK((rc == 0 || rc == 3));
    if (rc == 3) CHECK(Slurp(t.path + "/err-" + n).find("locked by another writer") != std::string::npos);
    created += rc == 0;
  }
  CHECK(created >= 1);
  auto r = Walcut("", fmt::format("snapshot list '{}' --format json", repo));
  const json listed = json::parse(r.out);
  std::set<uint64_t> seqs;
  for (const auto& a : listed["artifacts"]) CHECK(seqs.insert(a["seq"].get<uint64_t>()).second);
  CHECK(seqs.size() == static_cast<size_t>(2 + created));
}

TEST_CASE("repo lock: an S3 repository has one writer at a time, and only a stale lock is broken, with --break-lock",
          "[repo][lock][s3]") {
  Dir t;
  auto store = StartStore(true, "walcut-lock");
  const std::string c = MakeRunCluster(t.path);
  const std::string env = store->Env() + " AWS_ENDPOINT_URL=" + store->endpoint;
  const std::string url = "s3://walcut-lock/r";
  REQUIRE(Walcut(env, fmt::format("snapshot create '{}' --repo {} --full --from full-800", c, url)).code == 0);
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  const auto put_lock = [&](const std::string& h, int64_t pid, uint64_t expires) {
    const json j = {{"schema", "walcut.repository-lock/1"},
                    {"command", "snapshot create"},
                    {"host", h},
                    {"pid", pid},
                    {"token", "test"},
                    {"created_unix_us", 1},
                    {"expires_unix_us", expires}};
    REQUIRE(store->client->PutObject("walcut-lock", "r/.walcut-lock", j.dump()).ok());
  };
  const std::string create = fmt::format("snapshot create '{}' --repo {} --incremental --cut 3", c, url);

  const uint64_t in_an_hour = static_cast<uint64_t>(std::time(nullptr) + 3600) * 1000000;
  // A live holder (this process, on this host): refused, also with --break-lock.
  put_lock(host, ::getpid(), in_an_hour);
  auto r = Walcut(env, create);
  CHECK(r.code == 3);
  CHECK(r.err.find(fmt::format("locked by snapshot create (process {} on {}", ::getpid(), host)) != std::string::npos);
  CHECK(Walcut(env, create + " --break-lock").code == 3);
  CHECK(Walcut(env, fmt::format("snapshot expire {} --keep-full 1", url)).code == 3);

  // A holder whose process is gone: stale, named, broken only with --break-lock.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  put_lock(host, gone, in_an_hour);
  r = Walcut(env, create);
  CHECK(r.code == 3);
  CHECK(r.err.find("stale (its process is gone), --break-lock removes it") != std::string::npos);
  r = Walcut(env, create + " --break-lock");
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(Keys(*store, "walcut-lock", "r/.walcut-lock").empty());

  // Another host's lock that expired.
  put_lock("elsewhere.example", 1, 1);
  r = Walcut(env, fmt::format("snapshot expire {} --keep-full 1", url));
  CHECK(r.code == 3);
  CHECK(r.err.find("process 1 on elsewhere.example") != std::string::npos);
  CHECK(r.err.find("stale (it expired)") != std::string::npos);
  CHECK(Walcut(env, fmt::format("snapshot expire {} --keep-full 1 --break-lock", url)).code == 0);

  // Racing creates: one wins the lock object at a time, never two equal seqs.
  const std::string sh = fmt::format(
      "for n in a b c; do ({0} '{1}' snapshot create '{2}' --repo {3} --incremental --cut 4 --parent i-cut-3 --name "
      "$n >/dev/null 2>'{4}/err-'$n; echo $? >'{4}/rc-'$n) & done; wait",
      env, WALCUT_BIN, c, url, t.path);
  REQUIRE(std::system(sh.c_str()) == 0);
  int created = 0;
  for (const char* n : {"a", "b", "c"}) {
    const int rc = std::stoi(Slurp(t.path + "/rc-" + n));
    INFO(n << ": " << Slurp(t.path + "/err-" + n));
    CHECK((rc == 0 || rc == 3));
    if (rc == 3) CHECK(Slurp(t.path + "/err-" + n).find("the repository is locked by") != std::string::npos);
    created += rc == 0;
  }
  CHECK(created >= 1);
  r = Walcut(env, fmt::format("snapshot list {} --format json", url));
  const json listed = json::parse(r.out);
  std::set<uint64_t> seqs;
  for (const auto& a : listed["artifacts"]) CHECK(seqs.insert(a["seq"].get<uint64_t>()).second);
  CHECK(seqs.size() == static_cast<size_t>(2 + created));
}

TEST_CASE("repo s3: large files go up as parallel multipart uploads and come down in pieces, also under faults",
          "[repo][s3]") {
  for (const bool faults : {false, true}) {
    INFO("faults " << faults);
    Dir t;
    auto store = faults ? StartStore(false, "test", {"--fail-every", "4", "--drop-every", "7"})
                        : StartStore(true, "walcut-parts");
    const std::string bucket = faults ? "test" : "walcut-parts";
    walcut::repo::S3Repo r;
    r.client = std::move(store->client);
    r.url = {bucket, "p/"};
    r.display = "s3://" + bucket + "/p";
    r.jobs = 3;
    r.transfer = {5ULL << 20, 5ULL << 20, 1ULL << 20};
    std::string data((12ULL << 20) + 3, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);
    const std::string in = t.path + "/in", out = t.path + "/out";
    std::ofstream(in, std::ios::binary) << data;
    auto st = walcut::repo::UploadFile(r, "p/big", in, 3);
    INFO(st.message());
    REQUIRE(st.ok());
    auto head = r.client->HeadObject(bucket, "p/big");
    REQUIRE(head.ok());
    CHECK(head->size == data.size());
    CHECK(head->etag.find("-3\"") != std::string::npos);  // three parts
    st = walcut::repo::DownloadToFile(r, "p/big", data.size(), out);
    INFO(st.message());
    REQUIRE(st.ok());
    CHECK(Slurp(out) == data);
    auto ups = r.client->ListMultipartUploads(bucket, "p/");
    REQUIRE(ups.ok());
    CHECK(ups->empty());
    store->client = std::move(r.client);
  }
}

// The repository commands against a real S3-compatible server through a
// fault-injecting proxy (tests/s3_fault_proxy.py, issue 30): `snapshot create
// --full` (a runtime full whose node files are large enough for multipart
// uploads), `--incremental` twice, a synthetic full rolled up from the chain,
// `list`, `check`, `restore --repo` and `expire`, once without faults and
// then for each fault case. Every case ends either in a retried success, whose
// results equal the fault-free run (the same list JSON but for where things
// are, byte-identical restored node files, the same removals), or in a clean
// failure: exit 3 with a one-line error, and then `list` shows no artifact
// that is not whole, `check` passes (naming any leftover), and nothing is
// restored. Each case prints one line "case -> outcome".
//
// The server is moto_server when installed (WALCUT_MOTO_SERVER names it;
// WALCUT_MOTO_SERVER=none forces the fallback), else tests/s3_server.py; the
// test says which ran. Both need python3: without it the test FAILs, saying so.
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "repo/s3_client.h"
#include "repo/s3_config.h"
#include "s3_fault_proxy.h"
#include "s3_moto_server.h"
#include "s3_test_server.h"
#include "scratch_dir.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using walcut::repo::S3Client;
using walcut::test::FaultSchedule;
using walcut::test::MotoServer;
using walcut::test::S3FaultProxy;
using walcut::test::S3TestServer;
using walcut::test::ScratchDir;

constexpr const char* kKey = "AKIDWALCUTTEST";  // tests/s3_server.py's key pair (moto takes any)
constexpr const char* kSecret = "walcut-test-secret";
constexpr const char* kBucket = "walcut-faults";

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Upstream {
  std::unique_ptr<MotoServer> moto;
  std::unique_ptr<S3TestServer> py;
  std::string endpoint;
  std::string which;
  std::unique_ptr<S3Client> client;
};

std::unique_ptr<Upstream> StartUpstream() {
  if (!walcut::test::HavePython3()) FAIL("this test needs python3 (tests/s3_fault_proxy.py)");
  auto u = std::make_unique<Upstream>();
  const std::string moto = walcut::test::FindMotoServer();
  if (!moto.empty()) {
    // One server for every case: 900 s as for the Python server, since the
    // cases take about 300 s here and more under the sanitizers (moto's
    // default bound, 300 s, stopped it mid-case there).
    u->moto = std::make_unique<MotoServer>(moto, 900);
    if (!u->moto->error.empty()) FAIL(u->moto->error);
    u->endpoint = u->moto->endpoint();
    u->which = "moto_server (" + moto + ")";
  } else {
    u->py = std::make_unique<S3TestServer>(std::vector<std::string>{"--bucket", kBucket, "--max-seconds", "900"});
    if (!u->py->error.empty()) FAIL(u->py->error);
    u->endpoint = u->py->endpoint();
    u->which = "tests/s3_server.py (moto_server is not installed)";
  }
  WARN("S3 server behind the fault proxy: " << u->which << " at " << u->endpoint);
  walcut::repo::S3Options so;
  so.endpoint = u->endpoint;
  auto config = walcut::repo::ResolveS3Config(so, [](const std::string& n) -> std::optional<std::string> {
    if (n == "AWS_ACCESS_KEY_ID") return kKey;
    if (n == "AWS_SECRET_ACCESS_KEY") return kSecret;
    return std::nullopt;
  });
  REQUIRE(config.ok());
  config->retry = {5, 1, 20, 42};
  auto client = S3Client::Create(std::move(config.value()));
  REQUIRE(client.ok());
  u->client = std::move(client.value());
  if (u->moto) REQUIRE(u->client->CreateBucket(kBucket).ok());
  return u;
}

struct Run {
  int code = -1;
  std::string out, err;
};

Run Walcut(const std::string& endpoint, const std::string& args) {
  ScratchDir io{"s3faults-io"};
  fs::create_directories(io.path);
  const std::string env = fmt::format(
      "env -u AWS_SESSION_TOKEN -u AWS_PROFILE -u AWS_ENDPOINT_URL_S3 AWS_ACCESS_KEY_ID={} AWS_SECRET_ACCESS_KEY={} "
      "AWS_REGION=us-east-1 AWS_ENDPOINT_URL={}",
      kKey, kSecret, endpoint);
  const std::string cmd = fmt::format("{} '{}' {} >'{}/out' 2>'{}/err' </dev/null", env, WALCUT_BIN, args,
                                      io.path.string(), io.path.string());
  const int st = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = Slurp((io.path / "out").string());
  r.err = Slurp((io.path / "err").string());
  return r;
}

// `j` without what names the place (the repository's URL, artifact dirs).
json Placeless(json j) {
  if (j.is_object()) {
    j.erase("dir");
    j.erase("repo");
    for (auto& [k, v] : j.items()) v = Placeless(v);
  } else if (j.is_array()) {
    for (auto& v : j) v = Placeless(v);
  }
  return j;
}

// The commands of a case, in order; each a function of the repository URL and OUT.
struct Step {
  const char* name;
  std::string args;  // {url}, {cluster}, {out} replaced
};

std::vector<Step> Steps(uint64_t latest) {
  return {
      {"create --full", "snapshot create '{cluster}' --repo {url} --full --from full-800"},
      {"create --incremental", "snapshot create '{cluster}' --repo {url} --incremental --cut 3"},
      {"create --incremental (latest)",
       fmt::format("snapshot create '{{cluster}}' --repo {{url}} --incremental --cut {}", latest)},
      {"create --full (rolled up)", fmt::format("snapshot create --repo {{url}} --full --cut {}", latest)},
      {"list", "snapshot list {url} --format json"},
      {"check", "snapshot check {url} --format json"},
      {"restore --repo", fmt::format("restore --repo {{url}} i-cut-{} --out '{{out}}'", latest)},
      {"expire", "snapshot expire {url} --keep-full 1 --format json"},
      {"list after expire", "snapshot list {url} --format json"},
  };
}

std::string Fill(std::string s, const std::string& url, const std::string& cluster, const std::string& out) {
  for (const auto& [k, v] :
       {std::pair<std::string, std::string>{"{url}", url}, {"{cluster}", cluster}, {"{out}", out}}) {
    for (size_t at = s.find(k); at != std::string::npos; at = s.find(k, at + v.size())) s.replace(at, k.size(), v);
  }
  return s;
}

// A cluster whose runtime full snapshot has node files above the 16 MiB
// multipart threshold (a bank of 1,000,000 accounts on each of 2 nodes: one
// backup), or (not
// `large`) a small one.
std::string MakeCluster(const std::string& dir, bool large = true) {
  const std::string c = dir + "/cluster";
  auto r = Walcut("http://127.0.0.1:9",
                  fmt::format("run '{}' --nodes 2 --backups {} --accounts {} --txs 2400 --cuts 4 "
                              "--full-snapshot-at 800 --seed 5 --segment-size 16MiB --epoch 2026-11-30T12:00:00Z",
                              c, large ? 1 : 0, large ? 1000000 : 1000));
  INFO(r.err);
  REQUIRE(r.code == 0);
  if (!large) return c;
  uint64_t largest = 0;
  for (const auto& e : fs::directory_iterator(c + "/snapshots/full-800")) {
    largest = std::max<uint64_t>(largest, fs::file_size(e.path()));
  }
  INFO("largest snapshot file " << largest);
  REQUIRE(largest > (16ULL << 20));
  return c;
}

uint64_t LatestCut(const std::string& cluster) {
  auto r = Walcut("http://127.0.0.1:9", fmt::format("cuts '{}' --format json", cluster));
  REQUIRE(r.code == 0);
  return json::parse(r.out)["window"]["latest"].get<uint64_t>();
}

// Node files (and the manifest but for where things were) of two restores are the same.
void RequireSameRestore(const std::string& a, const std::string& b) {
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(a)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), a).string();
    INFO(rel);
    REQUIRE(fs::exists(b + "/" + rel));
    if (rel == "manifest.json") {
      CHECK(Placeless(json::parse(Slurp(e.path().string()))) == Placeless(json::parse(Slurp(b + "/" + rel))));
    } else {
      CHECK(Slurp(e.path().string()) == Slurp(b + "/" + rel));
    }
    ++files;
  }
  size_t other = 0;
  for (const auto& e : fs::recursive_directory_iterator(b)) other += e.is_regular_file();
  CHECK(files == other);
  CHECK(files > 1);
}

size_t Entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

struct Fixture {
  ScratchDir t{"s3faults"};
  std::unique_ptr<Upstream> up;
  std::string cluster;
  uint64_t latest = 0;
  std::vector<Step> steps;
  std::vector<Run> base;  // the fault-free run, step by step
  std::string base_out;

  Fixture() {
    fs::create_directories(t.path);
    up = StartUpstream();
    cluster = MakeCluster(t.path.string());
    latest = LatestCut(cluster);
    steps = Steps(latest);
    base_out = (t.path / "out-base").string();
    for (const auto& s : steps) {
      base.push_back(Walcut(up->endpoint, Fill(s.args, Url("base"), cluster, base_out)));
      INFO(s.name << ": " << base.back().out << base.back().err);
      REQUIRE(base.back().code == 0);
    }
    REQUIRE(json::parse(base[4].out)["artifacts"].size() == 4);
    REQUIRE(json::parse(base[7].out)["removed"].size() == 3);
  }
  static std::string Url(const std::string& prefix) { return fmt::format("s3://{}/{}", kBucket, prefix); }
};

FaultSchedule F(const std::string& fault, int every, int limit, const std::string& method = "",
                const std::string& query = "", const std::string& key_suffix = "") {
  FaultSchedule f;
  f.fault = fault;
  f.every = every;
  f.limit = limit;
  f.method = method;
  f.query = query;
  f.key_suffix = key_suffix;
  return f;
}

std::string OneLine(const std::string& s) {
  std::string x = s.substr(0, 160);
  for (char& c : x) c = c == '\n' ? ' ' : c;
  return x;
}

}  // namespace

TEST_CASE("repo s3 faults: every case through the fault proxy ends in a retried success equal to the fault-free run",
          "[repo][s3][faults]") {
  Fixture fx;
  struct Case {
    FaultSchedule f;
    const char* what;
  };
  // At most 4 faults (--limit) against 5 attempts a request: retries always win.
  const std::vector<Case> cases = {
      {F("500", 3, 4), "500 InternalError, not applied"},
      {F("503", 4, 4), "503 ServiceUnavailable, not applied"},
      {F("slowdown", 3, 4), "503 SlowDown with S3's XML error"},
      {F("500-after", 5, 4), "applied by the server, then 500"},
      {F("500-after", 1, 2, "PUT", "", "/manifest.json"), "the create-only manifest PUT applied, then 500"},
      {F("500-after", 1, 1, "POST", "uploads"), "a multipart upload begun, then 500"},
      {F("500-after", 1, 1, "POST", "uploadId"), "a multipart upload completed, then 500"},
      {F("500-after", 2, 4, "DELETE"), "deletions applied, then 500"},
      {F("reset-upload", 2, 4), "connection reset mid-upload"},
      {F("reset-upload", 1, 3, "PUT", "partNumber"), "connection reset mid-part"},
      {F("reset-download", 3, 4), "connection reset mid-download"},
      {F("reset-download", 1, 3, "GET", "", ".snap"), "connection reset mid-download of a node file"},
      {F("truncate", 3, 4), "answers cut short of their Content-Length"},
  };
  int n = 0;
  for (const auto& c : cases) {
    const std::string name = fmt::format("{} ({})", c.f.Describe(), c.what);
    INFO("case " << name);
    S3FaultProxy proxy(fx.up->endpoint, c.f);
    REQUIRE(proxy.error.empty());
    const std::string url = Fixture::Url(fmt::format("ok-{}", ++n));
    const std::string out = (fx.t.path / fmt::format("out-ok-{}", n)).string();
    std::vector<Run> got;
    for (const auto& s : fx.steps) {
      got.push_back(Walcut(proxy.endpoint(), Fill(s.args, url, fx.cluster, out)));
      INFO(s.name << ": " << got.back().out << got.back().err << "\nproxy: " << proxy.Stats().dump());
      REQUIRE(got.back().code == 0);
    }
    const json stats = proxy.Stats();
    INFO(stats.dump());
    CHECK(stats["faults"].get<int>() > 0);  // the case injected what it says
    for (const size_t i : {4, 8}) CHECK(Placeless(json::parse(got[i].out)) == Placeless(json::parse(fx.base[i].out)));
    CHECK(json::parse(got[5].out)["summary"] == json::parse(fx.base[5].out)["summary"]);
    CHECK(json::parse(got[7].out)["removed"] == json::parse(fx.base[7].out)["removed"]);
    CHECK(json::parse(got[7].out)["leftovers_removed"] == json::parse(fx.base[7].out)["leftovers_removed"]);
    RequireSameRestore(fx.base_out, out);
    // Nothing left behind: no open upload, no lock.
    auto ups = fx.up->client->ListMultipartUploads(kBucket, fmt::format("ok-{}/", n));
    REQUIRE(ups.ok());
    CHECK(ups->empty());
    WARN(fmt::format("{} -> retried success, results equal ({} faults in {} requests)", name,
                     stats["faults"].get<int>(), stats["requests"].get<int>()));
  }
}

TEST_CASE("repo s3 faults: a fault that never ends fails cleanly, leaving whole artifacts or leftovers only",
          "[repo][s3][faults]") {
  Fixture fx;
  struct Case {
    FaultSchedule f;
    const char* what;
    size_t setup;  // steps run without the proxy first
    size_t fails;  // the step that fails through the proxy
    const char* message;
  };
  const std::vector<Case> cases = {
      {F("slowdown", 1, 0, "PUT", "partNumber"), "every part upload: SlowDown", 0, 0, "HTTP 503 SlowDown"},
      {F("reset-upload", 1, 0, "PUT", "partNumber"), "every part upload: reset", 0, 0, "curl error"},
      {F("500", 1, 0, "PUT", "", "/manifest.json"), "every manifest PUT: 500", 1, 1, "HTTP 500 InternalError"},
      {F("reset-download", 1, 0, "GET", "", ".snap"), "every node file download: reset", 4, 6, "curl error"},
      {F("truncate", 1, 0, "GET", "", ".snap"), "every node file download: truncated", 4, 5, "curl error"},
      {F("truncate", 1, 0, "GET", "list-type"), "every listing: truncated", 4, 4, "curl error"},
      {F("503", 1, 0, "DELETE"), "every deletion: 503", 4, 7, "HTTP 503 ServiceUnavailable"},
  };
  int n = 0;
  for (const auto& c : cases) {
    const std::string name = fmt::format("{} ({})", c.f.Describe(), c.what);
    INFO("case " << name);
    const std::string url = Fixture::Url(fmt::format("fail-{}", ++n));
    const std::string out = (fx.t.path / fmt::format("fail-{}", n) / "out").string();
    fs::create_directories(fs::path(out).parent_path());
    for (size_t i = 0; i < c.setup; ++i) {
      auto r = Walcut(fx.up->endpoint, Fill(fx.steps[i].args, url, fx.cluster, out));
      INFO(fx.steps[i].name << ": " << r.err);
      REQUIRE(r.code == 0);
    }
    Run r;
    json stats;
    {
      S3FaultProxy proxy(fx.up->endpoint, c.f);
      REQUIRE(proxy.error.empty());
      r = Walcut(proxy.endpoint(), Fill(fx.steps[c.fails].args, url, fx.cluster, out));
      stats = proxy.Stats();
    }
    INFO(fx.steps[c.fails].name << " through the proxy: " << r.out << r.err << "\nproxy: " << stats.dump());
    CHECK(stats["faults"].get<int>() > 0);
    CHECK(r.code == 3);
    CHECK(r.err.find('\n') == r.err.size() - 1);  // one line
    CHECK(r.err.find(c.message) != std::string::npos);
    CHECK(r.err.find("giving up") != std::string::npos);
    // Then, without faults: only whole artifacts, check passes, nothing restored.
    auto l = Walcut(fx.up->endpoint, Fill("snapshot list {url} --format json", url, "", ""));
    INFO("list: " << l.out << l.err);
    REQUIRE(l.code == 0);
    const json lj = json::parse(l.out);
    for (const auto& a : lj["artifacts"]) CHECK(!a.contains("error"));  // every one whole and readable
    const size_t whole = lj["artifacts"].size();
    CHECK(whole == std::min<size_t>(c.setup, 4));  // the artifacts made before; the failed create's is not one
    auto chk = Walcut(fx.up->endpoint, Fill("snapshot check {url}", url, "", ""));
    INFO("check: " << chk.out << chk.err);
    CHECK(chk.code == 0);
    for (const auto& left : lj["leftovers"]) {
      CHECK(chk.out.find("NOTE " + left.get<std::string>() + ": left by a create or expire") != std::string::npos);
    }
    CHECK(!fs::exists(out));
    CHECK(Entries(fs::path(out).parent_path().string()) == 0);  // no private directory left beside OUT
    // expire removes the leftovers. A lock whose release failed (every
    // DELETE refused) is stale, its process gone: --break-lock removes it.
    const std::string expire = Fill("snapshot expire {url} --keep-full 1 --format json", url, "", "");
    auto e = Walcut(fx.up->endpoint, expire);
    std::string lock_note;
    if (e.code == 3 && e.err.find("stale (its process is gone), --break-lock removes it") != std::string::npos) {
      lock_note = "; its lock left behind, stale: --break-lock";
      e = Walcut(fx.up->endpoint, expire + " --break-lock");
    }
    INFO("expire: " << e.out << e.err);
    CHECK(e.code == 0);
    l = Walcut(fx.up->endpoint, Fill("snapshot list {url} --format json", url, "", ""));
    CHECK(json::parse(l.out)["leftovers"].empty());
    WARN(fmt::format(
        "{} -> clean failure of `{}`: exit {}, {}; then list: {} whole artifacts, leftovers {}; check exit "
        "{}{}",
        name, fx.steps[c.fails].name, r.code, OneLine(r.err), whole, lj["leftovers"].dump(), chk.code, lock_note));
  }
}

TEST_CASE(
    "repo s3 faults: an open upload under a whole artifact is a leftover of its key, and expire keeps the artifact",
    "[repo][s3][faults]") {
  // What a CreateMultipartUpload applied by the server but answered by a 5xx
  // or a reset leaves when its abort fails too; expire once deleted the whole
  // artifact for it.
  ScratchDir t{"s3faults"};
  fs::create_directories(t.path);
  auto up = StartUpstream();
  const std::string c = MakeCluster(t.path.string(), false);
  const std::string url = Fixture::Url("open");
  REQUIRE(Walcut(up->endpoint, fmt::format("snapshot create '{}' --repo {} --full --from full-800", c, url)).code == 0);
  auto id = up->client->CreateMultipartUpload(kBucket, "open/f-full-800/node-0.snap");
  REQUIRE(id.ok());
  auto l = Walcut(up->endpoint, fmt::format("snapshot list {} --format json", url));
  REQUIRE(l.code == 0);
  CHECK(json::parse(l.out)["artifacts"].size() == 1);
  CHECK(json::parse(l.out)["leftovers"] == json::array({"f-full-800/node-0.snap"}));
  auto chk = Walcut(up->endpoint, fmt::format("snapshot check {}", url));
  CHECK(chk.code == 0);
  CHECK(chk.out.find("NOTE f-full-800/node-0.snap: left by a create or expire") != std::string::npos);
  auto e = Walcut(up->endpoint, fmt::format("snapshot expire {} --keep-full 1 --format json", url));
  INFO(e.out << e.err);
  REQUIRE(e.code == 0);
  CHECK(json::parse(e.out)["leftovers_removed"] == json::array({"f-full-800/node-0.snap"}));
  CHECK(json::parse(e.out)["removed"].empty());
  l = Walcut(up->endpoint, fmt::format("snapshot list {} --format json", url));
  CHECK(json::parse(l.out)["artifacts"].size() == 1);
  CHECK(json::parse(l.out)["leftovers"].empty());
  auto ups = up->client->ListMultipartUploads(kBucket, "open/");
  REQUIRE(ups.ok());
  CHECK(ups->empty());
  const std::string out = (t.path / "out").string();
  CHECK(Walcut(up->endpoint, fmt::format("restore --repo {} f-full-800 --out '{}'", url, out)).code == 0);
  CHECK(fs::exists(out + "/node-0.snap"));
}

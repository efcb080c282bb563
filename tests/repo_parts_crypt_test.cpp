// Increments made of parts in an encrypted repository (repo/parts.h,
// repo/REPOSITORY.md "Increments from parts" and "Encryption"), end to end
// through the walcut binary: every node's part uploaded encrypted (only
// ciphertext in the repository, no plaintext left under TMPDIR), listed,
// checked and left alone by expire, assembled; the artifact decrypts to the
// single-host encrypted increment's files and restores to the same node
// files, on a directory and on an S3 server. Then the refusals: no key or
// another (nothing written), a changed ciphertext byte, a part's file in
// another part's place, a part under another name, a part's file in an
// artifact.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "repo/crypt.h"
#include "repo/parts.h"
#include "repo/remote.h"
#include "repo_parts_support.h"

namespace fs = std::filesystem;
using nlohmann::json;
using walcut::test::Run;
using walcut::test::Slurp;
using walcut::test::Spit;
using walcut::test::TempDir;
using namespace walcut::test::parts;

namespace {

// A key file of 64 hex digits from `first` on, mode 0600.
std::string MakeKey(const std::string& path, int first) {
  std::string hex;
  for (int i = 0; i < 32; ++i) hex += fmt::format("{:02x}", (first + i) & 0xff);
  Spit(path, hex + "\n");
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  return path;
}

walcut::repo::RepoKey LoadKey(const std::string& path) {
  auto k = walcut::repo::LoadKeyFile(path);
  REQUIRE(k.ok());
  return *k;
}

// Every regular file under `dir`, relative, sorted.
std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t Entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

// Every file under `dir` but the marker and the lock is an encrypted file; their count.
size_t RequireSealed(const std::string& dir) {
  size_t n = 0;
  for (const auto& rel : Files(dir)) {
    if (rel == "walcut-repository.json" || rel == ".walcut-lock.lock") continue;
    INFO(dir << "/" << rel);
    CHECK(Slurp(dir + "/" + rel).substr(0, 8) == walcut::repo::kCryptMagic);
    ++n;
  }
  return n;
}

std::string Plain(const walcut::repo::RepoKey& key, const std::string& identity, const std::string& cipher) {
  auto p = walcut::repo::DecryptBytes(key, identity, cipher, identity);
  INFO(identity);
  REQUIRE(p.ok());
  return *p;
}

// The encrypted artifacts A and B (artifact `name` both) hold the same files
// with the same plaintext.
void RequireSamePlain(const walcut::repo::RepoKey& key, const std::string& a, const std::string& b,
                      const std::string& name) {
  const auto fa = Files(a);
  CHECK(fa == Files(b));
  CHECK(fa.size() > 3);
  for (const auto& rel : fa) {
    const std::string id = name + "/" + rel;
    CHECK(Plain(key, id, Slurp(a + "/" + rel)) == Plain(key, id, Slurp(b + "/" + rel)));
  }
}

// The part of node i under PARTS (REPO/.parts/<artifact>).
std::string PartDir(const std::string& parts, int i) {
  for (const auto& e : fs::directory_iterator(parts)) {
    if (e.path().filename().string().rfind(fmt::format("node-{}.", i), 0) == 0) return e.path().string();
  }
  FAIL("no part of node " << i << " under " << parts);
  return "";
}

// The lock of directory repository `repo` held by a child process until destroyed.
class LockHolder {
 public:
  explicit LockHolder(const std::string& repo) {
    REQUIRE(::pipe(ready_) == 0);
    REQUIRE(::pipe(done_) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      bool ok = false;
      {
        auto l = walcut::repo::LockDirectory(repo);
        char c = l.ok() ? '1' : '0';
        ok = ::write(ready_[1], &c, 1) == 1 && ::read(done_[0], &c, 1) == 1;
      }  // released: its lock file removed
      ::_exit(ok ? 0 : 1);
    }
    char c = 0;
    REQUIRE(::read(ready_[0], &c, 1) == 1);
    REQUIRE(c == '1');
  }
  ~LockHolder() {
    const char c = 'x';
    if (::write(done_[1], &c, 1) != 1) ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    for (int fd : {ready_[0], ready_[1], done_[0], done_[1]}) ::close(fd);
  }
  LockHolder(const LockHolder&) = delete;
  LockHolder& operator=(const LockHolder&) = delete;

 private:
  int ready_[2] = {-1, -1}, done_[2] = {-1, -1};
  pid_t pid_ = -1;
};

}  // namespace

TEST_CASE("repo parts crypt: encrypted parts assembled decrypt to the single-host encrypted increment, restore alike",
          "[repo][parts][crypt]") {
  for (uint64_t seed : {3, 8}) {
    INFO("seed " << seed);
    TempDir t;
    const std::string c = MakeCluster(t.path, seed);
    const std::string key = MakeKey(t.path + "/key", 0xA0);
    const std::string enc = fmt::format(" --encrypt-key-file '{}'", key);
    const std::string tmp = t.path + "/tmp", env = fmt::format("TMPDIR='{}'", t.path + "/tmp");
    fs::create_directories(tmp);
    const std::string r1 = t.path + "/r1", r2 = t.path + "/r2";
    const auto [parent, k] = TwoRepos(c, r1, r2, seed % 2 == 1, enc);
    INFO("parent " << parent << ", cut " << k);
    const std::string v = t.path + "/v.json", name = fmt::format("i-cut-{}", k);
    Verdict(t.path, c, k, v);
    UploadParts(t.path, r2, v, seed % 3 != 0, enc, env);
    CHECK(Entries(tmp) == 0);                                              // no plaintext left behind
    CHECK(RequireSealed(fmt::format("{}/.parts/{}", r2, name)) >= 3 * 4);  // segments, plan, summary, manifest
    const std::string list = fmt::format("snapshot list '{}' --format json{}", r2, enc);
    CHECK(json::parse(Must(list).out)["pending_parts"].size() == 3);
    Must(fmt::format("snapshot check '{}'{}", r2, enc));
    Must(fmt::format("snapshot expire '{}' --keep-full 1{}", r2, enc));  // leaves the parts alone
    CHECK(json::parse(Must(list).out)["pending_parts"].size() == 3);
    const Run r =
        Must(fmt::format("snapshot create --repo '{}' --incremental --assemble --verdict '{}'{}", r2, v, enc), 0, env);
    CHECK(r.out.find("chain: f-full-300 <- ") != std::string::npos);
    CHECK(Entries(tmp) == 0);
    CHECK(!fs::exists(r2 + "/.parts"));
    CHECK(json::parse(Must(list).out)["pending_parts"].empty());
    RequireSealed(r2);
    RequireSamePlain(LoadKey(key), r1 + "/" + name, r2 + "/" + name, name);
    Must(fmt::format("snapshot check '{}' --restore{}", r2, enc));
    Must(fmt::format("restore --repo '{}' {} --out '{}/o1'{}", r1, name, t.path, enc));
    Must(fmt::format("restore --repo '{}' {} --out '{}/o2'{}", r2, name, t.path, enc), 0, env);
    RequireSameNodes(t.path + "/o1", t.path + "/o2");
    CHECK(Entries(tmp) == 0);
  }
}

TEST_CASE("repo parts crypt: the flow of docs/scale-out.md with KEY, as written", "[repo][parts][crypt]") {
  const uint64_t seed = 6;
  INFO("seed " << seed);
  TempDir t;
  const std::string c = MakeCluster(t.path, seed);
  const std::string key = MakeKey(t.path + "/key", 0x07);
  const std::string r1 = t.path + "/r1", r2 = t.path + "/r2";
  const auto [parent, k] = TwoRepos(c, r1, r2, false, fmt::format(" --encrypt-key-file '{}'", key));
  RunDocFlow(t.path, c, k, r2, key);
  const std::string name = fmt::format("i-cut-{}", k);
  CHECK(!fs::exists(r2 + "/.parts"));
  RequireSealed(r2);
  RequireSamePlain(LoadKey(key), r1 + "/" + name, r2 + "/" + name, name);
}

TEST_CASE("repo parts crypt: on an S3 server, encrypted parts assembled decrypt to the single-host increment",
          "[repo][parts][crypt][s3]") {
  const uint64_t seed = 5;
  INFO("seed " << seed);
  TempDir t;
  const std::string bucket = "walcut-parts-crypt";
  auto store = StartStore(bucket);
  const std::string c = MakeCluster(t.path, seed);
  const std::string key = MakeKey(t.path + "/key", 0x11);
  const std::string enc = fmt::format(" --encrypt-key-file '{}'", key);
  const std::string tmp = t.path + "/tmp";
  fs::create_directories(tmp);
  const std::string env = fmt::format("{} TMPDIR='{}'", store->Vars(), tmp);
  const std::string r1 = t.path + "/r1", s3 = fmt::format("s3://{}/repo", bucket);
  Must(fmt::format("snapshot create '{}' --repo '{}' --full --from full-300{}", c, r1, enc));
  Must(fmt::format("snapshot create '{}' --repo '{}' --full --from full-300{}", c, s3, enc), 0, env);
  const Run inc =
      Must(fmt::format("snapshot create '{}' --repo '{}' --incremental --latest --format json{}", c, r1, enc));
  const uint64_t k = json::parse(inc.out)["cut"].get<uint64_t>();
  const std::string v = t.path + "/v.json", name = fmt::format("i-cut-{}", k);
  Verdict(t.path, c, k, v);
  const std::string other = fmt::format(" --encrypt-key-file '{}'", MakeKey(t.path + "/other", 0x12));
  const auto keys = [&] {
    auto l = store->client->ListObjects(bucket, "repo/");
    REQUIRE(l.ok());
    std::vector<std::string> out;
    for (const auto& o : l->objects) out.push_back(o.key);
    std::sort(out.begin(), out.end());
    return out;
  };
  // No key or another: refused (exit 2), nothing written (no object, no lock, nothing under TMPDIR).
  auto before = keys();
  const std::string part0 =
      fmt::format("snapshot create '{}' --repo '{}' --incremental --verdict '{}'", NodeDir(t.path, 0), s3, v);
  const std::string assemble =
      fmt::format("snapshot create --repo '{}' --incremental --assemble --verdict '{}'", s3, v);
  for (const std::string& extra : {std::string(), other}) {
    CHECK(Must(part0 + extra, 2, env).err.find(extra.empty() ? "give its key" : "wrong key") != std::string::npos);
    CHECK(keys() == before);
  }
  UploadParts(t.path, s3, v, true, enc, env);
  CHECK(Entries(tmp) == 0);
  before = keys();
  for (const std::string& extra : {std::string(), other}) {
    CHECK(Must(assemble + extra, 2, env).err.find(extra.empty() ? "give its key" : "wrong key") != std::string::npos);
    CHECK(keys() == before);
  }
  CHECK(Entries(tmp) == 0);
  auto parts = store->client->ListObjects(bucket, "repo/.parts/");
  REQUIRE(parts.ok());
  CHECK(parts->objects.size() >= 3 * 4);
  for (const auto& o : parts->objects) {
    auto got = store->client->GetObject(bucket, o.key);
    INFO(o.key);
    REQUIRE(got.ok());
    CHECK(got->substr(0, 8) == walcut::repo::kCryptMagic);
  }
  const std::string list = fmt::format("snapshot list '{}' --format json{}", s3, enc);
  CHECK(json::parse(Must(list, 0, env).out)["pending_parts"].size() == 3);
  Must(fmt::format("snapshot check '{}'{}", s3, enc), 0, env);
  Must(fmt::format("snapshot expire '{}' --keep-full 1{}", s3, enc), 0, env);  // leaves the parts alone
  CHECK(json::parse(Must(list, 0, env).out)["pending_parts"].size() == 3);
  // A changed ciphertext byte in a part's segment: refused (exit 1), nothing written.
  std::string seg;
  for (const auto& o : parts->objects) {
    if (o.key.size() > 8 && o.key.substr(o.key.size() - 8) == ".wal.zst") seg = o.key;
  }
  REQUIRE(!seg.empty());
  auto bytes = store->client->GetObject(bucket, seg);
  REQUIRE(bytes.ok());
  std::string changed = *bytes;
  REQUIRE(changed.size() > 200);
  changed[100] ^= 0x01;
  REQUIRE(store->client->PutObject(bucket, seg, changed).ok());
  before = keys();
  const Run bad = Must(assemble + enc, 1, env);
  CHECK(bad.err.find(fmt::format("s3://{}/{}: chunk 0; the file fails authentication", bucket, seg)) !=
        std::string::npos);
  CHECK(keys() == before);
  CHECK(Entries(tmp) == 0);
  REQUIRE(store->client->PutObject(bucket, seg, *bytes).ok());
  Must(assemble + enc, 0, env);
  CHECK(Entries(tmp) == 0);
  // The artifact's objects: the single-host increment's files, once decrypted.
  const walcut::repo::RepoKey rk = LoadKey(key);
  size_t files = 0;
  for (const auto& rel : Files(r1 + "/" + name)) {
    auto got = store->client->GetObject(bucket, fmt::format("repo/{}/{}", name, rel));
    INFO(rel);
    REQUIRE(got.ok());
    const std::string id = name + "/" + rel;
    CHECK(Plain(rk, id, *got) == Plain(rk, id, Slurp(r1 + "/" + name + "/" + rel)));
    ++files;
  }
  CHECK(files > 3);
  auto left = store->client->ListObjects(bucket, "repo/.parts/");
  REQUIRE(left.ok());
  CHECK(left->objects.empty());
  Must(fmt::format("snapshot check '{}' --restore{}", s3, enc), 0, env);
  Must(fmt::format("restore --repo '{}' {} --out '{}/o1'{}", r1, name, t.path, enc));
  Must(fmt::format("restore --repo '{}' {} --out '{}/o2'{}", s3, name, t.path, enc), 0, env);
  RequireSameNodes(t.path + "/o1", t.path + "/o2");
  CHECK(Entries(tmp) == 0);
}

TEST_CASE("repo parts crypt: no key or another writes nothing, for a part and for the assembly",
          "[repo][parts][crypt]") {
  const uint64_t seed = 4;
  INFO("seed " << seed);
  TempDir t;
  const std::string c = MakeCluster(t.path, seed);
  const std::string key = MakeKey(t.path + "/key", 0xA0), other = MakeKey(t.path + "/other", 0x20);
  const std::string enc = fmt::format(" --encrypt-key-file '{}'", key);
  const std::string tmp = t.path + "/tmp", env = fmt::format("TMPDIR='{}'", t.path + "/tmp");
  fs::create_directories(tmp);
  const std::string r = t.path + "/r", plain = t.path + "/plain";
  const auto [parent, k] = TwoRepos(c, t.path + "/r1", r, false, enc);
  Must(fmt::format("snapshot create '{}' --repo '{}' --full --from full-300", c, plain));
  const std::string v = t.path + "/v.json";
  Verdict(t.path, c, k, v);
  const std::string part =
      fmt::format("snapshot create '{}' --repo '{}' --incremental --verdict '{}'", NodeDir(t.path, 0), r, v);
  const std::string assemble = fmt::format("snapshot create --repo '{}' --incremental --assemble --verdict '{}'", r, v);
  const std::vector<std::pair<std::string, std::string>> wrong = {
      {"", "the repository is encrypted (aes-256-gcm); give its key with --encrypt-key-file FILE"},
      {fmt::format(" --encrypt-key-file '{}'", other), ": wrong key: the key file's check value"}};
  auto before = Files(r);
  for (const auto& [extra, want] : wrong) {
    INFO("key option: '" << extra << "'");
    const Run out = Must(part + extra, 2, env);
    CHECK(out.err.find(want) != std::string::npos);
    CHECK(Files(r) == before);
    CHECK(Entries(tmp) == 0);
  }
  // A key for a plain repository, as every command refuses it.
  const Run out = Must(
      fmt::format("snapshot create '{}' --repo '{}' --incremental --verdict '{}'{}", NodeDir(t.path, 0), plain, v, enc),
      2, env);
  CHECK(out.err.find("the repository is not encrypted; refusing --encrypt-key-file") != std::string::npos);
  CHECK(!fs::exists(plain + "/.parts"));

  UploadParts(t.path, r, v, false, enc, env);
  before = Files(r);
  for (const auto& [extra, want] : wrong) {
    INFO("key option: '" << extra << "'");
    const Run res = Must(assemble + extra, 2, env);
    CHECK(res.err.find(want) != std::string::npos);
    CHECK(Files(r) == before);
    CHECK(Entries(tmp) == 0);
  }
  // The library checks the key before it takes the lock: refused for the
  // key, not because the lock is held (here, by a child process).
  {
    LockHolder held(r);
    walcut::repo::AssembleRequest ar;
    ar.repo = r;
    ar.verdict = v;
    walcut::repo::RemoteOptions o;
    auto a = walcut::repo::AssembleIncrement(ar, o);
    REQUIRE(!a.ok());
    CHECK(a.status().message().find("give its key") != std::string::npos);
    auto ok = walcut::repo::LoadRepoKey(other);
    REQUIRE(ok.ok());
    o.key = *ok;
    a = walcut::repo::AssembleIncrement(ar, o);
    REQUIRE(!a.ok());
    CHECK(a.status().message().find("wrong key") != std::string::npos);
  }
  CHECK(Files(r) == before);
  Must(assemble + enc, 0, env);  // the right key: assembled
  CHECK(!fs::exists(r + "/.parts"));
}

TEST_CASE("repo parts crypt: a changed ciphertext byte, a part's file in another part, a part renamed: refused",
          "[repo][parts][crypt]") {
  const uint64_t seed = 9;
  INFO("seed " << seed);
  TempDir t;
  const std::string c = MakeCluster(t.path, seed);
  const std::string key = MakeKey(t.path + "/key", 0x42);
  const std::string enc = fmt::format(" --encrypt-key-file '{}'", key);
  const std::string tmp = t.path + "/tmp", env = fmt::format("TMPDIR='{}'", t.path + "/tmp");
  fs::create_directories(tmp);
  const std::string r1 = t.path + "/r1", r = t.path + "/r";
  const auto [parent, k] = TwoRepos(c, r1, r, false, enc);
  const std::string v = t.path + "/v.json", name = fmt::format("i-cut-{}", k);
  Verdict(t.path, c, k, v);
  UploadParts(t.path, r, v, false, enc, env);
  const std::string assemble =
      fmt::format("snapshot create --repo '{}' --incremental --assemble --verdict '{}'{}", r, v, enc);
  const std::string parts = fmt::format("{}/.parts/{}", r, name);
  const std::string node1 = PartDir(parts, 1), node2 = PartDir(parts, 2);
  // Refused before the artifact is written, exit 1 as a part's checksum
  // mismatch, naming the file; no plaintext left behind.
  const auto refused = [&](const std::string& file) {
    const Run res = Must(assemble, 1, env);
    CHECK(res.err.find(file + ": chunk 0; the file fails authentication") != std::string::npos);
    CHECK(!fs::exists(r + "/" + name));
    CHECK(Entries(tmp) == 0);
  };

  // A changed ciphertext byte in node 1's segment.
  std::string seg;
  for (const auto& e : fs::recursive_directory_iterator(node1)) {
    if (e.path().extension() == ".zst") seg = e.path().string();
  }
  REQUIRE(!seg.empty());
  std::string bytes = Slurp(seg);
  REQUIRE(bytes.size() > 200);
  bytes[100] ^= 0x20;
  Spit(seg, bytes);
  refused(seg);
  bytes[100] ^= 0x20;
  Spit(seg, bytes);

  // Node 1's summary and manifest in node 2's part, each valid ciphertext of
  // the same key and the same path inside a part.
  for (const std::string rel : {"summary.json", "manifest.json"}) {
    INFO(rel);
    const std::string kept = Slurp(node2 + "/" + rel);
    Spit(node2 + "/" + rel, Slurp(node1 + "/" + rel));
    refused(node2 + "/" + rel);
    Spit(node2 + "/" + rel, kept);
  }

  // Node 1's part under another part's name (another token).
  const std::string moved = parts + "/node-1.0123456789abcdef";
  fs::rename(node1, moved);
  refused(moved + "/manifest.json");
  fs::rename(moved, node1);

  // Put right: assembled, the single-host increment's plaintext.
  Must(assemble, 0, env);
  RequireSamePlain(LoadKey(key), r1 + "/" + name, r + "/" + name, name);
  Must(fmt::format("snapshot check '{}'{}", r, enc));
}

TEST_CASE("repo parts crypt: a part's file put in the artifact in place of the same file fails there",
          "[repo][parts][crypt]") {
  const uint64_t seed = 9;
  INFO("seed " << seed);
  TempDir t;
  const std::string c = MakeCluster(t.path, seed);
  const std::string key = MakeKey(t.path + "/key", 0x42);
  const std::string enc = fmt::format(" --encrypt-key-file '{}'", key);
  const std::string r = t.path + "/r";
  const auto [parent, k] = TwoRepos(c, t.path + "/r1", r, false, enc);
  const std::string v = t.path + "/v.json", name = fmt::format("i-cut-{}", k);
  Verdict(t.path, c, k, v);
  UploadParts(t.path, r, v, false, enc);
  // Node 0's restore plan as its part holds it: the same plaintext as the
  // artifact's, the same key, another identity.
  const std::string plan = Slurp(PartDir(fmt::format("{}/.parts/{}", r, name), 0) + "/node-0/restore-plan.json");
  Must(fmt::format("snapshot create --repo '{}' --incremental --assemble --verdict '{}'{}", r, v, enc));
  Must(fmt::format("snapshot check '{}'{}", r, enc));
  Spit(fmt::format("{}/{}/node-0/restore-plan.json", r, name), plan);
  const Run res = Must(fmt::format("snapshot check '{}'{}", r, enc), 1);
  CHECK(res.out.find("authentication") != std::string::npos);
  CHECK(res.out.find("node-0/restore-plan.json: chunk 0; the file fails authentication") != std::string::npos);
  Must(fmt::format("restore --repo '{}' {} --out '{}/o'{}", r, name, t.path, enc), 1);
  CHECK(!fs::exists(t.path + "/o"));
}

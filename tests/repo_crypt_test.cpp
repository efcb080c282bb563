// Encryption at rest of a repository (--encrypt-key-file, repo/crypt.h,
// REPOSITORY.md "Encryption"): the chunk format against a known answer
// computed independently (Python's `cryptography` from the format's
// description), every kind of forgery of a file refused, key files, and end to
// end through the walcut binary on a directory and on the S3 test server
// (tests/s3_server.py): the same results as a plain repository, ciphertext
// only in the repository, refusals that write nothing, tampered files caught
// by check (exit 1) and by restore (no OUT).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "repo/crypt.h"
#include "repo/remote.h"
#include "repo/repository.h"
#include "repo/s3_client.h"
#include "repo/s3_config.h"
#include "s3_test_server.h"
#include "scratch_dir.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using walcut::repo::RepoKey;
using walcut::test::ScratchDir;

struct Dir {
  ScratchDir d{"crypt"};
  std::string path = d.path.string();
  Dir() { fs::create_directories(d.path); }
};

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void Spit(const std::string& path, const std::string& data, mode_t mode = 0600) {
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << data;
  }
  ::chmod(path.c_str(), mode);
}

std::string Hex(const std::string& s) {
  std::string h;
  for (unsigned char c : s) h += fmt::format("{:02x}", c);
  return h;
}

struct Run {
  int code = -1;
  std::string out, err;
};

// `ENV walcut ARGS` (shell text).
Run Walcut(const std::string& env, const std::string& args) {
  Dir io;
  const std::string cmd =
      fmt::format("{} '{}' {} >'{}/out' 2>'{}/err' </dev/null", env, WALCUT_BIN, args, io.path, io.path);
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
                                  "--segment-size 1MiB --epoch 2026-11-30T12:00:00Z",
                                  c));
  INFO(r.err);
  REQUIRE(r.code == 0);
  return c;
}

RepoKey FixedKey(unsigned char first) {
  RepoKey k;
  for (size_t i = 0; i < k.bytes.size(); ++i) k.bytes[i] = static_cast<unsigned char>(first + i);
  return k;
}

// A key file of `k` as 64 hex digits and a newline, mode 0600.
std::string KeyFile(const std::string& dir, const std::string& name, const RepoKey& k) {
  const std::string path = dir + "/" + name;
  std::string hex;
  for (unsigned char b : k.bytes) hex += fmt::format("{:02x}", b);
  Spit(path, hex + "\n");
  return path;
}

// The three artifacts of the run cluster: a full, increments of cut 3 and of
// the latest cut; returns the latest cut.
uint64_t CreateThree(const std::string& env, const std::string& c, const std::string& repo, const std::string& extra) {
  auto r = Walcut(env, fmt::format("snapshot create '{}' --repo '{}' {} --full --from full-800", c, repo, extra));
  INFO(repo << ": " << r.out << r.err);
  REQUIRE(r.code == 0);
  r = Walcut(env, fmt::format("snapshot create '{}' --repo '{}' {} --incremental --cut 3", c, repo, extra));
  REQUIRE(r.code == 0);
  r = Walcut(env,
             fmt::format("snapshot create '{}' --repo '{}' {} --incremental --latest --format json", c, repo, extra));
  REQUIRE(r.code == 0);
  return json::parse(r.out)["cut"].get<uint64_t>();
}

json WithoutDirs(json j) {
  if (j.is_object()) {
    j.erase("dir");
    for (auto& [k, v] : j.items()) v = WithoutDirs(v);
  } else if (j.is_array()) {
    for (auto& v : j) v = WithoutDirs(v);
  }
  return j;
}

// The same files with the same bytes; manifest.json the same but for paths
// ("dir" members), or not compared when `manifests` is false (a synthetic
// full's records where the restore that made it ran).
void RequireSameTree(const std::string& a, const std::string& b, bool manifests = true) {
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(a)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), a).string();
    INFO(rel);
    if (rel == "manifest.json") {
      if (manifests)
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

// Every file under `dir` with its bytes: what "writes nothing" compares.
std::map<std::string, std::string> Tree(const std::string& dir) {
  std::map<std::string, std::string> t;
  if (!fs::exists(dir)) return t;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    t[fs::relative(e.path(), dir).string()] = e.is_regular_file() ? Slurp(e.path().string()) : "<dir>";
  }
  return t;
}

size_t Entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

// The mutations of an encrypted file that authentication must refuse.
std::map<std::string, std::string> Forgeries(const std::string& c, size_t chunk, const std::string& other) {
  const size_t rec = chunk + walcut::repo::kCryptTagBytes, h = walcut::repo::kCryptHeaderBytes;
  std::map<std::string, std::string> f;
  auto flip = [&](size_t at) {
    std::string x = c;
    x[at] = static_cast<char>(x[at] ^ 0x01);
    return x;
  };
  f["a changed magic byte"] = flip(0);
  f["a changed chunk size"] = flip(10);
  f["a changed salt byte"] = flip(20);
  f["a changed ciphertext byte"] = flip(h + 100);
  f["a changed tag byte"] = flip(h + chunk + 3);
  f["a changed byte of the last chunk"] = flip(c.size() - 1);
  f["truncated at a chunk boundary"] = c.substr(0, h + 2 * rec);
  f["truncated inside a chunk"] = c.substr(0, c.size() - 5);
  f["truncated to the header"] = c.substr(0, h);
  f["an appended byte"] = c + "x";
  f["the first two chunks swapped"] =
      c.substr(0, h) + c.substr(h + rec, rec) + c.substr(h, rec) + c.substr(h + 2 * rec);
  f["another file's"] = other;
  f["empty"] = "";
  return f;
}

}  // namespace

TEST_CASE("repo crypt: the chunk format's known answer (a fixed key and salt give fixed bytes)", "[repo][crypt]") {
  // Computed with Python's `cryptography` (AESGCM, hmac) from REPOSITORY.md's
  // description, not by this code.
  const RepoKey key = FixedKey(0);
  walcut::repo::Salt salt{};
  for (size_t i = 0; i < salt.size(); ++i) salt[i] = static_cast<unsigned char>(0x40 + i);
  CHECK(key.KeyCheck() == "7f1fc42e3f925cda8cb225c1673f94a49008ee96045b1fa09116efb85cb5b8f9");
  const std::string header = "57414c435554453100000100404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f";
  const std::string a = walcut::repo::EncryptBytes(key, "i-cut-4/cluster.json", "walcut\n", 65536, &salt);
  CHECK(Hex(a) == header + "fcc161e44a01c08294b6423867be8047fe0d6b6e3bb617");
  const std::string b = walcut::repo::EncryptBytes(key, "i-cut-4/cluster.json", "", 65536, &salt);
  CHECK(Hex(b) == header + "b98ee452c01da670a517b13c149dea5f");
  std::string big(65536 + 3, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7) % 251);
  const std::string c = walcut::repo::EncryptBytes(key, "f-800/node-0.snap", big, 65536, &salt);
  REQUIRE(c.size() == 65615);
  CHECK(c.size() == walcut::repo::EncryptedSize(big.size(), 65536));
  CHECK(Hex(c.substr(44, 16)) == "7c1f52ff546e5c511074ffc2c450d611");
  CHECK(Hex(c.substr(44 + 65536, 16)) == "403486fd8729a876ac08efc73e513c2d");
  CHECK(Hex(c.substr(44 + 65536 + 16)) == "47188c8ba5b2a3928b5c47792e6c71d159917b");
  auto back = walcut::repo::DecryptBytes(key, "f-800/node-0.snap", c, "c");
  REQUIRE(back.ok());
  CHECK(*back == big);
  // A random salt otherwise: the same bytes encrypt differently each time.
  CHECK(walcut::repo::EncryptBytes(key, "x/y", "same") != walcut::repo::EncryptBytes(key, "x/y", "same"));
}

TEST_CASE(
    "repo crypt: changed, truncated, extended, reordered and another file's bytes are refused, whole and "
    "streamed",
    "[repo][crypt]") {
  Dir t;
  const RepoKey key = FixedKey(7);
  const size_t chunk = 65536;
  std::string plain(3 * chunk + 1000, '\0');
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<char>((i * 13) % 256);
  const std::string id = "i-cut-3/node-0/wal/0000000000000001.wal.zst";
  const std::string c = walcut::repo::EncryptBytes(key, id, plain, chunk);
  // The same bytes under another identity (a file moved between artifacts),
  // and under another key.
  const std::string elsewhere = "i-cut-4/node-0/wal/0000000000000001.wal.zst";
  REQUIRE(walcut::repo::DecryptBytes(key, id, c, "c").ok());
  CHECK(!walcut::repo::DecryptBytes(key, elsewhere, c, "c").ok());
  CHECK(!walcut::repo::DecryptBytes(FixedKey(8), id, c, "c").ok());
  auto forgeries = Forgeries(c, chunk, walcut::repo::EncryptBytes(key, elsewhere, plain, chunk));
  int n = 0;
  for (const auto& [what, bytes] : forgeries) {
    INFO(what);
    auto r = walcut::repo::DecryptBytes(key, id, bytes, "the file");
    CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
    CHECK(r.status().message().find("the file: ") == 0);
    const std::string in = fmt::format("{}/in-{}", t.path, n), out = fmt::format("{}/out-{}", t.path, n);
    ++n;
    Spit(in, bytes);
    walfmt::Status st = walcut::repo::DecryptFile(key, id, in, out);
    CHECK(st.code() == walfmt::ErrorCode::kCorruption);
    CHECK(!fs::exists(out));  // nothing half-decrypted is left
  }
  // The streamed round trip of a file of several 1 MiB chunks, and the same
  // forgeries at that chunk size.
  std::string large(2 * walcut::repo::kCryptChunkBytes + 77, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>((i * 31) % 253);
  Spit(t.path + "/large", large);
  REQUIRE(walcut::repo::EncryptFile(key, id, t.path + "/large", t.path + "/large.enc").ok());
  const std::string lc = Slurp(t.path + "/large.enc");
  CHECK(lc.size() == walcut::repo::EncryptedSize(large.size()));
  REQUIRE(walcut::repo::DecryptFile(key, id, t.path + "/large.enc", t.path + "/large.dec").ok());
  CHECK(Slurp(t.path + "/large.dec") == large);
  for (const auto& [what, bytes] :
       Forgeries(lc, walcut::repo::kCryptChunkBytes, walcut::repo::EncryptBytes(key, elsewhere, large))) {
    INFO("1 MiB chunks: " << what);
    const std::string in = fmt::format("{}/in-{}", t.path, n), out = fmt::format("{}/out-{}", t.path, n);
    ++n;
    Spit(in, bytes);
    CHECK(walcut::repo::DecryptFile(key, id, in, out).code() == walfmt::ErrorCode::kCorruption);
    CHECK(!fs::exists(out));
  }
}

TEST_CASE("repo crypt: key files of the wrong shape, kind or mode are refused with one clear line", "[repo][crypt]") {
  Dir t;
  const RepoKey k = FixedKey(3);
  const std::string hex = KeyFile(t.path, "hex", k);
  std::string raw(reinterpret_cast<const char*>(k.bytes.data()), k.bytes.size());
  Spit(t.path + "/raw", raw, 0400);
  Spit(t.path + "/hex-no-newline", Slurp(hex).substr(0, 64));
  for (const char* ok : {"hex", "raw", "hex-no-newline"}) {
    INFO(ok);
    auto l = walcut::repo::LoadKeyFile(t.path + "/" + ok);
    REQUIRE(l.ok());
    CHECK(l->bytes == k.bytes);
  }
  Spit(t.path + "/empty", "");
  Spit(t.path + "/short", raw.substr(0, 31));
  Spit(t.path + "/long", raw + raw + raw);
  Spit(t.path + "/huge", std::string(1 << 20, 'a'));
  Spit(t.path + "/not-hex", std::string(63, 'a') + "g\n");
  Spit(t.path + "/two-newlines", Slurp(hex).substr(0, 63) + "\n\n");
  Spit(t.path + "/open", raw, 0644);
  Spit(t.path + "/group", raw, 0640);
  fs::create_directories(t.path + "/dir");
  ::chmod((t.path + "/dir").c_str(), 0700);
  REQUIRE(::mkfifo((t.path + "/fifo").c_str(), 0600) == 0);
  const std::map<std::string, std::string> bad = {
      {"empty", "holds 0 bytes"},          {"short", "holds 31 bytes"},
      {"long", "holds 96 bytes"},          {"huge", "holds 1048576 bytes"},
      {"not-hex", "not all hex digits"},   {"two-newlines", "not all hex digits"},
      {"open", "open to group or others"}, {"group", "open to group or others"},
      {"dir", "not a regular file"},       {"fifo", "not a regular file"},
      {"missing", "cannot open"}};
  for (const auto& [name, why] : bad) {
    INFO(name);
    auto l = walcut::repo::LoadKeyFile(t.path + "/" + name);
    REQUIRE(!l.ok());
    CHECK(l.status().code() == walfmt::ErrorCode::kInvalidArgument);
    CHECK(l.status().message().find(why) != std::string::npos);
    CHECK(l.status().message().find(t.path + "/" + name + ": ") == 0);
    // Through the binary: exit 2, one line, before the repository is touched.
    auto r = Walcut("", fmt::format("snapshot list '{}/no-repo' --encrypt-key-file '{}/{}'", t.path, t.path, name));
    CHECK(r.code == 2);
    CHECK(r.err.find(why) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

TEST_CASE(
    "repo crypt: an encrypted directory repository gives the plain one's list, check, restore and expire, and "
    "holds only ciphertext",
    "[repo][crypt]") {
  Dir t;
  const std::string c = MakeRunCluster(t.path);
  const std::string plain = t.path + "/plain", enc = t.path + "/enc";
  fs::create_directories(t.path + "/tmp");
  const std::string env = fmt::format("TMPDIR='{}/tmp'", t.path);
  const std::string key = "--encrypt-key-file '" + KeyFile(t.path, "key", FixedKey(11)) + "'";
  const uint64_t latest = CreateThree("", c, plain, "");
  CHECK(CreateThree(env, c, enc, key) == latest);
  // A synthetic full served by the chain, on both.
  REQUIRE(Walcut("", fmt::format("snapshot create --repo '{}' --full --cut {}", plain, latest)).code == 0);
  auto r = Walcut(env, fmt::format("snapshot create --repo '{}' {} --full --cut {}", enc, key, latest));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);

  // Ciphertext only: every artifact file starts with the header; the marker
  // is readable and says so.
  const json marker = json::parse(Slurp(enc + "/walcut-repository.json"));
  CHECK(marker["schema"] == "walcut.repository/3");
  CHECK(marker["encryption"]["cipher"] == "aes-256-gcm");
  CHECK(marker["encryption"]["key_check"] == FixedKey(11).KeyCheck());
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(enc)) {
    const std::string rel = fs::relative(e.path(), enc).string();
    if (!e.is_regular_file() || rel == "walcut-repository.json") continue;
    INFO(rel);
    CHECK(Slurp(e.path().string()).substr(0, 8) == "WALCUTE1");
    ++files;
  }
  CHECK(files > 20);

  for (const char* cmd : {"list", "check"}) {
    auto p = Walcut("", fmt::format("snapshot {} '{}' --format json", cmd, plain));
    auto q = Walcut(env, fmt::format("snapshot {} '{}' {} --format json", cmd, enc, key));
    INFO(cmd << ": " << q.err);
    REQUIRE(q.code == 0);
    const json pj = json::parse(p.out), qj = json::parse(q.out);
    for (const char* k : {"artifacts", "restore_targets", "summary", "leftovers"}) {
      if (pj.contains(k)) CHECK(WithoutDirs(pj[k]) == WithoutDirs(qj[k]));
    }
    CHECK(qj["repo"] == enc);
  }
  r = Walcut(env, fmt::format("snapshot check '{}' {} i-cut-3 --restore", enc, key));
  CHECK(r.code == 0);

  fs::create_directories(t.path + "/out");
  for (const std::string& target : {fmt::format("i-cut-{}", latest), fmt::format("f-cut-{}", latest)}) {
    INFO(target);
    auto p = Walcut("", fmt::format("restore --repo '{}' {} --out '{}/out/p-{}'", plain, target, t.path, target));
    auto q =
        Walcut(env, fmt::format("restore --repo '{}' {} {} --out '{}/out/e-{}'", enc, key, target, t.path, target));
    INFO(q.err);
    REQUIRE(p.code == 0);
    REQUIRE(q.code == 0);
    RequireSameTree(fmt::format("{}/out/p-{}", t.path, target), fmt::format("{}/out/e-{}", t.path, target),
                    target[0] == 'i');
  }
  CHECK(Entries(t.path + "/out") == 4);  // nothing left beside OUT
  CHECK(json::parse(Slurp(fmt::format("{}/out/e-i-cut-{}/manifest.json", t.path, latest)))["repository"]["dir"] == enc);

  auto p = Walcut("", fmt::format("snapshot expire '{}' --keep-full 1 --format json", plain));
  auto q = Walcut(env, fmt::format("snapshot expire '{}' {} --keep-full 1 --format json", enc, key));
  INFO(q.err);
  REQUIRE(q.code == 0);
  CHECK(json::parse(q.out)["removed"] == json::parse(p.out)["removed"]);
  CHECK(json::parse(q.out)["removed"].size() == 3);
  const json removed = json::parse(q.out)["removed"];
  for (const auto& name : removed) CHECK(!fs::exists(enc + "/" + name.get<std::string>()));
  CHECK(Walcut(env, fmt::format("snapshot check '{}' {}", enc, key)).code == 0);
  CHECK(Entries(t.path + "/tmp") == 0);  // no plaintext left behind in TMPDIR
}

TEST_CASE(
    "repo crypt: no key, a wrong key, or a key for a plain repository: every command refuses (exit 2) and "
    "writes nothing",
    "[repo][crypt]") {
  Dir t;
  const std::string c = MakeRunCluster(t.path);
  const std::string plain = t.path + "/plain", enc = t.path + "/enc";
  fs::create_directories(t.path + "/tmp");
  fs::create_directories(t.path + "/out");
  const std::string env = fmt::format("TMPDIR='{}/tmp'", t.path);
  const std::string key = "--encrypt-key-file '" + KeyFile(t.path, "key", FixedKey(11)) + "'";
  const std::string wrong = "--encrypt-key-file '" + KeyFile(t.path, "wrong", FixedKey(12)) + "'";
  REQUIRE(Walcut("", fmt::format("snapshot create '{}' --repo '{}' --full --from full-800", c, plain)).code == 0);
  REQUIRE(Walcut(env, fmt::format("snapshot create '{}' --repo '{}' {} --full --from full-800", c, enc, key)).code ==
          0);
  const auto enc_before = Tree(enc), plain_before = Tree(plain);
  struct Case {
    std::string repo, opt, why;
  };
  const std::vector<Case> cases = {{enc, "", "the repository is encrypted (aes-256-gcm); give its key"},
                                   {enc, wrong, "wrong key"},
                                   {plain, key, "the repository is not encrypted; refusing --encrypt-key-file"}};
  for (const auto& k : cases) {
    const std::vector<std::string> cmds = {
        fmt::format("snapshot list '{}' {}", k.repo, k.opt),
        fmt::format("snapshot check '{}' {}", k.repo, k.opt),
        fmt::format("snapshot expire '{}' {} --keep-full 1", k.repo, k.opt),
        fmt::format("snapshot create '{}' --repo '{}' {} --incremental --cut 3", c, k.repo, k.opt),
        fmt::format("snapshot create '{}' --repo '{}' {} --full --from full-800 --name again", c, k.repo, k.opt),
        fmt::format("restore --repo '{}' {} --latest --out '{}/out/x'", k.repo, k.opt, t.path),
        fmt::format("restore --repo '{}' {} --latest --dry-run", k.repo, k.opt)};
    for (const auto& cmd : cmds) {
      INFO(cmd);
      auto r = Walcut(env, cmd);
      CHECK(r.code == 2);
      CHECK(r.err.find(k.why) != std::string::npos);
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      CHECK(Tree(enc) == enc_before);
      CHECK(Tree(plain) == plain_before);
      CHECK(Entries(t.path + "/out") == 0);
      CHECK(Entries(t.path + "/tmp") == 0);
    }
  }
  // export reads segments in place: an encrypted repository is refused.
  auto r = Walcut("", fmt::format("export --repo '{}' --from-cut 1 --to-cut 3 -o '{}/out/x.json'", enc, t.path));
  CHECK(r.code == 2);
  CHECK(r.err.find("the repository is encrypted") != std::string::npos);
  CHECK(Entries(t.path + "/out") == 0);

  // The library refuses the same without the CLI's check in front.
  walcut::repo::RepoLocation loc;
  loc.dir = enc;
  walcut::repo::RemoteOptions o;
  auto l = walcut::repo::ListAt(loc, o);
  CHECK(l.status().code() == walfmt::ErrorCode::kInvalidArgument);
  o.key = std::make_shared<const RepoKey>(FixedKey(12));
  l = walcut::repo::ListAt(loc, o);
  CHECK(l.status().message().find("wrong key") != std::string::npos);
  walcut::repo::CreateRequest cr;
  cr.cluster_dir = c;
  cr.repo = enc;
  cr.full = true;
  cr.from = "full-800";
  cr.name = "lib";
  CHECK(walcut::repo::CreateAt(loc, cr, o).status().message().find("wrong key") != std::string::npos);
  o.key = nullptr;
  CHECK(walcut::repo::CreateAt(loc, cr, o).status().message().find("encrypted") != std::string::npos);
  loc.dir = cr.repo = plain;
  o.key = std::make_shared<const RepoKey>(FixedKey(12));
  CHECK(walcut::repo::CreateAt(loc, cr, o).status().message().find("not encrypted") != std::string::npos);
  CHECK(Tree(enc) == enc_before);
  CHECK(Tree(plain) == plain_before);
  CHECK(Entries(t.path + "/tmp") == 0);
}

TEST_CASE(
    "repo crypt: a changed byte in each kind of file, a truncated file and a file of another artifact are "
    "caught by check (exit 1) and by restore (no OUT)",
    "[repo][crypt]") {
  Dir t;
  const std::string c = MakeRunCluster(t.path);
  const std::string enc = t.path + "/enc";
  fs::create_directories(t.path + "/tmp");
  const std::string env = fmt::format("TMPDIR='{}/tmp'", t.path);
  const std::string key = "--encrypt-key-file '" + KeyFile(t.path, "key", FixedKey(11)) + "'";
  const uint64_t latest = CreateThree(env, c, enc, key);
  const std::string last = fmt::format("i-cut-{}", latest);
  std::string segment;
  for (const auto& e : fs::directory_iterator(enc + "/i-cut-3/node-1/wal")) segment = e.path().filename().string();
  REQUIRE(!segment.empty());
  struct Damage {
    std::string what, artifact, file;
    int how;  // 0: a flipped byte, 1: truncated by 7 bytes, 2: replaced by another artifact's file
  };
  const std::vector<Damage> damages = {
      {"manifest", "i-cut-3", "manifest.json", 0},
      {"cluster.json", "i-cut-3", "cluster.json", 0},
      {"snapshot", "f-full-800", "node-0.snap", 0},
      {"segment", "i-cut-3", "node-1/wal/" + segment, 0},
      {"restore plan", "i-cut-3", "node-2/restore-plan.json", 0},
      {"truncated segment", "i-cut-3", "node-1/wal/" + segment, 1},
      {"full's manifest truncated", "f-full-800", "manifest.json", 1},
      {"plan of another artifact", "i-cut-3", "node-0/restore-plan.json", 2},
      {"cluster.json of another artifact", "i-cut-3", "cluster.json", 2},
  };
  for (const auto& d : damages) {
    INFO(d.what);
    const std::string copy = t.path + "/copy";
    fs::remove_all(copy);
    fs::copy(enc, copy, fs::copy_options::recursive);
    const std::string path = copy + "/" + d.artifact + "/" + d.file;
    std::string bytes = Slurp(path);
    if (d.how == 0) bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x04);
    if (d.how == 1) bytes.resize(bytes.size() - 7);
    if (d.how == 2) bytes = Slurp(copy + "/" + last + "/" + d.file);
    Spit(path, bytes, 0644);
    auto r = Walcut(env, fmt::format("snapshot check '{}' {} --format json", copy, key));
    INFO(r.out << r.err);
    CHECK(r.code == 1);
    bool named = false;
    const json report = json::parse(r.out);
    for (const auto& item : report["items"]) {
      for (const auto& f : item["findings"]) {
        named = named || (f["check"] == "authentication" &&
                          f["message"].get<std::string>().find(copy + "/" + d.artifact + "/" + d.file) == 0);
      }
    }
    CHECK(named);
    fs::remove_all(t.path + "/out");
    fs::create_directories(t.path + "/out");
    r = Walcut(env, fmt::format("restore --repo '{}' {} {} --out '{}/out/x'", copy, key, last, t.path));
    CHECK(r.code == 1);
    CHECK(r.err.find("fails authentication") != std::string::npos);
    CHECK(Entries(t.path + "/out") == 0);
    CHECK(Entries(t.path + "/tmp") == 0);
  }
}

TEST_CASE(
    "repo crypt: an encrypted repository on the S3 test server: ciphertext in the bucket, the directory's "
    "results, refusals and tampering",
    "[repo][crypt][s3]") {
  if (!walcut::test::HavePython3()) FAIL("this test needs python3 (tests/s3_server.py)");
  Dir t;
  walcut::test::S3TestServer server({"--bucket", "crypt", "--max-seconds", "300"});
  REQUIRE(server.error.empty());
  const std::string endpoint = server.endpoint();
  const std::map<std::string, std::string> vars = {{"AWS_ACCESS_KEY_ID", "AKIDWALCUTTEST"},
                                                   {"AWS_SECRET_ACCESS_KEY", "walcut-test-secret"},
                                                   {"AWS_ENDPOINT_URL", endpoint}};
  auto config = walcut::repo::ResolveS3Config({}, [vars](const std::string& n) -> std::optional<std::string> {
    auto it = vars.find(n);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
  REQUIRE(config.ok());
  auto client = walcut::repo::S3Client::Create(std::move(config.value()));
  REQUIRE(client.ok());
  fs::create_directories(t.path + "/tmp");
  fs::create_directories(t.path + "/out");
  const std::string env = fmt::format(
      "env -u AWS_SESSION_TOKEN -u AWS_PROFILE -u AWS_ENDPOINT_URL_S3 AWS_ACCESS_KEY_ID=AKIDWALCUTTEST "
      "AWS_SECRET_ACCESS_KEY=walcut-test-secret AWS_REGION=us-east-1 AWS_ENDPOINT_URL={} TMPDIR='{}/tmp'",
      endpoint, t.path);
  const std::string c = MakeRunCluster(t.path);
  const std::string key = "--encrypt-key-file '" + KeyFile(t.path, "key", FixedKey(21)) + "'";
  const std::string wrong = "--encrypt-key-file '" + KeyFile(t.path, "wrong", FixedKey(22)) + "'";
  const std::string url = "s3://crypt/r", dir = t.path + "/enc";
  const uint64_t latest = CreateThree(env, c, url, key);
  CHECK(CreateThree(env, c, dir, key) == latest);

  auto objects = (*client)->ListObjects("crypt", "r/");
  REQUIRE(objects.ok());
  size_t n = 0;
  for (const auto& o : objects->objects) {
    if (o.key == "r/walcut-repository.json") {
      auto m = (*client)->GetObject("crypt", o.key);
      REQUIRE(m.ok());
      CHECK(json::parse(*m)["schema"] == "walcut.repository/3");
      continue;
    }
    INFO(o.key);
    auto bytes = (*client)->GetObject("crypt", o.key);
    REQUIRE(bytes.ok());
    CHECK(bytes->substr(0, 8) == "WALCUTE1");
    ++n;
  }
  CHECK(n > 20);

  auto s = Walcut(env, fmt::format("snapshot list {} {} --format json", url, key));
  auto d = Walcut(env, fmt::format("snapshot list '{}' {} --format json", dir, key));
  INFO(s.err);
  REQUIRE(s.code == 0);
  CHECK(WithoutDirs(json::parse(s.out)["artifacts"]) == WithoutDirs(json::parse(d.out)["artifacts"]));
  s = Walcut(env, fmt::format("snapshot check {} {} --format json", url, key));
  CHECK(s.code == 0);
  s = Walcut(env, fmt::format("restore --repo {} {} --latest --out '{}/out/s3'", url, key, t.path));
  REQUIRE(s.code == 0);
  d = Walcut(env, fmt::format("restore --repo '{}' {} --latest --out '{}/out/dir'", dir, key, t.path));
  REQUIRE(d.code == 0);
  RequireSameTree(t.path + "/out/dir", t.path + "/out/s3");
  fs::remove_all(t.path + "/out");
  fs::create_directories(t.path + "/out");

  const size_t objects_before = objects->objects.size();
  for (const std::string& opt : {std::string(), wrong}) {
    for (const std::string& cmd :
         {fmt::format("snapshot list {} {}", url, opt), fmt::format("snapshot check {} {}", url, opt),
          fmt::format("snapshot expire {} {} --keep-full 1", url, opt),
          fmt::format("snapshot create '{}' --repo {} {} --full --from full-800 --name again", c, url, opt),
          fmt::format("restore --repo {} {} --latest --out '{}/out/x'", url, opt, t.path)}) {
      INFO(cmd);
      auto r = Walcut(env, cmd);
      CHECK(r.code == 2);
      CHECK(r.err.find(opt.empty() ? "is encrypted" : "wrong key") != std::string::npos);
      CHECK(Entries(t.path + "/out") == 0);
    }
  }
  CHECK((*client)->ListObjects("crypt", "r/")->objects.size() == objects_before);  // no lock, no object left
  REQUIRE((*client)->PutObject("crypt", "p/walcut-repository.json", walcut::repo::PlainMarkerText()).ok());
  auto r = Walcut(env, fmt::format("snapshot list s3://crypt/p {}", key));
  CHECK(r.code == 2);
  CHECK(r.err.find("not encrypted") != std::string::npos);

  // A changed byte of a segment object: check finds it, restore writes no OUT.
  std::string victim;
  for (const auto& o : objects->objects) {
    if (o.key.find("r/i-cut-3/node-1/wal/") == 0) victim = o.key;
  }
  REQUIRE(!victim.empty());
  auto got = (*client)->GetObject("crypt", victim);
  REQUIRE(got.ok());
  std::string bytes = *got;
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x20);
  REQUIRE((*client)->PutObject("crypt", victim, bytes).ok());
  r = Walcut(env, fmt::format("snapshot check {} {}", url, key));
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.out.find("fails authentication") != std::string::npos);
  r = Walcut(env, fmt::format("restore --repo {} {} --latest --out '{}/out/x'", url, key, t.path));
  CHECK(r.code == 1);
  CHECK(r.err.find(url + "/i-cut-3/node-1/wal/") != std::string::npos);
  CHECK(Entries(t.path + "/out") == 0);
  CHECK(Entries(t.path + "/tmp") == 0);
}

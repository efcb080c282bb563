// The S3 client (repo/s3_client.h) against the S3 test server
// (tests/s3_server.py, which checks every request's SigV4 signature): each
// operation, listing pages, conditional creates racing, multipart uploads,
// retries under injected 503/500/resets/stalls and their bound, 4xx that are
// not retried, credentials from the environment and the shared file, URL and
// configuration refusals, and hostile XML answers. The tests that need the
// server skip (with a message) only when python3 is absent.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <barrier>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "repo/curl_api.h"
#include "repo/s3_client.h"
#include "repo/s3_config.h"
#include "repo/s3_store.h"
#include "repo/s3_xml.h"
#include "s3_test_server.h"
#include "scratch_dir.h"

namespace {

using walcut::repo::ParseS3Url;
using walcut::repo::ParseSharedCredentials;
using walcut::repo::ParseXml;
using walcut::repo::ResolveS3Config;
using walcut::repo::S3Client;
using walcut::repo::S3Config;
using walcut::repo::S3Env;
using walcut::repo::S3Options;
using walcut::repo::S3Part;
using walcut::repo::S3PutMode;
using walcut::repo::S3PutOutcome;
using walcut::test::S3TestServer;
using walfmt::ErrorCode;

constexpr const char* kKey = "AKIDWALCUTTEST";
constexpr const char* kSecret = "walcut-test-secret";

S3Env MapEnv(std::map<std::string, std::string> m) {
  return [m = std::move(m)](const std::string& name) -> std::optional<std::string> {
    auto it = m.find(name);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

// A client of `server` with fast retries (1-20 ms, fixed seed).
std::unique_ptr<S3Client> ClientOf(const S3TestServer& server, const std::string& secret = kSecret,
                                   int max_attempts = 5, const std::string& token = "") {
  REQUIRE(server.error.empty());
  std::map<std::string, std::string> env = {
      {"AWS_ACCESS_KEY_ID", kKey}, {"AWS_SECRET_ACCESS_KEY", secret}, {"AWS_ENDPOINT_URL", server.endpoint()}};
  if (!token.empty()) env["AWS_SESSION_TOKEN"] = token;
  auto config = ResolveS3Config(S3Options{}, MapEnv(env));
  REQUIRE(config.ok());
  config->retry = {max_attempts, 1, 20, 42};
  config->request_timeout_ms = 1500;
  auto client = S3Client::Create(std::move(config.value()));
  REQUIRE(client.ok());
  return std::move(client.value());
}

#define REQUIRE_PYTHON3()                                                  \
  if (!walcut::test::HavePython3()) {                                      \
    WARN("python3 is not installed: skipping the S3 test server's tests"); \
    return;                                                                \
  }

std::string Bytes(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
  return s;
}

}  // namespace

TEST_CASE("s3: libcurl is loaded when a client is made, and a missing one is a one-line error", "[s3]") {
  using walcut::repo::CurlApi;
  using walcut::repo::LoadCurlFrom;
  CurlApi api{};
  // Absent: the soname and the loader's reason.
  walfmt::Status st = LoadCurlFrom("libwalcut-no-such-curl.so.4", api);
  REQUIRE(st.code() == walfmt::ErrorCode::kInternal);
  CHECK(st.message() ==
        "S3 needs libcurl (libwalcut-no-such-curl.so.4), which cannot be loaded: libwalcut-no-such-curl.so.4: cannot "
        "open shared object file: No such file or directory");
  CHECK(st.message().find('\n') == std::string::npos);
  CHECK(api.easy_init == nullptr);
  // A library that is not libcurl: the first function it lacks.
  st = LoadCurlFrom("libz.so.1", api);
  REQUIRE(st.code() == walfmt::ErrorCode::kInternal);
  CHECK(st.message() == "S3 needs libcurl: libz.so.1 has no curl_global_init");
  CHECK(api.easy_init == nullptr);
  // The real one: every function, and a handle that works.
  st = LoadCurlFrom(walcut::repo::kLibcurlSoname, api);
  REQUIRE(st.ok());
  for (const void* fn :
       {reinterpret_cast<const void*>(api.global_init), reinterpret_cast<const void*>(api.easy_init),
        reinterpret_cast<const void*>(api.easy_setopt), reinterpret_cast<const void*>(api.easy_perform),
        reinterpret_cast<const void*>(api.easy_getinfo), reinterpret_cast<const void*>(api.easy_reset),
        reinterpret_cast<const void*>(api.easy_cleanup), reinterpret_cast<const void*>(api.easy_strerror),
        reinterpret_cast<const void*>(api.slist_append), reinterpret_cast<const void*>(api.slist_free_all)}) {
    CHECK(fn != nullptr);
  }
  CURL* h = api.easy_init();
  REQUIRE(h != nullptr);
  CHECK(api.easy_setopt(h, CURLOPT_URL, "http://127.0.0.1:1/") == CURLE_OK);
  api.easy_cleanup(h);
  CHECK(std::string(api.easy_strerror(CURLE_COULDNT_CONNECT)) == "Couldn't connect to server");
}

TEST_CASE("s3: s3:// URLs are parsed, malformed ones refused with the reason", "[s3]") {
  auto u = ParseS3Url("s3://my-bucket/backups/prod");
  REQUIRE(u.ok());
  CHECK(u->bucket == "my-bucket");
  CHECK(u->prefix == "backups/prod/");
  CHECK(ParseS3Url("s3://my-bucket")->prefix.empty());
  CHECK(ParseS3Url("s3://my-bucket/")->prefix.empty());
  CHECK(ParseS3Url("s3://a.b-c/x/")->prefix == "x/");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"http://bucket/x", "must start with s3://"},
      {"s3://", "no bucket name"},
      {"s3:///prefix", "no bucket name"},
      {"s3://ab", "3 to 63 characters"},
      {"s3://" + std::string(64, 'a'), "3 to 63 characters"},
      {"s3://My_Bucket/x", "only lowercase letters"},
      {"s3://-bucket/x", "starts and ends with a letter or digit"},
      {"s3://a..b/x", "no '..'"},
      {"s3://bucket//x", "starts with '/'"},
      {"s3://bucket/a//b", "empty path segment"},
      {"s3://bucket/a/../b", "'..' path segment"},
      {"s3://bucket/./b", "'..' path segment"},
      {"s3://bucket/a\nb", "control character"},
  };
  for (const auto& [url, why] : bad) {
    INFO(url);
    auto r = ParseS3Url(url);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains(why) && Catch::Contains("repository URL"));
  }
}

TEST_CASE("s3: configuration from options and the environment, errors name what is missing", "[s3]") {
  const auto env = MapEnv({{"AWS_ACCESS_KEY_ID", "id"},
                           {"AWS_SECRET_ACCESS_KEY", "sk"},
                           {"AWS_SESSION_TOKEN", "tok"},
                           {"AWS_DEFAULT_REGION", "eu-west-1"}});
  auto c = ResolveS3Config(S3Options{}, env);
  REQUIRE(c.ok());
  CHECK(c->region == "eu-west-1");
  CHECK(c->endpoint == "https://s3.eu-west-1.amazonaws.com");
  CHECK_FALSE(c->path_style);
  CHECK(c->credentials.access_key_id == "id");
  CHECK(c->credentials.session_token == "tok");
  CHECK(c->credentials.source == "environment");
  CHECK(walcut::repo::S3ObjectUrl(*c, "bkt", "a b/c+d") == "https://bkt.s3.eu-west-1.amazonaws.com/a%20b/c%2Bd");

  S3Options o;
  o.endpoint = "http://127.0.0.1:9000/";
  o.region = "us-west-2";
  c = ResolveS3Config(o, MapEnv({{"AWS_ACCESS_KEY_ID", "id"},
                                 {"AWS_SECRET_ACCESS_KEY", "sk"},
                                 {"AWS_REGION", "x-1"},
                                 {"AWS_ENDPOINT_URL", "http://other:1"}}));
  REQUIRE(c.ok());
  CHECK(c->endpoint == "http://127.0.0.1:9000");
  CHECK(c->region == "us-west-2");
  CHECK(c->path_style);
  CHECK(walcut::repo::S3ObjectUrl(*c, "bkt", "k/~x") == "http://127.0.0.1:9000/bkt/k/~x");
  c = ResolveS3Config(S3Options{}, MapEnv({{"AWS_ACCESS_KEY_ID", "id"},
                                           {"AWS_SECRET_ACCESS_KEY", "sk"},
                                           {"AWS_ENDPOINT_URL", "http://minio:9000"}}));
  REQUIRE(c.ok());
  CHECK(c->endpoint == "http://minio:9000");
  CHECK(c->region == "us-east-1");

  const std::vector<std::tuple<std::map<std::string, std::string>, std::string, std::string>> bad = {
      {{{"AWS_ACCESS_KEY_ID", "id"}}, "", "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"},
      {{{"AWS_SECRET_ACCESS_KEY", "sk"}}, "", "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"},
      {{}, "", "neither AWS_SHARED_CREDENTIALS_FILE nor HOME is set"},
      {{{"HOME", "/nonexistent-home"}}, "", "/nonexistent-home/.aws/credentials cannot be read"},
      {{{"AWS_ACCESS_KEY_ID", "i"}, {"AWS_SECRET_ACCESS_KEY", "s"}}, "ftp://x", "--s3-endpoint: S3 endpoint 'ftp://x'"},
      {{{"AWS_ACCESS_KEY_ID", "i"}, {"AWS_SECRET_ACCESS_KEY", "s"}, {"AWS_ENDPOINT_URL", "http://h/path"}},
       "",
       "AWS_ENDPOINT_URL: S3 endpoint 'http://h/path' must be scheme://host[:port]"},
      {{{"AWS_ACCESS_KEY_ID", "i"}, {"AWS_SECRET_ACCESS_KEY", "s"}, {"AWS_REGION", "US East"}}, "", "S3 region"},
  };
  for (const auto& [vars, endpoint, why] : bad) {
    INFO(why);
    S3Options opt;
    opt.endpoint = endpoint;
    auto r = ResolveS3Config(opt, MapEnv(vars));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains(why));
  }
}

TEST_CASE("s3: credentials from the shared credentials file and its profiles", "[s3]") {
  walcut::test::ScratchDir dir("s3cred");
  std::filesystem::create_directories(dir.path);
  const std::string file = (dir.path / "credentials").string();
  std::ofstream(file) << "# comment\n[default]\naws_access_key_id = DEF\naws_secret_access_key=defsecret\n\n"
                         "[ci]\n; another\naws_access_key_id=CI\n aws_secret_access_key = ci secret \n"
                         "aws_session_token = citoken\n[broken]\naws_access_key_id = X\n";
  auto c = ResolveS3Config(S3Options{}, MapEnv({{"AWS_SHARED_CREDENTIALS_FILE", file}}));
  REQUIRE(c.ok());
  CHECK(c->credentials.access_key_id == "DEF");
  CHECK(c->credentials.secret_access_key == "defsecret");
  CHECK(c->credentials.session_token.empty());
  CHECK(c->credentials.source == file + " [profile default]");
  c = ResolveS3Config(S3Options{}, MapEnv({{"AWS_SHARED_CREDENTIALS_FILE", file}, {"AWS_PROFILE", "ci"}}));
  REQUIRE(c.ok());
  CHECK(c->credentials.access_key_id == "CI");
  CHECK(c->credentials.secret_access_key == "ci secret");
  CHECK(c->credentials.session_token == "citoken");
  // $HOME/.aws/credentials without AWS_SHARED_CREDENTIALS_FILE; an explicit profile wins over AWS_PROFILE.
  std::filesystem::create_directories(dir.path / ".aws");
  std::filesystem::copy_file(file, dir.path / ".aws" / "credentials");
  S3Options o;
  o.profile = "ci";
  c = ResolveS3Config(o, MapEnv({{"HOME", dir.path.string()}, {"AWS_PROFILE", "default"}}));
  REQUIRE(c.ok());
  CHECK(c->credentials.access_key_id == "CI");
  // The environment's keys win over the file.
  c = ResolveS3Config(
      S3Options{},
      MapEnv({{"AWS_SHARED_CREDENTIALS_FILE", file}, {"AWS_ACCESS_KEY_ID", "E"}, {"AWS_SECRET_ACCESS_KEY", "e"}}));
  REQUIRE(c.ok());
  CHECK(c->credentials.access_key_id == "E");

  auto r = ResolveS3Config(S3Options{}, MapEnv({{"AWS_SHARED_CREDENTIALS_FILE", file}, {"AWS_PROFILE", "nope"}}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "no S3 credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set, and " +
                                    file + " has no profile [nope]");
  r = ResolveS3Config(S3Options{}, MapEnv({{"AWS_SHARED_CREDENTIALS_FILE", file}, {"AWS_PROFILE", "broken"}}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == file + ", profile [broken]: no aws_secret_access_key");
  auto p = ParseSharedCredentials("[default]\nno equals sign\n", "F", "default");
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().message() == "F:2: expected 'key = value'");
  p = ParseSharedCredentials("[default\n", "F", "default");
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().message() == "F:1: a section line without ']'");
}

TEST_CASE("s3: the XML reader decodes references and refuses what S3 never sends", "[s3]") {
  auto x = ParseXml(
      "<?xml version=\"1.0\"?>\n<!-- c --><s3:R xmlns:s3=\"u\"><K a='>'>a&amp;b&lt;&#65;&#x42;&#x20AC;</K><E/></s3:R>");
  REQUIRE(x.ok());
  CHECK(x->name == "R");
  CHECK(x->ChildText("K") == "a&b<AB\xE2\x82\xAC");
  CHECK(x->Child("E") != nullptr);
  CHECK(x->Child("Nope") == nullptr);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "no root element"},
      {"text", "no root element"},
      {"<a>", "element <a> is not closed"},
      {"<a></b>", "</b> closes <a>"},
      {"<a>&bogus;</a>", "unknown entity '&bogus;'"},
      {"<a>&#0;</a>", "U+0 or a surrogate"},
      {"<a>&#xD800;</a>", "U+0 or a surrogate"},
      {"<a>&#xFFFFFFFF;</a>", "beyond U+10FFFF"},
      {"<a>&#12a;</a>", "bad digit"},
      {"<a>& b</a>", "without a reference"},
      {"<!DOCTYPE a><a/>", "DOCTYPE"},
      {"<a><![CDATA[x]]></a>", "CDATA"},
      {"<a/><b/>", "content after the root element"},
      {std::string(100, '<'), "expected a name"},
      {"<a b='x>", "a tag is not closed"},
  };
  for (const auto& [doc, why] : bad) {
    INFO(doc);
    auto r = ParseXml(doc);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::StartsWith("malformed XML at byte") && Catch::Contains(why));
  }
  std::string deep;
  for (int i = 0; i < 17; ++i) deep += "<a>";
  CHECK_THAT(ParseXml(deep).status().message(), Catch::Contains("nested deeper than 16"));
  std::string many = "<a>";
  for (int i = 0; i < 11; ++i) many += "<b/>";
  CHECK_THAT(ParseXml(many + "</a>", {1 << 20, 16, 10}).status().message(), Catch::Contains("more than 10 elements"));
  CHECK_THAT(ParseXml("<a/>  ", {4, 16, 10}).status().message(), Catch::Contains("larger than 4 bytes"));
  uint64_t v = 0;
  CHECK(walcut::repo::ParseXmlUint("18446744073709551615", v));
  CHECK(v == UINT64_MAX);
  CHECK_FALSE(walcut::repo::ParseXmlUint("18446744073709551616", v));
  CHECK_FALSE(walcut::repo::ParseXmlUint("-1", v));
  CHECK_FALSE(walcut::repo::ParseXmlUint("", v));
}

TEST_CASE("s3: an upload's file range is mapped at any offset, and a short or unreadable file is an error", "[s3]") {
  walcut::test::ScratchDir dir("s3-file-range");
  std::filesystem::create_directories(dir.path);
  const std::string path = (dir.path / "f").string();
  const std::string data = Bytes(3 * 4096 + 123, 7);
  {
    std::ofstream out(path, std::ios::binary);
    out << data;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  for (const auto& [off, len] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, data.size()}, {1, 4096}, {4095, 2}, {4096, 4096}, {5000, data.size() - 5000}, {data.size() - 1, 1}}) {
    INFO("offset " << off << " length " << len);
    walcut::repo::FileRange r;
    REQUIRE(r.Open(fd, off, len, path).ok());
    CHECK(r.view() == std::string_view(data).substr(off, len));
  }
  walcut::repo::FileRange empty;
  REQUIRE(empty.Open(fd, 10, 0, path).ok());
  CHECK(empty.view().empty());
  // Past the end of the file: an error naming it, never a SIGBUS.
  walcut::repo::FileRange past;
  auto st = past.Open(fd, 4096, data.size(), path);
  CHECK(st.code() == ErrorCode::kIo);
  CHECK(st.message() == path + ": shorter than expected (changed while uploading?)");
  ::close(fd);
  // A descriptor that cannot be mapped for reading (write-only): read instead, which fails the same way.
  const int wo = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(wo >= 0);
  walcut::repo::FileRange unreadable;
  st = unreadable.Open(wo, 0, 100, path);
  ::close(wo);
  CHECK(st.code() == ErrorCode::kIo);
  CHECK(st.message() == path + ": cannot read: Bad file descriptor");
}

TEST_CASE("s3: put, get, a byte range, head, delete", "[s3]") {
  REQUIRE_PYTHON3();
  S3TestServer server;
  auto s3 = ClientOf(server);
  const std::string data = Bytes(100000, 1);
  const std::string key = "dir/a key+with=odd&chars~%/\xC3\xA9.bin";
  REQUIRE(s3->PutObject("test", key, data).value() == S3PutOutcome::kCreated);
  CHECK(s3->GetObject("test", key).value() == data);
  CHECK(s3->GetObjectRange("test", key, 1000, 5000).value() == data.substr(1000, 5000));
  CHECK(s3->GetObjectRange("test", key, 99999, 1).value() == data.substr(99999));
  auto head = s3->HeadObject("test", key);
  REQUIRE(head.ok());
  CHECK(head->size == 100000);
  CHECK(head->etag.size() == 34);  // "md5"
  // Overwrite (kOverwrite), an empty object.
  REQUIRE(s3->PutObject("test", key, "").ok());
  CHECK(s3->GetObject("test", key).value().empty());
  CHECK(s3->HeadObject("test", key)->size == 0);
  REQUIRE(s3->PutObject("test", key, data).ok());

  auto past = s3->GetObjectRange("test", key, 99990, 20);
  REQUIRE_FALSE(past.ok());
  CHECK(past.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(past.status().message(), Catch::Contains("bytes 99990-100009 are beyond the object's end"));
  past = s3->GetObjectRange("test", key, 100000, 1);
  REQUIRE_FALSE(past.ok());
  CHECK_THAT(past.status().message(), Catch::Contains("(HTTP 416)"));

  // The same range written into a file at its offset, as it arrives.
  walcut::test::ScratchDir dir("s3-range-file");
  std::filesystem::create_directories(dir.path);
  const std::string path = (dir.path / "piece").string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(s3->GetObjectRangeToFile("test", key, 1000, 5000, fd, path).ok());
  REQUIRE(s3->GetObjectRangeToFile("test", key, 99999, 1, fd, path).ok());
  std::string got(100000, '\0');
  REQUIRE(::pread(fd, got.data(), got.size(), 0) == 100000);
  CHECK(got.substr(1000, 5000) == data.substr(1000, 5000));
  CHECK(got.substr(99999) == data.substr(99999));
  CHECK(got.substr(0, 1000) == std::string(1000, '\0'));
  // An error's body is never written into the file.
  auto missing = s3->GetObjectRangeToFile("test", "missing", 0, 10, fd, path);
  CHECK(missing.code() == ErrorCode::kNotFound);
  CHECK(::lseek(fd, 0, SEEK_END) == 100000);
  REQUIRE(::pread(fd, got.data(), got.size(), 0) == 100000);
  CHECK(got.substr(0, 1000) == std::string(1000, '\0'));
  CHECK_THAT(s3->GetObjectRangeToFile("test", key, 99990, 20, fd, path).message(),
             Catch::Contains("bytes 99990-100009 are beyond the object's end"));
  ::close(fd);
  // A file that cannot be written: the write's error, naming the file.
  const int ro = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(ro >= 0);
  auto bad = s3->GetObjectRangeToFile("test", key, 0, 100, ro, path);
  ::close(ro);
  CHECK(bad.code() == ErrorCode::kIo);
  CHECK_THAT(bad.message(), Catch::Contains(path + ": cannot write: Bad file descriptor"));

  REQUIRE(s3->DeleteObject("test", key).ok());
  REQUIRE(s3->DeleteObject("test", key).ok());  // deleting nothing is fine, as on S3
  auto gone = s3->HeadObject("test", key);
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.status().code() == ErrorCode::kNotFound);
  auto get = s3->GetObject("test", "missing");
  REQUIRE_FALSE(get.ok());
  CHECK(get.status().code() == ErrorCode::kNotFound);
  CHECK(get.status().message() ==
        "s3://test/missing: GET: HTTP 404 NoSuchKey: The specified key does not exist. (1 attempt)");
  auto nobucket = s3->PutObject("nosuchbucket", "k", "x");
  REQUIRE_FALSE(nobucket.ok());
  CHECK_THAT(nobucket.status().message(), Catch::StartsWith("s3://nosuchbucket/k: PUT: HTTP 404 NoSuchBucket"));
  // Larger than curl's 1 MiB threshold for Expect: 100-continue.
  const std::string big = Bytes(3 << 20, 9);
  REQUIRE(s3->PutObject("test", "big", big, S3PutMode::kCreateOnly).value() == S3PutOutcome::kCreated);
  CHECK(s3->GetObject("test", "big").value() == big);
  CHECK(s3->GetObjectRange("test", "big", 1 << 20, 1 << 20).value() == big.substr(1 << 20, 1 << 20));
  CHECK(s3->stats().retries == 0);
}

TEST_CASE("s3: listings go through every page, with prefix and delimiter", "[s3]") {
  REQUIRE_PYTHON3();
  S3TestServer server;
  auto s3 = ClientOf(server);
  std::vector<std::string> keys;
  for (int i = 0; i < 23; ++i) keys.push_back(fmt::format("p/{:02}", i));
  for (int d = 0; d < 5; ++d) {
    for (int i = 0; i < 3; ++i) keys.push_back(fmt::format("p/dir{}/{}", d, i));
  }
  keys.emplace_back("q/other");
  for (const auto& k : keys) REQUIRE(s3->PutObject("test", k, k).ok());
  const uint64_t before = s3->stats().requests;
  auto all = s3->ListObjects("test", "p/", "", 4);
  REQUIRE(all.ok());
  REQUIRE(all->objects.size() == 38);
  CHECK(s3->stats().requests - before == 10);  // 38 keys, 4 a page
  for (size_t i = 0; i < all->objects.size(); ++i) {
    CHECK(all->objects[i].key == keys[i]);
    CHECK(all->objects[i].size == all->objects[i].key.size());
  }
  CHECK(all->common_prefixes.empty());
  auto dirs = s3->ListObjects("test", "p/", "/", 3);
  REQUIRE(dirs.ok());
  CHECK(dirs->objects.size() == 23);
  CHECK(dirs->common_prefixes == std::vector<std::string>{"p/dir0/", "p/dir1/", "p/dir2/", "p/dir3/", "p/dir4/"});
  auto none = s3->ListObjects("test", "zzz/");
  REQUIRE(none.ok());
  CHECK(none->objects.empty());
  CHECK(s3->ListObjects("test", "")->objects.size() == 39);
}

TEST_CASE("s3: conditional create: of two concurrent creators exactly one wins", "[s3]") {
  REQUIRE_PYTHON3();
  S3TestServer server;
  auto s3 = ClientOf(server);
  for (int round = 0; round < 20; ++round) {
    const std::string key = fmt::format("locks/lock-{}", round);
    std::array<walfmt::Result<S3PutOutcome>, 2> out = {walfmt::Status::Internal("unset"),
                                                       walfmt::Status::Internal("unset")};
    std::barrier start(2);
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        out[t] = s3->PutObject("test", key, fmt::format("owner {}", t), S3PutMode::kCreateOnly);
      });
    }
    for (auto& t : threads) t.join();
    INFO("round " << round);
    REQUIRE(out[0].ok());
    REQUIRE(out[1].ok());
    const int winners = (*out[0] == S3PutOutcome::kCreated) + (*out[1] == S3PutOutcome::kCreated);
    REQUIRE(winners == 1);
    const int winner = *out[0] == S3PutOutcome::kCreated ? 0 : 1;
    CHECK(*out[1 - winner] == S3PutOutcome::kAlreadyExists);
    CHECK(s3->GetObject("test", key).value() == fmt::format("owner {}", winner));
  }
  // A plain PUT still overwrites; a create-only one on an existing key does not.
  CHECK(s3->PutObject("test", "locks/lock-0", "mine", S3PutMode::kCreateOnly).value() == S3PutOutcome::kAlreadyExists);
  CHECK(s3->GetObject("test", "locks/lock-0").value() != "mine");
}

TEST_CASE("s3: a create whose first attempt was applied but not answered still learns it won", "[s3]") {
  REQUIRE_PYTHON3();
  // Every 2nd request is done and then its connection reset: request 1 (HEAD)
  // passes, request 2 (the create) stores the lock and gets no answer, the
  // retry (3) gets 412, and the read back (4, reset; 5) finds our bytes.
  S3TestServer server({"--drop-after-commit-every", "2"});
  auto s3 = ClientOf(server);
  CHECK(s3->HeadObject("test", "lock").status().code() == ErrorCode::kNotFound);
  auto won = s3->PutObject("test", "lock", "token-A", S3PutMode::kCreateOnly);
  REQUIRE(won.ok());
  CHECK(*won == S3PutOutcome::kCreated);
  CHECK(s3->GetObject("test", "lock").value() == "token-A");
  // Another creator (different bytes) in the same situation loses.
  CHECK(s3->HeadObject("test", "lock")->size == 7);
  auto lost = s3->PutObject("test", "lock", "token-B", S3PutMode::kCreateOnly);
  REQUIRE(lost.ok());
  CHECK(*lost == S3PutOutcome::kAlreadyExists);
}

TEST_CASE("s3: multipart upload: parts in any order, listed while open, completed, aborted", "[s3]") {
  REQUIRE_PYTHON3();
  S3TestServer server({"--min-part-size", "1000"});
  auto s3 = ClientOf(server);
  const std::string data = Bytes(2500, 3);
  auto id = s3->CreateMultipartUpload("test", "big/object");
  REQUIRE(id.ok());
  auto other = s3->CreateMultipartUpload("test", "big/left-over");
  REQUIRE(other.ok());
  auto p3 = s3->UploadPart("test", "big/object", *id, 3, std::string_view(data).substr(2000));
  auto p1 = s3->UploadPart("test", "big/object", *id, 1, std::string_view(data).substr(0, 1000));
  auto p2 = s3->UploadPart("test", "big/object", *id, 2, std::string_view(data).substr(1000, 1000));
  REQUIRE((p1.ok() && p2.ok() && p3.ok()));
  CHECK(p2->part_number == 2);
  auto open = s3->ListMultipartUploads("test", "big/", 1);
  REQUIRE(open.ok());
  REQUIRE(open->size() == 2);
  CHECK((*open)[0].key == "big/left-over");
  CHECK((*open)[0].upload_id == *other);
  CHECK((*open)[1].upload_id == *id);
  CHECK_FALSE((*open)[1].initiated.empty());
  CHECK(s3->HeadObject("test", "big/object").status().code() == ErrorCode::kNotFound);
  REQUIRE(s3->CompleteMultipartUpload("test", "big/object", *id, {*p1, *p2, *p3}).ok());
  CHECK(s3->GetObject("test", "big/object").value() == data);
  CHECK(s3->HeadObject("test", "big/object")->etag.ends_with("-3\""));
  REQUIRE(s3->AbortMultipartUpload("test", "big/left-over", *other).ok());
  CHECK(s3->ListMultipartUploads("test", "")->empty());

  // Refusals: a part number out of range, parts out of order, a part too small, an unknown upload.
  CHECK(s3->UploadPart("test", "k", "id", 0, "x").status().code() == ErrorCode::kInvalidArgument);
  CHECK(s3->UploadPart("test", "k", "id", 10001, "x").status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(s3->CompleteMultipartUpload("test", "k", "id", {*p2, *p1}).message(), Catch::Contains("ascending"));
  auto small = s3->CreateMultipartUpload("test", "small");
  REQUIRE(small.ok());
  auto s1 = s3->UploadPart("test", "small", *small, 1, "tiny");
  auto s2 = s3->UploadPart("test", "small", *small, 2, "tiny");
  REQUIRE((s1.ok() && s2.ok()));
  CHECK_THAT(s3->CompleteMultipartUpload("test", "small", *small, {*s1, *s2}).message(),
             Catch::Contains("HTTP 400 EntityTooSmall"));
  auto unknown = s3->UploadPart("test", "k", "no-such-upload", 1, "x");
  CHECK(unknown.status().code() == ErrorCode::kNotFound);
  CHECK_THAT(unknown.status().message(), Catch::Contains("s3://test/k: PUT: HTTP 404 NoSuchUpload"));
  CHECK(s3->AbortMultipartUpload("test", "k", "no-such-upload").ok());  // gone is what an abort wants
}

TEST_CASE("s3: retries get through injected 503, 500, resets and stalls", "[s3]") {
  REQUIRE_PYTHON3();
  const std::vector<std::vector<std::string>> faults = {
      {"--fail-every", "2"},
      {"--fail-every", "3", "--fail-status", "500"},
      {"--drop-every", "2"},
      {"--drop-after-commit-every", "3"},
      {"--stall-every", "4", "--stall-seconds", "3"},
  };
  for (const auto& f : faults) {
    INFO(f[0]);
    S3TestServer server(f);
    auto s3 = ClientOf(server);
    const std::string data = Bytes(3000, 5);
    REQUIRE(s3->PutObject("test", "r/a", data).ok());
    REQUIRE(s3->PutObject("test", "r/b", data).ok());
    REQUIRE(s3->GetObject("test", "r/a").value() == data);
    REQUIRE(s3->GetObjectRange("test", "r/b", 10, 10).value() == data.substr(10, 10));
    REQUIRE(s3->HeadObject("test", "r/b")->size == 3000);
    REQUIRE(s3->ListObjects("test", "r/", "", 1)->objects.size() == 2);
    auto id = s3->CreateMultipartUpload("test", "r/m");
    REQUIRE(id.ok());
    auto part = s3->UploadPart("test", "r/m", *id, 1, data);
    REQUIRE(part.ok());
    REQUIRE(s3->CompleteMultipartUpload("test", "r/m", *id, {*part}).ok());
    REQUIRE(s3->GetObject("test", "r/m").value() == data);
    REQUIRE(s3->DeleteObject("test", "r/a").ok());
    // (curl resends by itself once when a kept-alive connection died before any answer)
    CHECK(s3->stats().retries >= (f[0] == "--drop-every" || f[0] == "--drop-after-commit-every" ? 1 : 3));
  }
}

TEST_CASE("s3: retries stop at the bound with a clear error, and 4xx are never retried", "[s3]") {
  REQUIRE_PYTHON3();
  {
    S3TestServer server({"--fail-every", "1"});
    auto s3 = ClientOf(server, kSecret, 4);
    auto r = s3->GetObject("test", "k");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == ErrorCode::kIo);
    CHECK(r.status().message() == "s3://test/k: GET: HTTP 503 SlowDown (4 attempts, giving up)");
    CHECK(s3->stats().requests == 4);
    CHECK(s3->stats().retries == 3);
  }
  {
    S3TestServer server({"--drop-every", "1"});
    auto s3 = ClientOf(server, kSecret, 3);
    auto r = s3->PutObject("test", "k", "x");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(),
               Catch::StartsWith("s3://test/k: PUT: curl error ") && Catch::EndsWith("(3 attempts, giving up)"));
    CHECK(s3->stats().requests == 3);
  }
  {
    S3TestServer server;
    auto s3 = ClientOf(server, "wrong-secret");
    auto r = s3->PutObject("test", "k", "x");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == ErrorCode::kIo);
    CHECK(r.status().message() ==
          "s3://test/k: PUT: HTTP 403 SignatureDoesNotMatch: the request signature we calculated does not match "
          "(1 attempt)");
    CHECK(s3->stats().requests == 1);
  }
  {
    S3TestServer server({"--session-token", "the-token"});
    auto without = ClientOf(server);
    CHECK_THAT(without->GetObject("test", "k").status().message(), Catch::Contains("HTTP 403 InvalidToken"));
    auto with = ClientOf(server, kSecret, 5, "the-token");
    REQUIRE(with->PutObject("test", "k", "x").ok());
    CHECK(with->GetObject("test", "k").value() == "x");
  }
}

TEST_CASE("s3: hostile XML answers are errors, never crashes", "[s3]") {
  REQUIRE_PYTHON3();
  S3TestServer server({"--hostile-xml"});
  auto s3 = ClientOf(server, kSecret, 1);
  // Each XML answer is a different kind of garbage (16 kinds, in turn).
  int errors = 0;
  for (int i = 0; i < 40; ++i) {
    auto l = s3->ListObjects("test", "", "", 2);
    errors += !l.ok();
    auto u = s3->ListMultipartUploads("test", "");
    errors += !u.ok();
    auto c = s3->CreateMultipartUpload("test", "k");
    errors += !c.ok();
    auto g = s3->GetObject("test", "missing");  // a 404 whose <Error> body is garbage
    REQUIRE_FALSE(g.ok());
    CHECK_THAT(g.status().message(), Catch::StartsWith("s3://test/missing: GET: HTTP 404"));
    for (const auto* st : {&l.status(), &u.status(), &c.status()}) {
      if (!st->ok()) {
        CHECK(st->message().find('\n') == std::string::npos);
        CHECK(st->message().size() < 400);
      }
    }
  }
  CHECK(errors >= 100);
}

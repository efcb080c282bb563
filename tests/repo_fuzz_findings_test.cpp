// Regressions for what fuzz/fuzz_repo_manifest found in the artifact
// manifest decoder (fuzz/README.md, "Findings"); each crashing input is also
// kept in fuzz/corpus/repo_manifest/.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "repo/repository.h"

namespace walcut::repo {
namespace {

std::string SampleManifest() {
  Manifest m;
  m.name = "f-cut-1";
  m.type = "full";
  m.source = "restore";
  m.seq = 1;
  m.cut = 1;
  m.files.push_back({"node-0.snap", 10, Xxh3Hex("x")});
  return EncodeManifest(m);
}

}  // namespace

TEST_CASE("repo: a manifest checksum that is not hex is refused in one line, without quoting its bytes", "[repo]") {
  const std::string good = SampleManifest();
  REQUIRE(DecodeManifest(good, "m").ok());
  const std::string key = std::string("\"") + kManifestChecksumKey + "\": \"";
  const size_t at = good.find(key);
  REQUIRE(at != std::string::npos);
  // The 32 bytes after the key hold a line break and a quote (fuzz input
  // finding-checksum-multiline.json): the error used to quote them, so it
  // spanned lines.
  std::string bad = good;
  bad.replace(at + key.size(), 32, "0123456789abcdef\n\"x\": 1,\n \"y\"zz");
  auto r = DecodeManifest(bad, "m");
  REQUIRE_FALSE(r.ok());
  INFO(r.status().message());
  CHECK(r.status().message() == std::string("m: the ") + kManifestChecksumKey + " value is not 32 hex digits");
  CHECK(r.status().message().find('\n') == std::string::npos);
  // A well-formed but wrong checksum still names both values.
  std::string wrong = good;
  wrong.replace(at + key.size(), 32, std::string(32, 'a'));
  auto w = DecodeManifest(wrong, "m");
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().message().find("the manifest says xxh3-128 " + std::string(32, 'a')) != std::string::npos);
}

TEST_CASE("repo: a manifest node numbered 2^32 is not taken for node 0", "[repo]") {
  Manifest m;
  m.name = "f-cut-1";
  m.type = "full";
  m.source = "restore";
  m.cut = 1;
  m.nodes.resize(1);
  const std::string good = EncodeManifest(m);
  REQUIRE(DecodeManifest(good, "m").ok());
  std::string text = good;
  const size_t at = text.find("\"node\": 0");
  REQUIRE(at != std::string::npos);
  text.replace(at, 9, "\"node\": 4294967296");
  // The checksum of the edited text, so that only the node id is wrong.
  const std::string key = std::string("\"") + kManifestChecksumKey + "\": \"";
  const size_t sum = text.find(key) + key.size();
  text.replace(sum, 32, std::string(32, '0'));
  text.replace(sum, 32, Xxh3Hex(text));
  auto r = DecodeManifest(text, "m");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "m: nodes[0] is node 4294967296");
}

TEST_CASE("repo: a nested member named like the manifest checksum does not take its place", "[repo]") {
  // fuzz input finding-nested-checksum-key.json: the embedded restore
  // manifest held "manifest_xxh3_128": "wal"; the checksum was written over
  // that nested value, and the encoded manifest did not decode.
  Manifest m;
  m.name = "f-cut-1";
  m.type = "full";
  m.source = "restore";
  m.cut = 1;
  m.restore = nlohmann::json{{"format", "walcut-restore"}, {"cluster", {{kManifestChecksumKey, "wal"}}}};
  m.evidence = nlohmann::json{{kManifestChecksumKey, std::string(40, 'x')}};
  const std::string text = EncodeManifest(m);
  auto back = DecodeManifest(text, "m");
  INFO(text);
  REQUIRE(back.ok());
  CHECK(back->restore == m.restore);
  CHECK(back->evidence == m.evidence);
  CHECK(EncodeManifest(*back) == text);
  // The nested values are covered by the checksum like any other byte.
  std::string t = text;
  const size_t at = t.find("\"wal\"");
  REQUIRE(at != std::string::npos);
  t[at + 1] = 'W';
  CHECK_FALSE(DecodeManifest(t, "m").ok());
}

}  // namespace walcut::repo

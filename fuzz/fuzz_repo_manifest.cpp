// libFuzzer target for the artifact manifests of a snapshot repository
// (repo::DecodeManifest, schema walcut.artifact/2, and /1 of older walcut; repo/REPOSITORY.md): every
// REPO/<artifact>/manifest.json is read by `snapshot list`, `check-repo`,
// `restore-repo` and `expire`.
//
// Properties:
//   - any input decodes or fails with kCorruption, one line starting with the
//     file's name (no exception, crash, leak or undefined behaviour);
//   - what decodes is consistent (nodes numbered 0, 1, ...; file paths
//     relative, without "..", with a 32-hex-digit checksum; an increment has
//     a parent and a cut), and encodes (EncodeManifest) to a text that
//     decodes again and encodes to the same text.
//
// The manifest carries its own XXH3-128; a custom mutator rewrites it after
// libFuzzer's mutation three times in four, so that mutated manifests get past
// the checksum and reach the decoder.
//
// fuzz.sh: -max_len=16384
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz/check.h"
#include "repo/repository.h"

namespace {

const std::string kOrigin = "fuzz/manifest.json";

// Where the checksum's 32 hex digits are (as repository.cpp finds them: the
// top-level member, indented by two spaces), or npos.
size_t ChecksumAt(const std::string& text) {
  const std::string key = std::string("\n  \"") + walcut::repo::kManifestChecksumKey + "\": \"";
  const size_t at = text.find(key);
  if (at == std::string::npos || at + key.size() + 32 > text.size()) return std::string::npos;
  return at + key.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace walcut::repo;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto m = DecodeManifest(text, kOrigin);
  if (!m.ok()) {
    const std::string& msg = m.status().message();
    Check(m.status().code() == walfmt::ErrorCode::kCorruption, "error is not kCorruption: " + msg);
    Check(msg.rfind(kOrigin, 0) == 0, "error does not start with the file name: " + msg);
    Check(msg.find('\n') == std::string::npos, "error spans lines: " + msg);
    return 0;
  }
  Check(m->type == "full" || m->type == "incremental", "accepted type " + m->type);
  if (m->type == "incremental") Check(!m->parent.empty() && m->cut.has_value(), "an increment without parent or cut");
  for (size_t i = 0; i < m->nodes.size(); ++i) Check(m->nodes[i].node == i, "nodes out of order");
  // The ids as written, before any narrowing: node 2^32 is not node 0.
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_object() && doc.contains("nodes") && doc["nodes"].is_array()) {
    for (size_t i = 0; i < doc["nodes"].size(); ++i) {
      const auto& n = doc["nodes"][i];
      if (n.is_object() && n.contains("node") && n["node"].is_number_unsigned()) {
        Check(n["node"].get<uint64_t>() == i,
              "node " + n["node"].dump() + " accepted as nodes[" + std::to_string(i) + "]");
      }
    }
  }
  for (const auto& f : m->files) {
    Check(!f.path.empty() && f.path[0] != '/' && f.path.find("..") == std::string::npos,
          "a file path outside: " + f.path);
    Check(f.xxh3_128.size() == 32, "a file checksum that is not 32 digits");
  }
  const std::string once = EncodeManifest(*m);
  auto again = DecodeManifest(once, kOrigin);
  Check(again.ok(), "an encoded manifest does not decode: " + again.status().message() + "\n" + once);
  Check(EncodeManifest(*again) == once, "manifest encode -> decode -> encode changed the text:\n" + once);
  return 0;
}

// ---------------------------------------------------------------------------
// Custom mutator: mutate, then (3 times in 4) write the right checksum.

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  size = LLVMFuzzerMutate(data, size, max_size);
  if (rng() % 4 == 0) return size;
  std::string text(reinterpret_cast<const char*>(data), size);
  const size_t at = ChecksumAt(text);
  if (at == std::string::npos) return size;
  text.replace(at, 32, std::string(32, '0'));
  const std::string sum = walcut::repo::Xxh3Hex(text);
  std::memcpy(data + at, sum.data(), 32);
  return size;
}

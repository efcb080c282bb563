// Internal to repo/: what the pieces of the repository share around the
// artifact manifest (repo/manifest.cpp): the size limit of the small JSON
// files an artifact holds, and XXH3-128 over bytes given piece by piece.
// EncodeManifest / DecodeManifest themselves are in repo/repository.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "walfmt/status.h"

struct XXH3_state_s;

namespace walcut::repo {

// The most a manifest, a restore plan or a cluster.json may hold.
inline constexpr uint64_t kMaxManifestBytes = 64ull << 20;

// A small file read whole (at most kMaxManifestBytes).
walfmt::Result<std::string> ReadSmall(const std::string& path);

// 32 hex digits, as a file's xxh3_128 in a manifest.
bool IsHex32(const std::string& s);

// XXH3-128 over bytes given piece by piece.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void Update(std::string_view d);
  // As Xxh3Hex: 32 lower-case hex digits, high 64 bits first.
  std::string Hex() const;
  uint64_t bytes() const { return bytes_; }

 private:
  XXH3_state_s* st_;
  uint64_t bytes_ = 0;
};

}  // namespace walcut::repo

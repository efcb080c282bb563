// The chunked AES-256-GCM format of a repository's files, the key file and
// the marker's key check (repo/crypt.h, REPOSITORY.md "Encryption").
#include "repo/crypt.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <nlohmann/json.hpp>

#include "repo/repository.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using nlohmann::json;
using walfmt::Result;
using walfmt::Status;

namespace {

constexpr const char* kKeyCheckLabel = "walcut.repository/key-check/1";
constexpr const char* kFileKeyLabel = "walcut.repository/file-key/1";
constexpr size_t kNonceBytes = 12;

using Bytes32 = std::array<unsigned char, 32>;

Bytes32 HmacSha256(const RepoKey& key, std::string_view data) {
  Bytes32 out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.bytes.data(), static_cast<int>(key.bytes.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(), &len);
  return out;
}

std::string Hex(const unsigned char* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool PowerOfTwoChunk(uint64_t c) { return c >= kCryptMinChunkBytes && c <= kCryptMaxChunkBytes && (c & (c - 1)) == 0; }

// One file's cipher: its key HMAC-SHA256(key, label || salt), its header, and
// the associated data of every chunk (the header and the identity).
class FileCipher {
 public:
  FileCipher(const RepoKey& key, const Salt& salt, uint32_t chunk, std::string_view identity)
      : ctx_(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free), chunk_(chunk) {
    header_.assign(kCryptMagic, 8);
    for (int i = 0; i < 4; ++i) header_.push_back(static_cast<char>((chunk >> (8 * i)) & 0xff));
    header_.append(reinterpret_cast<const char*>(salt.data()), salt.size());
    std::string label(kFileKeyLabel);
    label.push_back('\0');
    label.append(reinterpret_cast<const char*>(salt.data()), salt.size());
    file_key_ = HmacSha256(key, label);
    aad_ = header_ + std::string(identity);
  }
  ~FileCipher() { OPENSSL_cleanse(file_key_.data(), file_key_.size()); }
  const std::string& header() const { return header_; }
  uint32_t chunk() const { return chunk_; }

  // Appends chunk `index`'s ciphertext and tag to `out`.
  bool Seal(uint64_t index, bool final, std::string_view plain, std::string& out) {
    const auto nonce = Nonce(index, final);
    EVP_CIPHER_CTX* c = ctx_.get();
    int len = 0;
    const size_t at = out.size();
    out.resize(at + plain.size() + kCryptTagBytes);
    auto* o = reinterpret_cast<unsigned char*>(out.data() + at);
    if (!c || EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), nullptr, file_key_.data(), nonce.data()) != 1) return false;
    if (EVP_EncryptUpdate(c, nullptr, &len, Ptr(aad_), static_cast<int>(aad_.size())) != 1) return false;
    if (EVP_EncryptUpdate(c, o, &len, Ptr(plain), static_cast<int>(plain.size())) != 1) return false;
    int fin = 0;
    if (EVP_EncryptFinal_ex(c, o + len, &fin) != 1) return false;
    return EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, kCryptTagBytes, o + plain.size()) == 1;
  }

  // Appends chunk `index`'s plaintext to `out` when `sealed` (ciphertext and
  // tag) authenticates as that chunk, final or not.
  bool Open(uint64_t index, bool final, std::string_view sealed, std::string& out) {
    if (sealed.size() < kCryptTagBytes) return false;
    const size_t n = sealed.size() - kCryptTagBytes;
    const auto nonce = Nonce(index, final);
    EVP_CIPHER_CTX* c = ctx_.get();
    int len = 0;
    const size_t at = out.size();
    out.resize(at + n);
    auto* o = reinterpret_cast<unsigned char*>(out.data() + at);
    std::array<unsigned char, kCryptTagBytes> tag{};
    std::memcpy(tag.data(), sealed.data() + n, tag.size());
    bool ok = c && EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), nullptr, file_key_.data(), nonce.data()) == 1 &&
              EVP_DecryptUpdate(c, nullptr, &len, Ptr(aad_), static_cast<int>(aad_.size())) == 1 &&
              EVP_DecryptUpdate(c, o, &len, Ptr(sealed.substr(0, n)), static_cast<int>(n)) == 1 &&
              EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, kCryptTagBytes, tag.data()) == 1;
    int fin = 0;
    ok = ok && EVP_DecryptFinal_ex(c, o + len, &fin) == 1;
    if (!ok) out.resize(at);
    return ok;
  }

 private:
  static const unsigned char* Ptr(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }
  // The chunk index (64 bits, big-endian) and the final flag (32 bits, 1 on
  // the last chunk, else 0).
  static std::array<unsigned char, kNonceBytes> Nonce(uint64_t index, bool final) {
    std::array<unsigned char, kNonceBytes> n{};
    for (int i = 0; i < 8; ++i) n[i] = static_cast<unsigned char>(index >> (56 - 8 * i));
    n[11] = final ? 1 : 0;
    return n;
  }
  std::unique_ptr<EVP_CIPHER_CTX, void (*)(EVP_CIPHER_CTX*)> ctx_;
  uint32_t chunk_;
  std::string header_, aad_;
  Bytes32 file_key_{};
};

Salt RandomSalt() {
  Salt s{};
  if (RAND_bytes(s.data(), static_cast<int>(s.size())) != 1) std::abort();  // no entropy: never write a weak file
  return s;
}

Status Forged(const std::string& origin, const std::string& why) {
  return Status::Corruption(fmt::format(
      "{}: {}; the file fails authentication (changed, truncated, extended, or not this file) and is not used", origin,
      why));
}

// The header of an encrypted file: its chunk size and salt.
Status ParseHeader(std::string_view h, const std::string& origin, uint32_t& chunk, Salt& salt) {
  if (h.size() < kCryptHeaderBytes || h.substr(0, 8) != kCryptMagic) {
    return Forged(origin, fmt::format("not a walcut encrypted file (no {} header)", kCryptMagic));
  }
  chunk = 0;
  for (int i = 0; i < 4; ++i) chunk |= static_cast<uint32_t>(static_cast<unsigned char>(h[8 + i])) << (8 * i);
  if (!PowerOfTwoChunk(chunk)) return Forged(origin, fmt::format("chunk size {} in the header", chunk));
  std::memcpy(salt.data(), h.data() + 12, salt.size());
  return Status::Ok();
}

// Writes a new file piece by piece (ciphertext 0644 as every repository file,
// plaintext 0600); removed unless finished.
class NewFile {
 public:
  NewFile(std::string path, mode_t mode) : path_(std::move(path)), mode_(mode) {}
  ~NewFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!done_ && opened_) ::unlink(path_.c_str());
  }
  Status Open() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_);
    if (fd_ < 0) return Status::Io(fmt::format("{}: cannot create: {}", path_, std::strerror(errno)));
    opened_ = true;
    return Status::Ok();
  }
  Status Write(std::string_view d) {
    while (!d.empty()) {
      const ssize_t n = ::write(fd_, d.data(), d.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::Io(fmt::format("{}: cannot write: {}", path_, std::strerror(errno)));
      d.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }
  Status Finish(walfmt::Durability d) {
    const int fd = fd_;
    fd_ = -1;
    Status st = Status::Ok();
    if (d == walfmt::Durability::kSynced) {
      st = walfmt::SyncAndClose(fd, path_);
    } else if (::close(fd) != 0) {
      st = Status::Io(fmt::format("{}: cannot close: {}", path_, std::strerror(errno)));
    }
    done_ = st.ok();
    return st;
  }

 private:
  std::string path_;
  mode_t mode_;
  int fd_ = -1;
  bool opened_ = false, done_ = false;
};

}  // namespace

std::string RepoKey::KeyCheck() const {
  const Bytes32 h = HmacSha256(*this, kKeyCheckLabel);
  return Hex(h.data(), h.size());
}

Result<RepoKey> LoadKeyFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return Status::InvalidArgument(fmt::format("{}: cannot open the key file: {}", path, std::strerror(errno)));
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  std::string data(66, '\0');
  ssize_t n = -1;
  if (stated && S_ISREG(st.st_mode) && st.st_size <= 65) n = ::read(fd, data.data(), data.size());
  ::close(fd);
  if (!stated || !S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(fmt::format("{}: the key file is not a regular file", path));
  }
  if ((st.st_mode & 077) != 0) {
    return Status::InvalidArgument(
        fmt::format("{}: the key file is open to group or others (mode {:04o}); refusing it (chmod 600 it)", path,
                    st.st_mode & 07777));
  }
  const auto bad_shape = [&path](uint64_t size) {
    return Status::InvalidArgument(fmt::format(
        "{}: the key file holds {} bytes; a key is exactly 32 bytes, or 64 hex digits and an optional newline", path,
        size));
  };
  if (st.st_size > 65) return bad_shape(static_cast<uint64_t>(st.st_size));
  if (n < 0)
    return Status::InvalidArgument(fmt::format("{}: cannot read the key file: {}", path, std::strerror(errno)));
  data.resize(static_cast<size_t>(n));
  RepoKey k;
  if (data.size() == kRepoKeyBytes) {
    std::memcpy(k.bytes.data(), data.data(), kRepoKeyBytes);
    OPENSSL_cleanse(data.data(), data.size());
    return k;
  }
  if (data.size() == 65 && data.back() == '\n') data.pop_back();
  if (data.size() != 64) return bad_shape(static_cast<uint64_t>(n));
  for (size_t i = 0; i < kRepoKeyBytes; ++i) {
    const int hi = HexDigit(data[2 * i]), lo = HexDigit(data[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      OPENSSL_cleanse(data.data(), data.size());
      return Status::InvalidArgument(fmt::format("{}: the key file's 64 characters are not all hex digits (byte {})",
                                                 path, hi < 0 ? 2 * i : 2 * i + 1));
    }
    k.bytes[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  OPENSSL_cleanse(data.data(), data.size());
  return k;
}

uint64_t EncryptedSize(uint64_t plain, size_t chunk) {
  const uint64_t chunks = plain == 0 ? 1 : (plain + chunk - 1) / chunk;
  return kCryptHeaderBytes + plain + chunks * kCryptTagBytes;
}

std::string EncryptBytes(const RepoKey& key, std::string_view identity, std::string_view plain, size_t chunk,
                         const Salt* salt) {
  FileCipher fc(key, salt ? *salt : RandomSalt(), static_cast<uint32_t>(chunk), identity);
  std::string out = fc.header();
  out.reserve(EncryptedSize(plain.size(), chunk));
  uint64_t index = 0;
  do {
    const std::string_view piece = plain.substr(0, std::min(plain.size(), chunk));
    plain.remove_prefix(piece.size());
    if (!fc.Seal(index++, plain.empty(), piece, out)) std::abort();  // only on a broken libcrypto
  } while (!plain.empty());
  return out;
}

Result<std::string> DecryptBytes(const RepoKey& key, std::string_view identity, std::string_view cipher,
                                 const std::string& origin) {
  uint32_t chunk = 0;
  Salt salt{};
  if (Status st = ParseHeader(cipher, origin, chunk, salt); !st.ok()) return st;
  FileCipher fc(key, salt, chunk, identity);
  std::string_view body = cipher.substr(kCryptHeaderBytes);
  if (body.empty()) return Forged(origin, "no chunk after the header");
  std::string out;
  const size_t record = chunk + kCryptTagBytes;
  for (uint64_t index = 0; !body.empty(); ++index) {
    const std::string_view rec = body.substr(0, std::min(body.size(), record));
    body.remove_prefix(rec.size());
    if (!fc.Open(index, body.empty(), rec, out)) return Forged(origin, fmt::format("chunk {}", index));
  }
  return out;
}

Status EncryptFile(const RepoKey& key, std::string_view identity, const std::string& from, const std::string& to) {
  FileCipher fc(key, RandomSalt(), kCryptChunkBytes, identity);
  NewFile out(to, 0644);
  if (Status st = out.Open(); !st.ok()) return st;
  if (Status st = out.Write(fc.header()); !st.ok()) return st;
  std::string pending, sealed;
  uint64_t index = 0;
  const auto seal = [&](std::string_view piece, bool final) {
    sealed.clear();
    if (!fc.Seal(index++, final, piece, sealed)) return Status::Internal(fmt::format("{}: AES-GCM failed", to));
    return out.Write(sealed);
  };
  Status st = walfmt::ReadFileChunks(from, kCryptChunkBytes, [&](std::string_view piece) {
    pending.append(piece);
    size_t at = 0;
    for (; pending.size() - at > kCryptChunkBytes; at += kCryptChunkBytes) {  // more follows: not the last
      if (Status s = seal(std::string_view(pending).substr(at, kCryptChunkBytes), false); !s.ok()) return s;
    }
    pending.erase(0, at);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (st = seal(pending, true); !st.ok()) return st;
  return out.Finish(walfmt::Durability::kSynced);
}

Status DecryptFile(const RepoKey& key, std::string_view identity, const std::string& from, const std::string& to,
                   walfmt::Durability d, const std::string& origin_arg) {
  const std::string origin = origin_arg.empty() ? from : origin_arg;
  std::error_code ec;
  const uint64_t total = fs::file_size(from, ec);
  if (ec) return Status::Io(fmt::format("{}: cannot stat: {}", origin, ec.message()));
  if (total <= kCryptHeaderBytes) {
    return Forged(origin, total < kCryptHeaderBytes ? "shorter than the header" : "no chunk after the header");
  }
  std::unique_ptr<FileCipher> fc;
  NewFile out(to, 0600);
  if (Status st = out.Open(); !st.ok()) return st;
  std::string pending, plain;
  uint64_t read = 0, index = 0, done = 0;  // done: bytes of `from` consumed
  const auto open = [&](std::string_view rec) {
    plain.clear();
    const bool final = done + rec.size() == total;
    if (!fc->Open(index, final, rec, plain)) return Forged(origin, fmt::format("chunk {}", index));
    ++index;
    done += rec.size();
    return out.Write(plain);
  };
  Status st = walfmt::ReadFileChunks(from, kCryptMaxChunkBytes, [&](std::string_view piece) -> Status {
    read += piece.size();
    if (read > total) return Forged(origin, "grew while being read");
    pending.append(piece);
    size_t at = 0;
    if (!fc && pending.size() >= kCryptHeaderBytes) {
      uint32_t chunk = 0;
      Salt salt{};
      if (Status s = ParseHeader(pending, origin, chunk, salt); !s.ok()) return s;
      fc = std::make_unique<FileCipher>(key, salt, chunk, identity);
      at = done = kCryptHeaderBytes;
    }
    if (fc) {
      const size_t record = fc->chunk() + kCryptTagBytes;
      for (; pending.size() - at >= record && done + record < total; at += record) {
        if (Status s = open(std::string_view(pending).substr(at, record)); !s.ok()) return s;
      }
    }
    pending.erase(0, at);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (read != total || !fc) return Forged(origin, "shrank while being read");
  if (pending.size() > fc->chunk() + kCryptTagBytes) return Forged(origin, "a chunk too long");
  if (st = open(pending); !st.ok()) return st;
  return out.Finish(d);
}

// ---- the marker ------------------------------------------------------------

std::string EncryptedMarkerText(const RepoKey& key) {
  const json j = {
      {"schema", kRepoSchemaEncrypted},
      {"artifact_schema", kArtifactSchema},
      {"encryption", {{"cipher", kCipherName}, {"format", kEncryptedFileFormat}, {"key_check", key.KeyCheck()}}}};
  return walfmt::DumpJson(j, 2) + "\n";
}

std::string PlainMarkerText() {
  const json j = {{"schema", kRepoSchema}, {"artifact_schema", kArtifactSchema}};
  return walfmt::DumpJson(j, 2) + "\n";
}

bool MarkerIsEncrypted(const std::string& marker_text) {
  const json j = json::parse(marker_text, nullptr, false);
  return j.is_object() && j.contains("schema") && j["schema"] == kRepoSchemaEncrypted;
}

Status CheckMarkerKey(const std::string& marker_text, const RepoKey* key, const std::string& where) {
  const json j = json::parse(marker_text, nullptr, false);
  if (!MarkerIsEncrypted(marker_text)) {
    if (!key) return Status::Ok();  // the plain code reads (and judges) the marker
    return Status::InvalidArgument(fmt::format(
        "{}: the repository is not encrypted; refusing --encrypt-key-file (a repository is never half encrypted)",
        where));
  }
  const json* e = j.contains("encryption") && j["encryption"].is_object() ? &j["encryption"] : nullptr;
  const auto str = [e](const char* k) {
    return e && e->contains(k) && (*e)[k].is_string() ? (*e)[k].get<std::string>() : std::string();
  };
  if (str("cipher") != kCipherName || str("format") != kEncryptedFileFormat || str("key_check").size() != 64) {
    return Status::InvalidArgument(fmt::format("{}/{}: encryption {} of format {}; this walcut knows {} of format {}",
                                               where, kMarkerFile, str("cipher").empty() ? "(none)" : str("cipher"),
                                               str("format").empty() ? "(none)" : str("format"), kCipherName,
                                               kEncryptedFileFormat));
  }
  if (!key) {
    return Status::InvalidArgument(fmt::format(
        "{}: the repository is encrypted ({}); give its key with --encrypt-key-file FILE", where, kCipherName));
  }
  const std::string want = str("key_check"), have = key->KeyCheck();
  if (CRYPTO_memcmp(want.data(), have.data(), want.size()) != 0) {
    return Status::InvalidArgument(
        fmt::format("{}: wrong key: the key file's check value {}... is not the repository's {}... ({})", where,
                    have.substr(0, 8), want.substr(0, 8), kMarkerFile));
  }
  return Status::Ok();
}

}  // namespace walcut::repo

// Encryption at rest of a repository's artifacts (repo/REPOSITORY.md,
// "Encryption"): the key file, the marker's "encryption" member with its key
// check value, and the chunked AES-256-GCM format of every artifact file
// (header, then chunks each sealed with its own tag; the chunk index and a
// final flag in the nonce, the header and the file's identity "NAME/REL" in
// the associated data). OpenSSL's libcrypto. Library code: never prints;
// errors are values.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "walfmt/file_io.h"
#include "walfmt/status.h"

namespace walcut::repo {

struct RepoListing;
struct RepoCheckReport;
struct Staging;

inline constexpr size_t kRepoKeyBytes = 32;
inline constexpr size_t kCryptSaltBytes = 32;
inline constexpr size_t kCryptTagBytes = 16;
inline constexpr size_t kCryptHeaderBytes = 8 + 4 + kCryptSaltBytes;  // magic, chunk size, salt
inline constexpr size_t kCryptChunkBytes = size_t{1} << 20;           // what walcut writes
inline constexpr size_t kCryptMinChunkBytes = size_t{1} << 16;        // what it reads: a power of two
inline constexpr size_t kCryptMaxChunkBytes = size_t{1} << 20;        //   in [64 KiB, 1 MiB]
inline constexpr const char* kCryptMagic = "WALCUTE1";
inline constexpr const char* kCipherName = "aes-256-gcm";
inline constexpr const char* kEncryptedFileFormat = "walcut.encrypted-file/1";
// The marker's schema of an encrypted repository: walcut.repository/2 with an
// "encryption" member (a walcut that predates encryption refuses the schema
// instead of reading ciphertext as JSON).
inline constexpr const char* kRepoSchemaEncrypted = "walcut.repository/3";

using Salt = std::array<unsigned char, kCryptSaltBytes>;

struct RepoKey {
  std::array<unsigned char, kRepoKeyBytes> bytes{};
  // HMAC-SHA256(key, "walcut.repository/key-check/1"), 64 hex digits.
  std::string KeyCheck() const;
};

// The key file: exactly 32 bytes, or 64 hex digits and an optional "\n". A
// regular file readable or writable by no one but its owner (mode 0600 or
// 0400); anything else (a FIFO, a directory, another size, group or other
// permission bits) is refused with kInvalidArgument naming the file.
walfmt::Result<RepoKey> LoadKeyFile(const std::string& path);

// The bytes of an encrypted file holding `plain` bytes.
uint64_t EncryptedSize(uint64_t plain, size_t chunk = kCryptChunkBytes);

// `plain` encrypted as the file `identity` ("NAME/REL": the artifact and the
// path inside it). `salt`: random unless given (known-answer tests).
std::string EncryptBytes(const RepoKey& key, std::string_view identity, std::string_view plain,
                         size_t chunk = kCryptChunkBytes, const Salt* salt = nullptr);
// The plaintext of an encrypted file; kCorruption naming `origin` when the
// bytes are not a walcut encrypted file of that identity under that key
// (changed, truncated, extended, chunks reordered, another file's).
walfmt::Result<std::string> DecryptBytes(const RepoKey& key, std::string_view identity, std::string_view cipher,
                                         const std::string& origin);
// Streaming forms (memory: one chunk): `to` is created (it must not exist;
// ciphertext mode 0644 and synced, plaintext mode 0600 and synced unless
// kUnsynced); removed on any error.
walfmt::Status EncryptFile(const RepoKey& key, std::string_view identity, const std::string& from,
                           const std::string& to);
walfmt::Status DecryptFile(const RepoKey& key, std::string_view identity, const std::string& from,
                           const std::string& to, walfmt::Durability d = walfmt::Durability::kUnsynced,
                           const std::string& origin = "");

// ---- the marker ------------------------------------------------------------

// The marker of a new encrypted repository.
std::string EncryptedMarkerText(const RepoKey& key);
// The marker of a plain repository (the private, decrypted mirror's too).
std::string PlainMarkerText();
// Whether the marker's text is an encrypted repository's.
bool MarkerIsEncrypted(const std::string& marker_text);
// The marker `marker_text` of repository `where` against the key given (null:
// none). kInvalidArgument when encrypted and no key or the wrong key (by the
// key check value: nothing is decrypted), a key for a plain repository, or a
// cipher or format this walcut does not know.
walfmt::Status CheckMarkerKey(const std::string& marker_text, const RepoKey* key, const std::string& where);

// ---- whole artifacts ---------------------------------------------------------

// Files that failed authentication while an artifact was decrypted into a
// private directory: "NAME/REL" -> the message (naming the repository's file).
struct DecryptFailures {
  std::map<std::string, std::string> files;
  // The artifacts whose manifest failed: unreadable, with that message.
  void ApplyTo(RepoListing& l) const;
  // Each failed file a finding "authentication" (instead of what the check of
  // the empty placeholder found).
  void ApplyTo(RepoCheckReport& r) const;
  // The first failure among the artifacts `names` (kCorruption), or Ok.
  walfmt::Status FirstOf(const std::vector<std::string>& names) const;
};

// Every file under `from` (artifact `name`, shown as `shown` in messages)
// decrypted into `to` (created, mode 0700), at the same relative paths. A file
// that fails authentication is recorded in `failures` and left as an empty
// file (so `check` still sees it); other errors are returned.
walfmt::Status DecryptTree(const RepoKey& key, const std::string& name, const std::string& from, const std::string& to,
                           const std::string& shown, DecryptFailures& failures);
// Every file under `from` (artifact `name`) but manifest.json encrypted into
// the existing directory `to`, synced, directories too; manifest.json, when
// `with_manifest`, last.
walfmt::Status EncryptTree(const RepoKey& key, const std::string& name, const std::string& from, const std::string& to,
                           bool with_manifest);
// Every file under `from` encrypted as `name` (EncryptTree, manifest.json
// last) into a staging directory beside `target`, renamed to `target`
// (REPOSITORY.md, "Atomicity"); kInvalidArgument when `target` exists.
walfmt::Status PublishEncryptedTree(const RepoKey& key, const std::string& name, const std::string& from,
                                    const std::string& target);

// A private directory (mode 0700) beside `beside`, else under TMPDIR named
// after `tmp_name`: removed when done and on a termination signal.
walfmt::Result<std::unique_ptr<Staging>> PrivateDirFor(const std::string& beside, const std::string& tmp_name);

}  // namespace walcut::repo

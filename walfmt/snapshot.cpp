#include "walfmt/snapshot.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"
#include "walfmt/file_io.h"
#include "walfmt/fnv1a.h"
#include "walfmt/segment.h"

namespace walfmt {
namespace {

constexpr char kMagic[8] = {'W', 'A', 'L', 'C', 'U', 'T', 'S', 'N'};
constexpr char kTrailerMagic[4] = {'S', 'N', 'E', 'N'};
constexpr size_t kMaxName = 255;

void AppendEntries(std::string& out, const std::map<std::string, std::string>& entries) {
  for (const auto& [k, v] : entries) {
    walfmt::PutU16(out, static_cast<uint16_t>(k.size()));
    out += k;
    walfmt::PutU32(out, static_cast<uint32_t>(v.size()));
    out += v;
  }
}

}  // namespace

uint64_t StateFingerprint(const std::map<std::string, std::string>& entries) {
  std::string body;
  AppendEntries(body, entries);
  return fnv1a::Value(body);
}

Result<std::string> EncodeSnapshot(SnapshotFile& s) {
  if (s.name.size() > kMaxName) {
    return Status::InvalidArgument(fmt::format("snapshot name of {} bytes exceeds {}", s.name.size(), kMaxName));
  }
  for (const auto& [k, v] : s.entries) {
    if (k.size() > 0xFFFF || v.size() > 0xFFFFFFFFull) {
      return Status::InvalidArgument(fmt::format("snapshot entry with a {}-byte key is too large", k.size()));
    }
  }
  std::string out;
  out.append(kMagic, sizeof(kMagic));
  walfmt::PutU16(out, kSnapshotVersion);
  walfmt::PutU16(out, static_cast<uint16_t>(kSnapshotHeaderSize));
  walfmt::PutU32(out, s.node_id);
  walfmt::PutU64(out, s.cluster_id);
  walfmt::PutU64(out, s.entries.size());
  walfmt::PutU64(out, s.wal_position.segment);
  walfmt::PutU64(out, s.wal_position.offset);
  walfmt::PutU64(out, s.time_us);
  walfmt::PutU16(out, static_cast<uint16_t>(s.name.size()));
  walfmt::PutU16(out, 0);
  walfmt::PutU32(out, walfmt::MaskCrc(walfmt::crc32c::Value(out.data(), 60)));
  static_assert(kSnapshotHeaderSize == 64);
  const size_t body_start = out.size();
  out += s.name;
  const size_t entries_start = out.size();
  AppendEntries(out, s.entries);
  s.fingerprint = fnv1a::Value(std::string_view(out).substr(entries_start));
  const uint32_t body_crc = walfmt::MaskCrc(walfmt::crc32c::Value(out.data() + body_start, out.size() - body_start));
  out.append(kTrailerMagic, sizeof(kTrailerMagic));
  walfmt::PutU32(out, body_crc);
  walfmt::PutU64(out, s.fingerprint);
  return out;
}

namespace {

// Decodes a whole file image into s (header fields and fingerprint), handing
// each entry to `each` as it is parsed: before the body checksum and the
// fingerprint are checked, which a failure reports afterwards.
using EntryFn = std::function<void(std::string_view key, std::string_view value)>;
Status DecodeInto(std::string_view bytes, SnapshotFile& s, const EntryFn& each) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < kSnapshotHeaderSize + kSnapshotTrailerSize) {
    return Status::Corruption(fmt::format("snapshot of {} bytes is shorter than header and trailer ({})", bytes.size(),
                                          kSnapshotHeaderSize + kSnapshotTrailerSize));
  }
  if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0) return Status::Corruption("snapshot: bad magic at offset 0");
  const uint32_t want = walfmt::MaskCrc(walfmt::crc32c::Value(p, 60));
  const uint32_t have = walfmt::LoadU32(p + 60);
  if (want != have) {
    return Status::Corruption(
        fmt::format("snapshot: header checksum at offset 60: expected {:08x}, found {:08x}", want, have));
  }
  if (walfmt::LoadU16(p + 8) != kSnapshotVersion) {
    return Status::Corruption(
        fmt::format("snapshot: version {} at offset 8, expected {}", walfmt::LoadU16(p + 8), kSnapshotVersion));
  }
  if (walfmt::LoadU16(p + 10) != kSnapshotHeaderSize) return Status::Corruption("snapshot: header size at offset 10");
  s.node_id = walfmt::LoadU32(p + 12);
  s.cluster_id = walfmt::LoadU64(p + 16);
  const uint64_t count = walfmt::LoadU64(p + 24);
  s.wal_position = Lsn{walfmt::LoadU64(p + 32), walfmt::LoadU64(p + 40)};
  s.time_us = walfmt::LoadU64(p + 48);
  const size_t name_len = walfmt::LoadU16(p + 56);
  const size_t end = bytes.size() - kSnapshotTrailerSize;
  size_t at = kSnapshotHeaderSize;
  if (name_len > kMaxName || at + name_len > end) return Status::Corruption("snapshot: name length at offset 56");
  s.name.assign(bytes.substr(at, name_len));
  at += name_len;
  const size_t entries_start = at;
  // Each entry takes at least 6 bytes: never believe a count the bytes cannot hold.
  if (count > (end - at) / 6) {
    return Status::Corruption(fmt::format("snapshot: entry count {} cannot fit in {} bytes", count, end - at));
  }
  std::string_view prev;
  for (uint64_t i = 0; i < count; ++i) {
    if (at + 2 > end) return Status::Corruption(fmt::format("snapshot: entry {} cut short at offset {}", i, at));
    const size_t kl = walfmt::LoadU16(p + at);
    at += 2;
    if (at + kl + 4 > end)
      return Status::Corruption(fmt::format("snapshot: key of entry {} overruns at offset {}", i, at));
    const std::string_view key = bytes.substr(at, kl);
    at += kl;
    const uint64_t vl = walfmt::LoadU32(p + at);
    at += 4;
    if (vl > end - at)
      return Status::Corruption(fmt::format("snapshot: value of entry {} overruns at offset {}", i, at));
    if (i > 0 && !(prev < key)) return Status::Corruption(fmt::format("snapshot: entry {} is out of order", i));
    prev = key;
    each(key, bytes.substr(at, vl));
    at += vl;
  }
  if (at != end) return Status::Corruption(fmt::format("snapshot: {} unexpected bytes after the entries", end - at));
  if (std::memcmp(p + end, kTrailerMagic, sizeof(kTrailerMagic)) != 0) {
    return Status::Corruption(fmt::format("snapshot: bad trailer magic at offset {}", end));
  }
  const uint32_t body_want = walfmt::MaskCrc(walfmt::crc32c::Value(p + kSnapshotHeaderSize, end - kSnapshotHeaderSize));
  const uint32_t body_have = walfmt::LoadU32(p + end + 4);
  if (body_want != body_have) {
    return Status::Corruption(fmt::format("snapshot: body checksum at offset {}: expected {:08x}, found {:08x}",
                                          end + 4, body_want, body_have));
  }
  s.fingerprint = walfmt::LoadU64(p + end + 8);
  const uint64_t fp = fnv1a::Value(bytes.substr(entries_start, end - entries_start));
  if (fp != s.fingerprint) {
    return Status::Corruption(
        fmt::format("snapshot: fingerprint at offset {}: expected {:016x}, found {:016x}", end + 8, fp, s.fingerprint));
  }
  return Status::Ok();
}

}  // namespace

Result<SnapshotFile> DecodeSnapshot(const std::string& bytes) {
  SnapshotFile s;
  Status st = DecodeInto(bytes, s, [&s](std::string_view k, std::string_view v) {
    s.entries.emplace_hint(s.entries.end(), std::string(k), std::string(v));
  });
  if (!st.ok()) return st;
  return s;
}

Status WriteSnapshotFile(const std::string& path, SnapshotFile& s) {
  auto bytes = EncodeSnapshot(s);
  if (!bytes.ok()) return bytes.status();
  return WriteFileAtomic(path, *bytes);
}

Result<SnapshotFile> ReadSnapshotFile(const std::string& path) {
  auto bytes = ReadWholeFile(path, kMaxSnapshotFileBytes);
  if (!bytes.ok()) return bytes.status();
  auto s = DecodeSnapshot(*bytes);
  if (!s.ok()) return Status::Corruption(fmt::format("{}: {}", path, s.status().message()));
  return s;
}

Result<SnapshotFile> ReadSnapshotFile(const std::string& path,
                                      const std::function<void(std::string_view key, std::string_view value)>& each) {
  auto bytes = ReadWholeFile(path, kMaxSnapshotFileBytes);
  if (!bytes.ok()) return bytes.status();
  SnapshotFile s;
  if (Status st = DecodeInto(*bytes, s, each); !st.ok())
    return Status::Corruption(fmt::format("{}: {}", path, st.message()));
  return s;
}

// The writer's thread: takes full buffers in order, extends the body
// checksum and the fingerprint over their entries and writes them. After the
// first failed write it only recycles buffers. The state under mu is shared;
// crc and fnv belong to the thread until it is joined.
struct SnapshotStreamWriter::Helper {
  struct Full {
    std::string bytes;
    size_t hash_from;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Full> todo;
  std::vector<std::string> spare;
  bool closing = false;
  Status error;
  uint32_t crc = 0;
  uint64_t fnv = fnv1a::kOffset;
  int fd = -1;
  std::string path;
  std::thread thread;

  void Run() {
    std::unique_lock lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return closing || !todo.empty(); });
      if (todo.empty()) return;
      Full f = std::move(todo.front());
      const bool failed = !error.ok();
      lock.unlock();
      const Status st = failed ? Status::Ok() : Consume(f.bytes, f.hash_from);
      f.bytes.clear();
      lock.lock();
      todo.pop_front();  // only now: Flush counts what is in flight by todo
      if (!st.ok() && error.ok()) error = st;
      spare.push_back(std::move(f.bytes));
      cv.notify_all();
    }
  }

  // A buffer's entries (from hash_from on) into the checksum and the
  // fingerprint, and the whole buffer into the file.
  Status Consume(std::string_view bytes, size_t hash_from) {
    const std::string_view entries = bytes.substr(hash_from);
    crc = crc32c::Extend(crc, entries.data(), entries.size());
    fnv = fnv1a::Extend(fnv, entries.data(), entries.size());
    return WriteAll(fd, bytes, path);
  }

  static Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::Io(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
      }
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  // Waits for every buffer handed over to be written; the thread ends.
  void Close() {
    if (!thread.joinable()) return;
    {
      std::lock_guard lock(mu);
      closing = true;
    }
    cv.notify_all();
    thread.join();
  }
};

SnapshotStreamWriter::SnapshotStreamWriter() = default;

Result<std::unique_ptr<SnapshotStreamWriter>> SnapshotStreamWriter::Create(const std::string& path,
                                                                           const SnapshotFile& h, uint64_t entry_count,
                                                                           bool helper_thread) {
  if (h.name.size() > kMaxName) {
    return Status::InvalidArgument(fmt::format("snapshot name of {} bytes exceeds {}", h.name.size(), kMaxName));
  }
  std::unique_ptr<SnapshotStreamWriter> w(new SnapshotStreamWriter());
  w->path_ = path;
  w->fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return Status::Io(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
  std::string& out = w->buf_;
  out.append(kMagic, sizeof(kMagic));
  walfmt::PutU16(out, kSnapshotVersion);
  walfmt::PutU16(out, static_cast<uint16_t>(kSnapshotHeaderSize));
  walfmt::PutU32(out, h.node_id);
  walfmt::PutU64(out, h.cluster_id);
  walfmt::PutU64(out, entry_count);
  walfmt::PutU64(out, h.wal_position.segment);
  walfmt::PutU64(out, h.wal_position.offset);
  walfmt::PutU64(out, h.time_us);
  walfmt::PutU16(out, static_cast<uint16_t>(h.name.size()));
  walfmt::PutU16(out, 0);
  walfmt::PutU32(out, walfmt::MaskCrc(walfmt::crc32c::Value(out.data(), 60)));
  out += h.name;
  w->hash_from_ = out.size();
  w->expected_ = entry_count;
  w->helper_ = std::make_unique<Helper>();
  Helper& hp = *w->helper_;
  hp.crc = walfmt::crc32c::Value(h.name.data(), h.name.size());
  hp.fd = w->fd_;
  hp.path = path;
  if (helper_thread) hp.thread = std::thread([&hp] { hp.Run(); });
  return w;
}

SnapshotStreamWriter::~SnapshotStreamWriter() {
  if (helper_) {
    {
      std::lock_guard lock(helper_->mu);
      if (helper_->error.ok()) helper_->error = Status::Io("abandoned");  // nothing more is written
    }
    helper_->Close();
  }
  if (fd_ >= 0) ::close(fd_);
}

Status SnapshotStreamWriter::Flush() {
  Helper& hp = *helper_;
  if (!hp.thread.joinable()) {  // no helper thread: the same work, here
    if (!hp.error.ok()) return hp.error;
    hp.error = hp.Consume(buf_, hash_from_);
    buf_.clear();
    hash_from_ = 0;
    return hp.error;
  }
  std::unique_lock lock(hp.mu);
  hp.cv.wait(lock, [&] { return hp.todo.size() < 2; });
  if (!hp.error.ok()) return hp.error;
  hp.todo.push_back({std::move(buf_), hash_from_});
  hash_from_ = 0;
  if (!hp.spare.empty()) {
    buf_ = std::move(hp.spare.back());
    hp.spare.pop_back();
  } else {
    buf_ = std::string();
  }
  lock.unlock();
  hp.cv.notify_all();
  buf_.reserve((1u << 20) + 4096);
  return Status::Ok();
}

Status SnapshotStreamWriter::Add(std::string_view key, std::string_view value) {
  if (key.size() > 0xFFFF || value.size() > 0xFFFFFFFFull) {
    return Status::InvalidArgument(fmt::format("snapshot entry with a {}-byte key is too large", key.size()));
  }
  if (written_ >= expected_) return Status::InvalidArgument(fmt::format("{}: more entries than announced", path_));
  if (written_ > 0 && !(std::string_view(last_key_) < key)) {
    return Status::InvalidArgument(fmt::format("{}: entries out of order", path_));
  }
  last_key_.assign(key.data(), key.size());
  walfmt::PutU16(buf_, static_cast<uint16_t>(key.size()));
  buf_.append(key.data(), key.size());
  walfmt::PutU32(buf_, static_cast<uint32_t>(value.size()));
  buf_.append(value.data(), value.size());
  ++written_;
  if (buf_.size() >= (1u << 20)) return Flush();
  return Status::Ok();
}

Result<uint64_t> SnapshotStreamWriter::Finish() {
  if (written_ != expected_) {
    return Status::InvalidArgument(fmt::format("{}: {} entries written, {} announced", path_, written_, expected_));
  }
  if (!helper_) return Status::InvalidArgument(fmt::format("{}: finished already", path_));
  Helper& hp = *helper_;
  hp.Close();
  if (!hp.error.ok()) return hp.error;
  // The last buffer's entries, then the trailer, from this thread.
  const std::string_view entries = std::string_view(buf_).substr(hash_from_);
  const uint32_t crc = walfmt::crc32c::Extend(hp.crc, entries.data(), entries.size());
  const uint64_t fnv = fnv1a::Extend(hp.fnv, entries.data(), entries.size());
  buf_.append(kTrailerMagic, sizeof(kTrailerMagic));
  walfmt::PutU32(buf_, walfmt::MaskCrc(crc));
  walfmt::PutU64(buf_, fnv);
  if (Status st = Helper::WriteAll(fd_, buf_, path_); !st.ok()) return st;
  buf_.clear();
  helper_.reset();
  // Synced, so that a directory of such files renamed into place (a restore's
  // staging directory) holds them whole after a crash.
  const int fd = fd_;
  fd_ = -1;
  if (Status st = SyncAndClose(fd, path_); !st.ok()) return st;
  return fnv;
}

}  // namespace walfmt

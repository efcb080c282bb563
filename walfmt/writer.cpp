#include "walfmt/writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <zstd.h>

#include "walfmt/bytes.h"
#include "walfmt/file_io.h"
#include "walfmt/reader.h"
#include "walfmt/source.h"

namespace walfmt {
namespace {

std::string Errno(const char* what, const std::string& path) {
  return fmt::format("{}: {}: {}", path, what, std::strerror(errno));
}

Status MakeDirs(const std::string& dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty() && mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return Status::Io(Errno("mkdir", cur));
    }
    if (i < dir.size()) cur.push_back(dir[i]);
  }
  return Status::Ok();
}

}  // namespace

void WalWriter::CCtxFree::operator()(ZSTD_CCtx_s* c) const { ZSTD_freeCCtx(c); }

WalWriter::~WalWriter() {
  if (fd_ >= 0) {
    // A writer dropped without Close() still flushes what it buffered; errors
    // here cannot be reported, Close() is the checked path.
    (void)Sync();
    close(fd_);
  }
}

Result<std::unique_ptr<WalWriter>> WalWriter::Create(const WriterOptions& opt, uint64_t time_us) {
  if (Status st = MakeDirs(opt.wal_dir); !st.ok()) return st;
  auto segs = ListSegments(opt.wal_dir, nullptr);
  if (!segs.ok()) return segs.status();
  if (!segs->empty()) return Status::InvalidArgument(fmt::format("{}: already holds WAL segments", opt.wal_dir));
  if (opt.segment_bytes > kMaxSegmentBytes) {
    return Status::InvalidArgument(
        fmt::format("segment size {} is above the most a segment may hold ({})", opt.segment_bytes, kMaxSegmentBytes));
  }
  std::unique_ptr<WalWriter> w(new WalWriter(opt));
  w->time_us_ = time_us;
  if (Status st = w->StartSegment(0, 0, 0); !st.ok()) return st;
  return w;
}

Result<std::unique_ptr<WalWriter>> WalWriter::Open(const WriterOptions& opt, uint64_t time_us) {
  if (Status st = MakeDirs(opt.wal_dir); !st.ok()) return st;
  auto segs = ListSegments(opt.wal_dir, nullptr);
  if (!segs.ok()) return segs.status();
  if (segs->empty()) return Create(opt, time_us);
  std::unique_ptr<WalWriter> w(new WalWriter(opt));
  w->time_us_ = time_us;
  SegmentFile last = segs->back();
  // A last segment shorter than its header holds no record: a writer (of a
  // walcut before segments were created whole) was killed between creating
  // it and writing its header. Nothing can refer to it: it goes, and the
  // WAL continues from the segment before.
  if (struct stat sb{}; !last.compressed && segs->size() > 1 && ::stat(last.path.c_str(), &sb) == 0 &&
                        static_cast<uint64_t>(sb.st_size) < kSegmentHeaderSize) {
    if (::unlink(last.path.c_str()) != 0) return Status::Io(Errno("unlink", last.path));
    if (opt.fsync) {
      if (Status st = SyncDir(opt.wal_dir); !st.ok()) return st;
    }
    segs->pop_back();
    last = segs->back();
  }
  ScanOptions so;
  so.mode = RecoveryMode::kTolerateTornTail;
  so.is_last = true;
  SegmentScan scan = ScanSegmentFile(last, so, nullptr, nullptr);
  if (!scan.header_ok || scan.failed) {
    return Status::Corruption(fmt::format("{}: cannot continue this WAL: its last segment is damaged", last.path));
  }
  // Appending to another node's or cluster's log would chain foreign
  // segments to it: refuse before touching the file.
  if (scan.header.node_id != opt.node_id || scan.header.cluster_id != opt.cluster_id) {
    return Status::InvalidArgument(fmt::format(
        "{}: cannot continue this WAL: it belongs to node {} of cluster {:016x}, not node {} of cluster {:016x}",
        last.path, scan.header.node_id, scan.header.cluster_id, opt.node_id, opt.cluster_id));
  }
  if (last.compressed) {
    // Archived segments are never appended to: continue in a new one.
    if (Status st = w->StartSegment(last.index + 1, scan.valid_end, scan.last_record_crc); !st.ok()) return st;
    return w;
  }
  const int fd = open(last.path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::Io(Errno("open", last.path));
  if (scan.end == SegmentEnd::kTornTail && ftruncate(fd, static_cast<off_t>(scan.valid_end)) != 0) {
    Status st = Status::Io(Errno("ftruncate", last.path));
    close(fd);
    return st;
  }
  if (lseek(fd, static_cast<off_t>(scan.valid_end), SEEK_SET) < 0) {
    Status st = Status::Io(Errno("lseek", last.path));
    close(fd);
    return st;
  }
  w->fd_ = fd;
  w->index_ = last.index;
  w->seg_bytes_ = scan.valid_end;
  w->last_crc_ = scan.last_record_crc;
  return w;
}

// A segment appears whole: its header is written (and, with fsync, synced)
// under a hidden name, then linked to its own name, which must not exist.
// A writer killed in between leaves no headerless segment behind (it
// wrecked the next start: "its last segment is damaged"), only the hidden
// file, which the tools ignore and the next creation of that segment
// replaces.
Status WalWriter::StartSegment(uint64_t index, uint64_t prev_end, uint32_t prev_crc) {
  const std::string path = opt_.wal_dir + "/" + SegmentFileName(index, false);
  const std::string tmp = opt_.wal_dir + "/." + SegmentFileName(index, false) + ".new";
  (void)::unlink(tmp.c_str());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Io(Errno("create", tmp));
  SegmentHeader h;
  h.node_id = opt_.node_id;
  h.cluster_id = opt_.cluster_id;
  h.segment_index = index;
  h.prev_end_offset = prev_end;
  h.prev_last_crc = prev_crc;
  h.flags = index > 0 ? kSegmentFlagHasPredecessor : 0;
  h.created_time_us = time_us_;
  uint8_t hdr[kSegmentHeaderSize];
  EncodeSegmentHeader(h, hdr);
  fd_ = fd;
  index_ = index;
  seg_bytes_ = 0;
  last_crc_ = 0;
  if (Status st = WriteAll(reinterpret_cast<const char*>(hdr), sizeof(hdr)); !st.ok()) {
    (void)::unlink(tmp.c_str());
    return st;
  }
  if (opt_.fsync && fdatasync(fd) != 0) {
    Status st = Status::Io(Errno("fdatasync", tmp));
    (void)::unlink(tmp.c_str());
    return st;
  }
  if (::link(tmp.c_str(), path.c_str()) != 0) {
    Status st = Status::Io(Errno("create", path));
    (void)::unlink(tmp.c_str());
    return st;
  }
  (void)::unlink(tmp.c_str());
  if (opt_.fsync) {
    if (Status st = SyncDir(opt_.wal_dir); !st.ok()) return st;
  }
  seg_bytes_ = kSegmentHeaderSize;
  return Status::Ok();
}

Status WalWriter::WriteAll(const char* data, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = write(fd_, data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status::Io(Errno("write", opt_.wal_dir + "/" + SegmentFileName(index_, false)));
    done += static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status WalWriter::Sync() {
  if (fd_ < 0) return Status::InvalidArgument("WAL writer is closed");
  if (!buf_.empty()) {
    if (Status st = WriteAll(buf_.data(), buf_.size()); !st.ok()) return st;
    buf_.clear();
  }
  if (opt_.fsync && fdatasync(fd_) != 0) {
    return Status::Io(Errno("fdatasync", opt_.wal_dir + "/" + SegmentFileName(index_, false)));
  }
  return Status::Ok();
}

Status WalWriter::Roll() {
  if (Status st = Sync(); !st.ok()) return st;
  if (close(fd_) != 0) return Status::Io(Errno("close", opt_.wal_dir));
  fd_ = -1;
  const uint64_t old = index_;
  const uint64_t old_bytes = seg_bytes_;
  if (Status st = StartSegment(old + 1, seg_bytes_, last_crc_); !st.ok()) return st;
  if (opt_.archive_compressed) return Archive(old, old_bytes);
  return Status::Ok();
}

Status WalWriter::Archive(uint64_t index, uint64_t bytes) {
  const std::string plain = opt_.wal_dir + "/" + SegmentFileName(index, false);
  const std::string zst = opt_.wal_dir + "/" + SegmentFileName(index, true);
  // The segment just rolled: its size is known, and nothing appends to it.
  auto in = ReadWholeFile(plain, bytes);
  if (!in.ok()) return in.status();
  archive_in_ = std::move(in.value());
  // The same frame as ZstdCompress (source.h) makes: ZSTD_compress is
  // ZSTD_compressCCtx on a new context.
  if (!cctx_) {
    cctx_.reset(ZSTD_createCCtx());
    if (!cctx_) return Status::Internal("zstd: cannot create a compression context");
  }
  const size_t bound = ZSTD_compressBound(archive_in_.size());
  if (archive_out_.size() < bound) archive_out_.resize(bound);
  const size_t n = ZSTD_compressCCtx(cctx_.get(), archive_out_.data(), archive_out_.size(), archive_in_.data(),
                                     archive_in_.size(), opt_.zstd_level);
  if (ZSTD_isError(n)) return Status::Internal(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
  // Write aside, rename into place, then drop the original: at every moment
  // one complete copy exists (ListSegments prefers the .wal if both do).
  // Durable only when the WAL itself is synced (opt.fsync).
  if (Status st = WriteFileAtomic(zst, std::string_view(archive_out_.data(), n),
                                  opt_.fsync ? Durability::kSynced : Durability::kUnsynced);
      !st.ok()) {
    return st;
  }
  if (unlink(plain.c_str()) != 0) return Status::Io(Errno("unlink", plain));
  return Status::Ok();
}

Result<Lsn> WalWriter::AppendRaw(uint16_t type, uint16_t flags, std::span<const uint8_t> payload) {
  if (fd_ < 0) return Status::InvalidArgument("WAL writer is closed");
  if (payload.size() > kMaxRecordPayload) {
    return Status::InvalidArgument(
        fmt::format("record payload of {} bytes exceeds the limit of {}", payload.size(), kMaxRecordPayload));
  }
  const uint64_t total = kRecordHeaderSize + payload.size();
  if (seg_bytes_ > kSegmentHeaderSize && seg_bytes_ + total > opt_.segment_bytes) {
    if (Status st = Roll(); !st.ok()) return st;
  }
  uint8_t hdr[kRecordHeaderSize];
  EncodeRecordHeader(static_cast<RecordType>(type), flags, payload, hdr);
  const Lsn at{index_, seg_bytes_};
  buf_.append(reinterpret_cast<const char*>(hdr), sizeof(hdr));
  buf_.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  seg_bytes_ += total;
  last_crc_ = LoadU32(hdr);
  // Bound the buffer: past 4 MiB the bytes go to the file (the page cache).
  // A crash may or may not lose written-but-unsynced bytes; SimulateCrash
  // models the case where they survived.
  if (buf_.size() >= (4u << 20)) {
    if (Status st = WriteAll(buf_.data(), buf_.size()); !st.ok()) return st;
    buf_.clear();
  }
  return at;
}

Result<Lsn> WalWriter::Append(const Record& r) {
  scratch_.clear();
  if (Status st = EncodePayload(r, scratch_); !st.ok()) return st;
  return AppendRaw(static_cast<uint16_t>(TypeOf(r)), 0,
                   {reinterpret_cast<const uint8_t*>(scratch_.data()), scratch_.size()});
}

Status WalWriter::Close() {
  if (fd_ < 0) return Status::Ok();
  Status st = Sync();
  if (close(fd_) != 0 && st.ok()) st = Status::Io(Errno("close", opt_.wal_dir));
  fd_ = -1;
  return st;
}

Status WalWriter::SimulateCrash(uint64_t keep_unsynced_bytes) {
  if (fd_ < 0) return Status::InvalidArgument("WAL writer is closed");
  const size_t keep = static_cast<size_t>(std::min<uint64_t>(keep_unsynced_bytes, buf_.size()));
  Status st = WriteAll(buf_.data(), keep);
  buf_.clear();
  close(fd_);
  fd_ = -1;
  return st;
}

}  // namespace walfmt

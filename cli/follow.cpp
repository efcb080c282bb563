// The follow loop shared by dump --follow and verify --follow (follow.h).
#include "cli/follow.h"

#include <algorithm>
#include <optional>
#include <string>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

namespace walcut::cli {
namespace {

// Segment `index` of a WAL directory, plain or archived, if it exists.
std::optional<walfmt::SegmentFile> Existing(const std::string& dir, uint64_t index) {
  for (const bool z : {false, true}) {
    walfmt::SegmentFile f{dir + "/" + walfmt::SegmentFileName(index, z), index, z};
    if (::access(f.path.c_str(), F_OK) == 0) return f;
  }
  return std::nullopt;
}

// The passes over one followed segment as one scan: the counters added
// up, the ends from the last pass that read a record.
void Merge(walfmt::SegmentScan& acc, const walfmt::SegmentScan& s, bool first) {
  if (first) {
    acc = s;
    return;
  }
  const uint64_t last_end = acc.last_end, valid_end = acc.valid_end;
  const uint32_t last_crc = acc.last_crc, last_record_crc = acc.last_record_crc;
  const uint64_t records = acc.records, record_bytes = acc.record_bytes;
  acc = s;
  acc.records += records;
  acc.record_bytes += record_bytes;
  if (s.records == 0) {
    acc.last_end = last_end;
    acc.valid_end = std::max(valid_end, s.valid_end);
    acc.last_crc = last_crc;
    acc.last_record_crc = last_record_crc;
  }
}

// The options of one pass over a segment from `pos`, checking that it
// continues the segment before (`prev`) when there is one.
walfmt::ScanOptions PassOptions(walfmt::RecoveryMode mode, bool is_last, uint64_t pos,
                                const std::optional<walfmt::SegmentScan>& prev) {
  walfmt::ScanOptions so;
  so.mode = mode;
  so.is_last = is_last;
  so.start = pos;
  if (prev && prev->header_ok) {
    so.expect_node = true;
    so.node_id = prev->header.node_id;
    so.expect_cluster = true;
    so.cluster_id = prev->header.cluster_id;
  }
  return so;
}

// The pass over the last segment ended at the live end of the WAL: a record
// or a header still being written, or no more records yet.
bool AtLiveEnd(const walfmt::SegmentScan& s) {
  const bool short_header = !s.header_ok && s.file_bytes < walfmt::kSegmentHeaderSize;
  return s.end == walfmt::SegmentEnd::kClean || s.end == walfmt::SegmentEnd::kTornTail || short_header ||
         (s.end == walfmt::SegmentEnd::kDamaged && s.damaged_to_end);
}

// A complete segment whose scan ends the follow: it failed, or it is damaged
// and the mode does not skip damage.
bool EndsFollow(const walfmt::SegmentScan& s, walfmt::RecoveryMode mode) {
  const bool damaged = s.end == walfmt::SegmentEnd::kDamaged || s.end == walfmt::SegmentEnd::kBadHeader ||
                       s.end == walfmt::SegmentEnd::kIoError;
  return s.failed || (damaged && mode != walfmt::RecoveryMode::kSalvage);
}

}  // namespace

std::vector<walfmt::SegmentOutcome> FollowNodeWal(const NodeWal& nw, size_t first, const FollowOptions& opt,
                                                  const std::atomic<bool>& stop, const walfmt::RecordVisitor& visit,
                                                  const walfmt::ProblemSink& report) {
  std::vector<walfmt::SegmentOutcome> done;
  std::vector<walfmt::SegmentFile> known = nw.wal.segments;
  std::optional<walfmt::SegmentScan> prev;  // the segment before, merged
  size_t i = first;
  auto wait = [&] {
    if (opt.idle) opt.idle();
    const auto until = std::chrono::steady_clock::now() + opt.interval;
    while (!stop.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::min(opt.interval, std::chrono::milliseconds(10)));
    }
  };
  const walfmt::RecordVisitor checked = [&](const walfmt::RecordView& v) {
    if (stop.load(std::memory_order_relaxed)) return false;
    return visit(v);
  };
  // The first segment may not exist yet.
  while (known.empty() && !stop.load()) {
    if (auto f = Existing(nw.wal_dir, 0)) {
      known.push_back(*f);
    } else {
      wait();
    }
  }
  while (i < known.size() && !stop.load()) {
    walfmt::SegmentFile file = known[i];
    uint64_t pos = 0;  // where the next pass starts: after the last complete record read
    // The size at the last pass that ended at the live end: until the file
    // grows (or a successor appears) another pass would read the same bytes.
    std::optional<uint64_t> live_size;
    walfmt::SegmentOutcome acc;
    auto give = [&acc, &report](const walfmt::Problem& p) {
      acc.problems.push_back(p);
      report(p);
    };
    for (;;) {
      // Whether the writer moved on is looked at before the pass: a
      // segment that has a successor is complete, so the pass that
      // follows reads it to its true end.
      const std::optional<walfmt::SegmentFile> next =
          i + 1 < known.size() ? known[i + 1] : Existing(nw.wal_dir, file.index + 1);
      if (live_size && !next) {
        struct stat st {};
        if (::stat(file.path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == *live_size) {
          wait();
          if (stop.load()) {
            done.push_back(std::move(acc));
            return done;
          }
          continue;
        }
      }
      if (!file.compressed && ::access(file.path.c_str(), F_OK) != 0) {
        // Archived while it was followed: read on in the archive.
        if (auto z = Existing(nw.wal_dir, file.index); z && z->compressed) file = *z;
      }
      const walfmt::ScanOptions so = PassOptions(opt.mode, !next, pos, prev);
      std::vector<walfmt::Problem> problems;
      walfmt::SegmentScan s = walfmt::ScanSegmentFile(
          file, so, checked, [&problems](const walfmt::Problem& p) { problems.push_back(p); },
          pos == 0 && prev ? &*prev : nullptr);
      Merge(acc.scan, s, pos == 0);
      if (s.end == walfmt::SegmentEnd::kStopped) {
        for (const auto& p : problems) give(p);
        done.push_back(std::move(acc));
        return done;
      }
      // The live end of the WAL: a record or a header still being
      // written, or no more records yet. Read again from the last
      // complete record once the writer added to it.
      if (!next && AtLiveEnd(s)) {
        // Damage skipped before the live end (salvage) is reported once;
        // the end itself is not damage yet.
        if (s.header_ok) {
          for (const auto& p : problems) {
            if (p.offset < s.last_end) give(p);
          }
        }
        if (stop.load()) {
          done.push_back(std::move(acc));
          return done;
        }
        pos = s.header_ok ? std::max(pos, s.last_end) : 0;
        live_size = s.file_bytes;
        wait();
        continue;
      }
      for (const auto& p : problems) give(p);
      prev = acc.scan;
      done.push_back(std::move(acc));
      if (EndsFollow(s, opt.mode)) return done;
      if (i + 1 >= known.size()) known.push_back(*next);
      break;
    }
    ++i;
  }
  return done;
}

}  // namespace walcut::cli

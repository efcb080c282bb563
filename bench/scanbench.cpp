// scanbench: the cost of the cut scan's logic per record, without the
// reader. Reads the first --records intact records of one node's WAL into
// memory once (the reader is not timed), then feeds them round after round
// to (a) a visitor that only touches the record, as `stats` would without
// its counting, and (b) cut::SummaryBuilder, the logic `walcut cuts` runs on
// every record. Both go through a walfmt::RecordVisitor (std::function), as
// in the real scan. Records reach the visitors a chunk at a time, just after
// their bytes were read (as the checksum reads them). Prints CPU ns per record for each, min and median over
// the rounds, and the difference: what the cut logic adds per record.
//
//   scanbench [--records N] [--rounds R] NODE_WAL_DIR
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "cut/scan.h"
#include "walfmt/reader.h"

namespace {

using walcut::bench::CpuSeconds;

struct Stored {
  walfmt::Lsn lsn;
  walfmt::RecordType type;
  uint16_t flags;
  uint32_t header_crc;
  size_t offset;
  size_t length;
};

// Calls `visit` on the records a chunk at a time, after touching each cache
// line of each chunk's payloads: in the real scan the checksum has just brought a record
// into the cache when the visitor sees it.
uint64_t Feed(const std::vector<walfmt::RecordView>& views, const walfmt::RecordVisitor& visit) {
  constexpr size_t kChunk = 256;
  uint64_t sum = 0;
  for (size_t i = 0; i < views.size(); i += kChunk) {
    const size_t end = std::min(views.size(), i + kChunk);
    for (size_t j = i; j < end; ++j) {
      const auto& p = views[j].payload;
      for (size_t o = 0; o < p.size(); o += 64) sum += p[o];
      if (!p.empty()) sum += p.back();
    }
    for (size_t j = i; j < end; ++j) visit(views[j]);
  }
  return sum;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t max_records = 5'000'000;
  uint64_t rounds = 7;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    auto value = [&](const char* name) -> uint64_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "scanbench: %s needs a value\n", name);
        std::exit(2);
      }
      return std::strtoull(argv[++i], nullptr, 10);
    };
    if (std::strcmp(argv[i], "--records") == 0) {
      max_records = value("--records");
    } else if (std::strcmp(argv[i], "--rounds") == 0) {
      rounds = std::max<uint64_t>(1, value("--rounds"));
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr, "scanbench: unknown option %s\n", argv[i]);
      return 2;
    } else {
      dir = argv[i];
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "usage: scanbench [--records N] [--rounds R] NODE_WAL_DIR\n");
    return 2;
  }
  std::vector<walfmt::Problem> problems;
  auto segs = walfmt::ListSegments(dir, [&](const walfmt::Problem& p) { problems.push_back(p); });
  if (!segs.ok() || segs->empty()) {
    std::fprintf(stderr, "scanbench: %s: no WAL segments\n", dir.c_str());
    return 2;
  }
  std::vector<uint8_t> arena;
  std::vector<Stored> recs;
  walfmt::NodeReadOptions ro;
  ro.mode = walfmt::RecoveryMode::kPointInTime;
  walfmt::ReadNodeWal(
      *segs, ro,
      [&](const walfmt::RecordView& v) {
        recs.push_back(Stored{v.lsn, v.type, v.flags, v.header_crc, arena.size(), v.payload.size()});
        arena.insert(arena.end(), v.payload.begin(), v.payload.end());
        return recs.size() < max_records;
      },
      [&](const walfmt::Problem& p) { problems.push_back(p); });
  for (const auto& p : problems) {
    if (p.fatal) {
      std::fprintf(stderr, "scanbench: %s\n", p.ToString().c_str());
      return 1;
    }
  }
  std::vector<walfmt::RecordView> views;
  views.reserve(recs.size());
  for (const Stored& r : recs) {
    views.push_back(walfmt::RecordView{r.lsn, r.type, r.flags, r.header_crc,
                                       std::span<const uint8_t>(arena.data() + r.offset, r.length)});
  }
  std::printf("scanbench: %zu records, %zu payload bytes from %s\n", views.size(), arena.size(), dir.c_str());

  walcut::cut::ScanOptions so;
  std::vector<double> touch_ns, scan_ns;
  uint64_t sink = 0, commits = 0;
  for (uint64_t r = 0; r < rounds; ++r) {
    {
      uint64_t local = 0;
      const walfmt::RecordVisitor visit = [&local](const walfmt::RecordView& v) {
        local += static_cast<uint64_t>(v.type) + v.payload.size();
        return true;
      };
      const double t0 = CpuSeconds();
      sink += Feed(views, visit);
      touch_ns.push_back((CpuSeconds() - t0) * 1e9 / static_cast<double>(views.size()));
      sink += local;
    }
    {
      walcut::cut::SummaryBuilder b(so);
      const walfmt::RecordVisitor visit = [&b](const walfmt::RecordView& v) {
        b.Visit(v);
        return true;
      };
      const double t0 = CpuSeconds();
      sink += Feed(views, visit);
      const walcut::cut::NodeSummary s = b.Finish();
      scan_ns.push_back((CpuSeconds() - t0) * 1e9 / static_cast<double>(views.size()));
      commits = s.commits;
    }
  }
  std::printf("%-12s %10s %10s\n", "ns/record", "min", "median");
  std::printf("%-12s %10.2f %10.2f\n", "touch", *std::min_element(touch_ns.begin(), touch_ns.end()), Median(touch_ns));
  std::printf("%-12s %10.2f %10.2f\n", "cut scan", *std::min_element(scan_ns.begin(), scan_ns.end()), Median(scan_ns));
  std::printf("cut logic adds %.2f ns/record (min against min); %" PRIu64 " commits; checksum %" PRIu64 "\n",
              *std::min_element(scan_ns.begin(), scan_ns.end()) - *std::min_element(touch_ns.begin(), touch_ns.end()),
              commits, sink);
  return 0;
}

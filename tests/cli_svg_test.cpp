// End to end: `walcut cut show DIR K --svg FILE` writes a picture that a real
// renderer (rsvg-convert, Debian package librsvg2-bin, installed by
// scripts/deps.sh) turns into a valid, non-blank PNG; the option never writes
// into its input.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"

using walcut::test::Slurp;
using walcut::test::Spit;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

const std::string kHealthy = std::string(WALCUT_SOURCE_DIR) + "/samples/healthy";

bool HaveRsvg() { return std::system("command -v rsvg-convert >/dev/null 2>&1") == 0; }

uint32_t Be32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) | (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) | uint32_t{static_cast<uint8_t>(s[at + 3])};
}

struct Png {
  bool valid = false;
  uint32_t width = 0;
  uint32_t height = 0;
  uint64_t idat_bytes = 0;  // compressed pixel data: a blank image compresses to almost nothing
  std::string problem;
};

// Walks the chunks: signature, IHDR first, IDAT, IEND last; no decoding.
Png ParsePng(const std::string& s) {
  Png p;
  static const std::string kSig("\x89PNG\r\n\x1a\n", 8);
  if (s.size() < 8 + 25 || s.compare(0, 8, kSig) != 0) {
    p.problem = "no PNG signature";
    return p;
  }
  size_t at = 8;
  bool first = true, end = false;
  while (at + 12 <= s.size() && !end) {
    const uint32_t len = Be32(s, at);
    const std::string type = s.substr(at + 4, 4);
    if (at + 12 + len > s.size()) {
      p.problem = "chunk " + type + " runs past the end";
      return p;
    }
    if (first && (type != "IHDR" || len != 13)) {
      p.problem = "the first chunk is not IHDR";
      return p;
    }
    if (type == "IHDR") {
      p.width = Be32(s, at + 8);
      p.height = Be32(s, at + 12);
    }
    if (type == "IDAT") p.idat_bytes += len;
    if (type == "IEND") end = true;
    first = false;
    at += 12 + len;
  }
  if (!end) {
    p.problem = "no IEND chunk";
    return p;
  }
  p.valid = true;
  return p;
}

// "width=\"1200.0\"" -> "1200.0" from the root element.
std::string RootAttr(const std::string& svg, const std::string& name) {
  const size_t root = svg.find("<svg ");
  const size_t at = svg.find(" " + name + "=\"", root);
  if (root == std::string::npos || at == std::string::npos) return "";
  const size_t from = at + name.size() + 3;
  return svg.substr(from, svg.find('"', from) - from);
}

}  // namespace

TEST_CASE("cut show --svg: the picture of samples/healthy cut 3 renders to a valid, non-blank PNG") {
  TempDir t;
  const std::string svg_path = t.path + "/cut3.svg";
  auto r = Walcut(fmt::format("cut show '{}' 3 --svg '{}'", kHealthy, svg_path));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  // The normal report, then the file named on stdout.
  CHECK(r.out.rfind("cut 3: consistent", 0) == 0);
  CHECK(r.out.find("\nwrote " + svg_path + "\n") != std::string::npos);
  CHECK(r.out.substr(r.out.size() - ("wrote " + svg_path + "\n").size()) == "wrote " + svg_path + "\n");
  const std::string svg = Slurp(svg_path);
  REQUIRE(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find(">cut 3: consistent</text>") != std::string::npos);
  // No temporary file left behind.
  CHECK(std::system(fmt::format("test $(ls -A '{}' | wc -l) -eq 1", t.path).c_str()) == 0);

  if (!HaveRsvg()) {
    WARN(
        "rsvg-convert not found (Debian package librsvg2-bin; scripts/deps.sh installs it): "
        "the PNG rendering check is skipped");
    return;
  }
  const std::string png_path = t.path + "/cut3.png";
  REQUIRE(std::system(fmt::format("rsvg-convert -o '{}' '{}' 2>'{}/rsvg.err'", png_path, svg_path, t.path).c_str()) ==
          0);
  const Png png = ParsePng(Slurp(png_path));
  INFO(png.problem);
  REQUIRE(png.valid);
  CHECK(png.width == 1200);
  CHECK(png.height > 200);
  // A blank picture of the same size, rendered the same way: the diagram's
  // pixel data must be much larger than a single colour's.
  const std::string blank_path = t.path + "/blank.svg";
  Spit(blank_path, fmt::format("<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
                               "width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\"><rect x=\"0\" y=\"0\" "
                               "width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/></svg>\n",
                               RootAttr(svg, "width"), RootAttr(svg, "height")));
  REQUIRE(std::system(fmt::format("rsvg-convert -o '{0}/blank.png' '{1}'", t.path, blank_path).c_str()) == 0);
  const Png blank = ParsePng(Slurp(t.path + "/blank.png"));
  REQUIRE(blank.valid);
  CHECK(blank.width == png.width);
  CHECK(blank.height == png.height);
  INFO("diagram IDAT " << png.idat_bytes << " bytes, blank IDAT " << blank.idat_bytes << " bytes");
  CHECK(png.idat_bytes > 4 * blank.idat_bytes);
  CHECK(png.idat_bytes > 10000);
}

TEST_CASE("cut show --svg: JSON output unchanged, the file replaced, never written into the input") {
  TempDir t;
  const std::string svg_path = t.path + "/c.svg";
  Spit(svg_path, "old");
  auto r = Walcut(fmt::format("cut show --format json '{}' 2 --svg '{}'", kHealthy, svg_path));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("wrote") == std::string::npos);
  CHECK(nlohmann::json::parse(r.out)["schema"] == "walcut.cut/1");
  const std::string svg = Slurp(svg_path);
  CHECK(svg.find(">cut 2: consistent</text>") != std::string::npos);
  // Times are UTC through the cluster's epoch, as in every other output.
  CHECK(svg.find(">from 2026-11-30T12:00:00.") != std::string::npos);
  CHECK(svg.find("committed at 2026-11-30T12:00:00.") != std::string::npos);

  // Inside the input (a copy, so a failure of the check cannot touch the
  // sources): refused as a usage error, nothing written.
  REQUIRE(std::system(fmt::format("cp -r '{}' '{}/cluster'", kHealthy, t.path).c_str()) == 0);
  auto in = Walcut(fmt::format("cut show '{0}/cluster' 3 --svg '{0}/cluster/node-0/x.svg'", t.path));
  CHECK(in.code == 2);
  CHECK(in.err.find("walcut never writes to its input") != std::string::npos);
  CHECK(std::system(fmt::format("test ! -e '{}/cluster/node-0/x.svg'", t.path).c_str()) == 0);
  // A directory is not a file name.
  auto dir = Walcut(fmt::format("cut show '{}' 3 --svg '{}'", kHealthy, t.path));
  CHECK(dir.code == 2);
  // An unwritable place is an I/O error.
  auto io = Walcut(fmt::format("cut show '{}' 3 --svg '{}/no/such/dir/c.svg'", kHealthy, t.path));
  CHECK(io.code == 3);
  // --help names the option.
  auto help = Walcut("cut show --help");
  CHECK(help.out.find("--svg") != std::string::npos);
}

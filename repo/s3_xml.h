// Internal to repo/: the small XML reader of S3's answers (listings,
// multipart answers, errors). It reads elements, their text and the five
// predefined and numeric character references; attributes are skipped, and
// a DOCTYPE, a processing instruction other than the <?xml ...?> declaration,
// and CDATA are refused. Bounded: input size, depth and element count; a
// malformed document is an error, never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "walfmt/status.h"

namespace walcut::repo {

struct XmlElement {
  std::string name;  // without namespace prefix
  std::string text;  // the element's own character data, references decoded
  std::vector<XmlElement> children;

  // The first child named `name`, or nullptr.
  const XmlElement* Child(std::string_view child_name) const;
  // The text of the first child named `name`, or "" without one.
  std::string ChildText(std::string_view child_name) const;
};

struct XmlLimits {
  size_t max_bytes = 32 << 20;
  int max_depth = 16;
  size_t max_elements = 200000;
};

// The document's root element. Errors say what is wrong and at which byte.
walfmt::Result<XmlElement> ParseXml(std::string_view doc, const XmlLimits& limits = {});

// A decimal unsigned 64-bit number and nothing else; nullopt-like failure as false.
bool ParseXmlUint(std::string_view text, uint64_t& out);

}  // namespace walcut::repo

#include "repo/s3_xml.h"

#include <fmt/format.h>

namespace walcut::repo {

using walfmt::Result;
using walfmt::Status;

namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == ':' || static_cast<unsigned char>(c) >= 0x80;
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Parser {
 public:
  Parser(std::string_view doc, const XmlLimits& limits) : s_(doc), limits_(limits) {}

  Result<XmlElement> Document() {
    if (s_.size() > limits_.max_bytes) return Fail(fmt::format("larger than {} bytes", limits_.max_bytes));
    SkipMisc();
    if (!Ok()) return Error();
    if (pos_ >= s_.size() || s_[pos_] != '<') return Fail("no root element");
    XmlElement root;
    if (!Element(root, 1)) return Error();
    SkipMisc();
    if (!Ok()) return Error();
    if (pos_ != s_.size()) return Fail("content after the root element");
    return root;
  }

 private:
  bool Ok() const { return error_.empty(); }
  Status Error() const { return Status::Io(error_); }
  Status Fail(std::string why) {
    SetError(std::move(why));
    return Error();
  }
  bool SetError(std::string why) {
    if (error_.empty()) error_ = fmt::format("malformed XML at byte {}: {}", pos_, why);
    return false;
  }
  bool StartsWith(std::string_view p) const { return s_.substr(pos_, p.size()) == p; }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r' || s_[pos_] == '\n')) ++pos_;
  }
  bool SkipPast(std::string_view end) {
    const size_t at = s_.find(end, pos_);
    if (at == std::string_view::npos) return SetError(fmt::format("no closing '{}'", end));
    pos_ = at + end.size();
    return true;
  }

  // Whitespace, comments and (at the start) the XML declaration.
  void SkipMisc() {
    for (;;) {
      SkipSpace();
      if (StartsWith("<!--")) {
        if (!SkipPast("-->")) return;
      } else if (StartsWith("<?xml") && !seen_decl_ && pos_ < 40) {
        seen_decl_ = true;
        if (!SkipPast("?>")) return;
      } else if (StartsWith("<!") || StartsWith("<?")) {
        SetError("DOCTYPE, CDATA and processing instructions are not accepted");
        return;
      } else {
        return;
      }
    }
  }

  bool Name(std::string& out) {
    const size_t start = pos_;
    while (pos_ < s_.size() && NameChar(s_[pos_])) ++pos_;
    if (pos_ == start) return SetError("expected a name");
    std::string_view n = s_.substr(start, pos_ - start);
    out.assign(n);
    return true;
  }

  // Skips attributes up to '>' or '/>'; sets `empty` for the latter.
  bool TagEnd(bool& empty) {
    char quote = 0;
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>') {
        empty = false;
        return true;
      } else if (c == '/' && pos_ < s_.size() && s_[pos_] == '>') {
        ++pos_;
        empty = true;
        return true;
      } else if (c == '<') {
        return SetError("'<' inside a tag");
      }
    }
    return SetError("a tag is not closed");
  }

  bool Reference(std::string& out) {
    const size_t semi = s_.find(';', pos_);
    if (semi == std::string_view::npos || semi - pos_ > 12) return SetError("an '&' without a reference");
    const std::string_view ref = s_.substr(pos_ + 1, semi - pos_ - 1);
    static constexpr std::pair<std::string_view, char> kNamed[] = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    for (const auto& [n, c] : kNamed) {
      if (ref == n) {
        out += c;
        pos_ = semi + 1;
        return true;
      }
    }
    if (ref.size() < 2 || ref[0] != '#') return SetError(fmt::format("unknown entity '&{};'", ref));
    const bool hex = ref[1] == 'x';
    const std::string_view digits = ref.substr(hex ? 2 : 1);
    if (digits.empty()) return SetError("an empty character reference");
    uint32_t cp = 0;
    for (const char c : digits) {
      uint32_t d = 0;
      if (c >= '0' && c <= '9') {
        d = static_cast<uint32_t>(c - '0');
      } else if (hex && c >= 'a' && c <= 'f') {
        d = static_cast<uint32_t>(c - 'a' + 10);
      } else if (hex && c >= 'A' && c <= 'F') {
        d = static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return SetError("a bad digit in a character reference");
      }
      cp = cp * (hex ? 16 : 10) + d;
      if (cp > 0x10FFFF) return SetError("a character reference beyond U+10FFFF");
    }
    if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) return SetError("a character reference to U+0 or a surrogate");
    AppendUtf8(out, cp);
    pos_ = semi + 1;
    return true;
  }

  // At '<' of a start tag: the element, its text and its children.
  bool Element(XmlElement& el, int depth) {
    if (depth > limits_.max_depth) return SetError(fmt::format("nested deeper than {}", limits_.max_depth));
    if (++elements_ > limits_.max_elements) return SetError(fmt::format("more than {} elements", limits_.max_elements));
    ++pos_;
    std::string qname;
    if (!Name(qname)) return false;
    const size_t colon = qname.rfind(':');
    el.name = colon == std::string::npos ? qname : qname.substr(colon + 1);
    bool empty = false;
    if (!TagEnd(empty)) return false;
    if (empty) return true;
    for (;;) {
      if (pos_ >= s_.size()) return SetError(fmt::format("element <{}> is not closed", qname));
      const char c = s_[pos_];
      if (c == '&') {
        if (!Reference(el.text)) return false;
      } else if (c != '<') {
        el.text += c;
        ++pos_;
      } else if (StartsWith("</")) {
        pos_ += 2;
        std::string end;
        if (!Name(end)) return false;
        if (end != qname) return SetError(fmt::format("</{}> closes <{}>", end, qname));
        SkipSpace();
        if (pos_ >= s_.size() || s_[pos_] != '>') return SetError("an end tag without '>'");
        ++pos_;
        return true;
      } else if (StartsWith("<!--")) {
        if (!SkipPast("-->")) return false;
      } else if (StartsWith("<!") || StartsWith("<?")) {
        return SetError("DOCTYPE, CDATA and processing instructions are not accepted");
      } else {
        el.children.emplace_back();
        if (!Element(el.children.back(), depth + 1)) return false;
      }
    }
  }

  std::string_view s_;
  XmlLimits limits_;
  size_t pos_ = 0;
  size_t elements_ = 0;
  bool seen_decl_ = false;
  std::string error_;
};

}  // namespace

const XmlElement* XmlElement::Child(std::string_view child_name) const {
  for (const auto& c : children) {
    if (c.name == child_name) return &c;
  }
  return nullptr;
}

std::string XmlElement::ChildText(std::string_view child_name) const {
  const XmlElement* c = Child(child_name);
  return c == nullptr ? std::string() : c->text;
}

Result<XmlElement> ParseXml(std::string_view doc, const XmlLimits& limits) { return Parser(doc, limits).Document(); }

bool ParseXmlUint(std::string_view text, uint64_t& out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    const auto d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}

}  // namespace walcut::repo

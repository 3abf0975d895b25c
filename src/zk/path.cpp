#include <dlock/zk/path.hpp>

#include <dlock/error.hpp>

namespace dlock::zk {

namespace {

// The code point of the UTF-8 sequence at path[i], and its length in `size`;
// -1 for bytes that are not well-formed UTF-8 (the server would decode them
// as U+FFFD, which it refuses).
long decode_utf8(std::string_view path, std::size_t i, std::size_t& size) noexcept {
  auto byte = [&](std::size_t k) { return k < path.size() ? static_cast<unsigned char>(path[k]) : 0u; };
  unsigned lead = byte(i);
  size = 1;
  if (lead < 0x80) return static_cast<long>(lead);
  std::size_t length = lead >= 0xf0 && lead <= 0xf4 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 && lead < 0xe0 ? 2 : 0;
  if (length == 0 || (lead >= 0xf0 && length != 4)) return -1;
  long cp = static_cast<long>(lead & (0x7fu >> length));
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0u) != 0x80u) return -1;
    cp = (cp << 6) | static_cast<long>(byte(i + k) & 0x3fu);
  }
  static constexpr long smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < smallest[length] || cp > 0x10ffff) return -1;  // overlong, or beyond Unicode
  size = length;
  return cp;
}

// The characters ZooKeeper's PathUtils.validatePath refuses, on the UTF-16
// it decodes the path into: C0 and C1 controls, surrogates (so any character
// beyond U+FFFF, which Java stores as a surrogate pair), the private use area
// U+E000-U+F8FF, and U+FFF0-U+FFFF.
bool refused_by_server(long cp) noexcept {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0xd800 && cp <= 0xf8ff) || cp >= 0xfff0;
}

}  // namespace

std::string_view path_problem(std::string_view path, bool sequential) noexcept {
  if (path.empty()) return "the path is empty";
  if (path.front() != '/') return "the path does not start with '/'";
  if (path.size() == 1) return {};
  if (path.back() == '/' && !sequential) return "the path ends with '/'";
  std::size_t start = 1;  // first character of the current component
  for (std::size_t i = 1, size = 1; i <= path.size(); i += size) {
    size = 1;
    if (i < path.size()) {
      auto c = static_cast<unsigned char>(path[i]);
      if (c == 0) return "the path contains a NUL character";
      if (c < 0x20 || c == 0x7f) return "the path contains a control character";
      long cp = decode_utf8(path, i, size);
      if (cp < 0) return "the path is not valid UTF-8";
      if (refused_by_server(cp)) return "the path contains a character ZooKeeper refuses (a control, a surrogate "
                                        "or a character beyond U+FFFF, U+E000-U+F8FF, U+FFF0-U+FFFF)";
      if (c != '/') continue;
    }
    std::string_view component = path.substr(start, i - start);
    bool last = i == path.size();
    if (component.empty() && !(last && sequential)) return "the path contains an empty component (\"//\")";
    if (component == "." || component == "..") return "the path contains a \".\" or \"..\" component";
    start = i + 1;
  }
  return {};
}

error_code validate_path(std::string_view path, bool sequential) noexcept {
  return path_problem(path, sequential).empty() ? error_code{} : make_error_code(dlock::error::invalid_argument);
}

}  // namespace dlock::zk

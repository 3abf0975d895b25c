#include <dlock/zk/path.hpp>

#include <dlock/error.hpp>

#include <algorithm>

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

// What the server would refuse among the characters after the leading '/'.
std::string_view character_problem(std::string_view rest) noexcept {
  // Printable ASCII, nearly every path: one tight pass, no decoding.
  bool printable = true;
  for (char ch : rest) printable &= static_cast<unsigned char>(ch) - 0x20u < 0x5fu;
  if (printable) return {};
  for (std::size_t i = 0, size = 1; i < rest.size(); i += size) {
    auto c = static_cast<unsigned char>(rest[i]);
    if (c == 0) return "the path contains a NUL character";
    if (c < 0x20 || c == 0x7f) return "the path contains a control character";
    if (decode_utf8(rest, i, size) < 0) return "the path is not valid UTF-8";
  }
  for (std::size_t i = 0, size = 1; i < rest.size(); i += size)
    if (refused_by_server(decode_utf8(rest, i, size)))
      return "the path contains a character ZooKeeper refuses (a control, a surrogate "
             "or a character beyond U+FFFF, U+E000-U+F8FF, U+FFF0-U+FFFF)";
  return {};
}

// An empty, "." or ".." component; a sequential path's last one may be empty
// (the server appends the sequence number).
std::string_view component_problem(std::string_view path, bool sequential) noexcept {
  for (std::size_t start = 1; start <= path.size();) {
    auto end = std::min(path.find('/', start), path.size());
    auto component = path.substr(start, end - start);
    bool last = end == path.size();
    if (component.empty() && !(last && sequential)) return "the path contains an empty component (\"//\")";
    if (component == "." || component == "..") return "the path contains a \".\" or \"..\" component";
    start = end + 1;
  }
  return {};
}

}  // namespace

std::string_view path_problem(std::string_view path, bool sequential) noexcept {
  if (path.empty()) return "the path is empty";
  if (path.front() != '/') return "the path does not start with '/'";
  if (path.size() == 1) return {};
  if (path.back() == '/' && !sequential) return "the path ends with '/'";
  if (auto problem = character_problem(path.substr(1)); !problem.empty()) return problem;
  return component_problem(path, sequential);
}

error_code validate_path(std::string_view path, bool sequential) noexcept {
  return path_problem(path, sequential).empty() ? error_code{} : make_error_code(dlock::error::invalid_argument);
}

}  // namespace dlock::zk

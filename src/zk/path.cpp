#include <dlock/zk/path.hpp>

#include <dlock/error.hpp>

namespace dlock::zk {

std::string_view path_problem(std::string_view path, bool sequential) noexcept {
  if (path.empty()) return "the path is empty";
  if (path.front() != '/') return "the path does not start with '/'";
  if (path.size() == 1) return {};
  if (path.back() == '/' && !sequential) return "the path ends with '/'";
  std::size_t start = 1;  // first character of the current component
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size()) {
      auto c = static_cast<unsigned char>(path[i]);
      if (c == 0) return "the path contains a NUL character";
      if (c < 0x20 || c == 0x7f) return "the path contains a control character";
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

#include "dlock/secrets.hpp"

namespace dlock::cli {

std::string_view without_line_end(std::string_view text) noexcept {
  if (!text.ends_with('\n')) return text;
  text.remove_suffix(1);
  if (text.ends_with('\r')) text.remove_suffix(1);
  return text;
}

std::optional<digest_identity> parse_digest(std::string_view text) {
  auto colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  return digest_identity{std::string(text.substr(0, colon)), std::string(text.substr(colon + 1))};
}

}  // namespace dlock::cli

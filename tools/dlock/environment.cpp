#include "dlock/environment.hpp"

#include "dlock/secrets.hpp"

#include <algorithm>
#include <string_view>

namespace dlock::cli {
namespace {

std::string_view name_of(std::string_view assignment) {
  return assignment.substr(0, assignment.find('='));
}

bool replaced(std::string_view name, const std::vector<std::string>& assignments) {
  if (name == fencing_token_variable || name == lock_name_variable) return true;
  if (name == redis_password_variable || name == sentinel_password_variable || name == zk_auth_variable) return true;
  return std::any_of(assignments.begin(), assignments.end(),
                     [name](const std::string& a) { return name_of(a) == name; });
}

}  // namespace

std::vector<std::string> child_environment(const char* const* inherited,
                                           const std::vector<std::string>& assignments) {
  std::vector<std::string> out;
  for (auto entry = inherited; entry && *entry; ++entry)
    if (!replaced(name_of(*entry), assignments)) out.emplace_back(*entry);
  out.insert(out.end(), assignments.begin(), assignments.end());
  return out;
}

}  // namespace dlock::cli

/// @file
/// A Redis command, encoded as a RESP array of bulk strings (binary safe).
#pragma once

#include <dlock/detail/require_cxx20.hpp>

#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace dlock::redis {

/// A Redis command: its arguments, encoded as RESP bulk strings.
///
/// Arguments are encoded as they are added; the header is prepended by
/// `encoded()`. Strings may hold any bytes (NUL, CR, LF).
///
///     command{"SET", key, token, "NX", "PX"}.arg(ttl_ms)
class command {
 public:
  command() = default;  ///< no arguments yet

  /// The arguments in order, the command's name first.
  command(std::initializer_list<std::string_view> args) {
    for (auto a : args) arg(a);
  }
  /// command("SET", key, value): no initializer_list, so it is safe inside
  /// a co_await expression with g++ 12 (whose coroutines mishandle braced lists).
  template <class... Args>
  explicit command(std::string_view name, const Args&... args) {
    arg(name);
    (arg(args), ...);
  }
  /// The arguments in order, the command's name first.
  explicit command(const std::vector<std::string>& args) {
    for (const auto& a : args) arg(a);
  }

  /// Appends an argument (any bytes).
  command& arg(std::string_view a) {
    if (body_.empty()) body_.reserve(160 + a.size());  // room for a lock's SET or script call, and the header
    body_ += '$';
    append_number(static_cast<std::int64_t>(a.size()));
    body_.append("\r\n", 2);  // lengths given: the compiler does not always fold strlen here
    body_.append(a.data(), a.size());
    body_.append("\r\n", 2);
    ++count_;
    return *this;
  }
  command& arg(const char* a) { return arg(std::string_view(a)); }         ///< appends a C string
  command& arg(const std::string& a) { return arg(std::string_view(a)); }  ///< appends a string

  /// Appends an integer, in decimal.
  template <class Int, std::enable_if_t<std::is_integral_v<Int>, int> = 0>
  command& arg(Int v) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
    return arg(std::string_view(digits, static_cast<std::size_t>(end - digits)));
  }

  std::size_t size() const noexcept { return count_; }   ///< the number of arguments
  bool empty() const noexcept { return count_ == 0; }  ///< true without arguments

  /// The full RESP encoding ("*N\r\n" + arguments).
  std::string encoded() const {
    std::string out;
    out.reserve(body_.size() + 16);
    out += '*';
    out += std::to_string(count_);
    out += "\r\n";
    out += body_;
    return out;
  }
  /// The same, reusing this command's buffer (one allocation less).
  std::string take_encoded() && {
    char header[24];
    header[0] = '*';
    auto end = std::to_chars(header + 1, header + sizeof header - 2, count_).ptr;
    *end++ = '\r';
    *end++ = '\n';
    body_.insert(0, header, static_cast<std::size_t>(end - header));
    count_ = 0;
    return std::move(body_);
  }
  /// The arguments alone, without the array header.
  const std::string& body() const noexcept { return body_; }

 private:
  void append_number(std::int64_t v) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
    body_.append(digits, static_cast<std::size_t>(end - digits));
  }

  std::string body_;
  std::size_t count_ = 0;
};

}  // namespace dlock::redis

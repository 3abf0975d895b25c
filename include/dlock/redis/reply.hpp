/// @file
/// One RESP2 reply: status, error, integer, bulk string, nil or array.
#pragma once

#include <dlock/detail/require_cxx20.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::redis {
namespace detail {
struct reply_builder;
}

/// One reply of a Redis server (RESP2).
class reply {
 public:
  /// The RESP2 reply types.
  enum class kind : std::uint8_t {
    nil,      ///< a null bulk string or array (a missing key)
    status,   ///< a simple string, such as "OK"
    error,    ///< an error, such as "ERR ..."
    integer,  ///< a signed 64-bit integer
    bulk,     ///< a binary-safe string
    array,    ///< a list of replies
  };

  reply() = default;  ///< a nil reply
  static reply make_nil() { return reply(); }  ///< a nil reply

  /// A status reply with text `s`.
  static reply make_status(std::string s) { return reply(kind::status, std::move(s)); }
  /// An error reply with message `s`.
  static reply make_error(std::string s) { return reply(kind::error, std::move(s)); }
  /// A bulk string reply holding `s`.
  static reply make_bulk(std::string s) { return reply(kind::bulk, std::move(s)); }
  /// An integer reply.
  static reply make_integer(std::int64_t v) {
    reply r;
    r.kind_ = kind::integer;
    r.integer_ = v;
    return r;
  }
  /// An array reply of `items`.
  static reply make_array(std::vector<reply> items) {
    reply r;
    r.kind_ = kind::array;
    r.elements_ = std::move(items);
    return r;
  }

  kind type() const noexcept { return kind_; }                       ///< the reply's type
  bool is_nil() const noexcept { return kind_ == kind::nil; }          ///< type() is kind::nil
  bool is_status() const noexcept { return kind_ == kind::status; }    ///< type() is kind::status
  bool is_error() const noexcept { return kind_ == kind::error; }      ///< type() is kind::error
  bool is_integer() const noexcept { return kind_ == kind::integer; }  ///< type() is kind::integer
  bool is_bulk() const noexcept { return kind_ == kind::bulk; }        ///< type() is kind::bulk
  bool is_array() const noexcept { return kind_ == kind::array; }      ///< type() is kind::array

  /// Integer replies; 0 for other kinds.
  std::int64_t integer() const noexcept { return integer_; }
  /// Bulk string, status text ("OK") or error message ("ERR ..."); empty otherwise.
  std::string_view string() const noexcept { return text_; }
  /// The same text, moved out.
  std::string take_string() noexcept { return std::move(text_); }
  /// Array elements; empty otherwise.
  const std::vector<reply>& elements() const noexcept { return elements_; }
  /// The same, to move elements out.
  std::vector<reply>& elements() noexcept { return elements_; }

  /// True for the status reply "OK".
  bool is_ok() const noexcept {  // two characters compared, not a call to memcmp (every SET's reply)
    return kind_ == kind::status && text_.size() == 2 && text_[0] == 'O' && text_[1] == 'K';
  }

 private:
  friend struct detail::reply_builder;  // the parser fills replies in place
  reply(kind k, std::string s) : kind_(k), text_(std::move(s)) {}

  kind kind_ = kind::nil;
  std::int64_t integer_ = 0;
  std::string text_;
  std::vector<reply> elements_;
};

}  // namespace dlock::redis

#include "redis/resp/reply_parser.hpp"

#include <hiredis/read.h>

#include <new>
#include <string>

namespace dlock::redis::detail {

// Fills a reply where it lies (the slot keeps its string's capacity).
struct reply_builder {
  static reply& set_text(reply& r, reply::kind type, std::string_view text) {
    r.kind_ = type;
    r.integer_ = 0;
    r.text_.assign(text);
    r.elements_.clear();
    return r;
  }
  static reply& set_integer(reply& r, std::int64_t value) {
    r.kind_ = reply::kind::integer;
    r.integer_ = value;
    r.text_.clear();
    r.elements_.clear();
    return r;
  }
  static reply& set_array(reply& r, std::size_t size) {
    r.kind_ = reply::kind::array;
    r.integer_ = 0;
    r.text_.clear();
    r.elements_.assign(size, reply());
    return r;
  }
  static reply& set_nil(reply& r) {
    set_integer(r, 0);
    r.kind_ = reply::kind::nil;
    return r;
  }
};

namespace {

// A child is built in place inside its parent's element vector (sized when
// the array header was read); a top-level reply in the parser's own slot
// (the reader's privdata), from which next() moves it out: hiredis builds
// one top-level reply at a time. No allocation per reply, and a string is
// copied once, from the read buffer into its slot.
reply& slot_of(const redisReadTask* task) {
  return task->parent ? static_cast<reply*>(task->parent->obj)->elements()[static_cast<std::size_t>(task->idx)]
                      : *static_cast<reply*>(task->privdata);
}

void* create_string(const redisReadTask* task, char* data, std::size_t size) {
  auto type = task->type == REDIS_REPLY_ERROR    ? reply::kind::error
              : task->type == REDIS_REPLY_STATUS ? reply::kind::status
                                                 : reply::kind::bulk;
  return &reply_builder::set_text(slot_of(task), type, std::string_view(data, size));
}
void* create_array(const redisReadTask* task, int elements) {
  return &reply_builder::set_array(slot_of(task), static_cast<std::size_t>(elements));
}
void* create_integer(const redisReadTask* task, long long value) {
  return &reply_builder::set_integer(slot_of(task), value);
}
void* create_nil(const redisReadTask* task) { return &reply_builder::set_nil(slot_of(task)); }
void free_object(void* object) { *static_cast<reply*>(object) = reply(); }  // the top-level slot

redisReplyObjectFunctions functions = {create_string, create_array, create_integer, create_nil,
                                       free_object};

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

reply_parser::reply_parser() { reset(); }
reply_parser::~reply_parser() {
  if (reader_) redisReaderFree(reader_);
}

void reply_parser::reset() {
  if (reader_) redisReaderFree(reader_);
  reader_ = redisReaderCreateWithFunctions(&functions);
  if (!reader_) throw std::bad_alloc();
  reader_->privdata = &top_;  // (hiredis 0.14's redisReaderSetPrivdata casts it to int)
}

void reply_parser::feed(const char* data, std::size_t size) { redisReaderFeed(reader_, data, size); }

reply_parser::result reply_parser::next(reply& out) {
  void* object = nullptr;
  if (redisReaderGetReply(reader_, &object) != REDIS_OK) return result::protocol_error;
  if (!object) return result::none;
  out = std::move(*static_cast<reply*>(object));
  return result::reply;
}

error classify_error(std::string_view m) noexcept {
  if (starts_with(m, "NOSCRIPT")) return error::no_script;
  if (starts_with(m, "WRONGTYPE")) return error::wrong_type;
  if (starts_with(m, "WRONGPASS") || starts_with(m, "NOAUTH") || starts_with(m, "NOPERM"))
    return error::auth_failed;
  if (starts_with(m, "BUSY") || starts_with(m, "LOADING") || starts_with(m, "MASTERDOWN"))
    return error::busy;
  if (starts_with(m, "READONLY")) return error::read_only;
  return error::server_error;
}

}  // namespace dlock::redis::detail

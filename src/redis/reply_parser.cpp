#include "reply_parser.hpp"

#include <hiredis/read.h>

#include <new>
#include <string>

namespace dlock::redis::detail {
namespace {

// A child is built in place inside its parent's element vector (sized when
// the array header was read); a top-level reply in the parser's own slot
// (the reader's privdata), from which next() moves it out: hiredis builds
// one top-level reply at a time. No allocation per reply.
void* place(const redisReadTask* task, reply&& value) {
  reply* slot = task->parent
                    ? &static_cast<reply*>(task->parent->obj)->elements()[static_cast<std::size_t>(task->idx)]
                    : static_cast<reply*>(task->privdata);
  *slot = std::move(value);
  return slot;
}

void* create_string(const redisReadTask* task, char* data, std::size_t size) {
  std::string s(data, size);
  switch (task->type) {
    case REDIS_REPLY_ERROR: return place(task, reply::make_error(std::move(s)));
    case REDIS_REPLY_STATUS: return place(task, reply::make_status(std::move(s)));
    default: return place(task, reply::make_bulk(std::move(s)));
  }
}
void* create_array(const redisReadTask* task, int elements) {
  return place(task, reply::make_array(std::vector<reply>(static_cast<std::size_t>(elements))));
}
void* create_integer(const redisReadTask* task, long long value) {
  return place(task, reply::make_integer(value));
}
void* create_nil(const redisReadTask* task) { return place(task, reply::make_nil()); }
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
  return error::server_error;
}

}  // namespace dlock::redis::detail

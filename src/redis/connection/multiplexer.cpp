#include "redis/connection/multiplexer.hpp"

#include "redis/resp/reply_parser.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace dlock::redis::detail {
namespace {

// The EVAL form of an EVALSHA request (same array length and tail), which
// then replaces the request's own bytes: built rarely (a script's first use
// on a session, or after NOSCRIPT), so one buffer per request is enough.
void build_eval_form(request& r) {
  std::string_view evalsha = r.bytes();
  auto header_end = evalsha.find("\r\n") + 2;
  std::string out;
  out.reserve(evalsha.size() + r.script->source.size() + 16);
  out.append(evalsha.substr(0, header_end));
  out += "$4\r\nEVAL\r\n$";
  out += std::to_string(r.script->source.size());
  out += "\r\n";
  out += r.script->source;
  out += "\r\n";
  out.append(evalsha.substr(r.tail_offset));
  r.wire = std::move(out);
  r.use_eval = true;
}

}  // namespace

// ---- requests ----

request_ptr multiplexer::make_request() {
  if (spare_.empty()) return std::make_shared<request>();
  request_ptr r = std::move(spare_.back());
  spare_.pop_back();
  return r;
}

// Requests made by make_request come back here once answered, unless
// something else still holds them (a handle, a posted completion).
void multiplexer::recycle(request_ptr r) {
  constexpr std::size_t max_spares = 256;
  if (r.use_count() != 1 || spare_.size() >= max_spares) return;
  if (r->uses_wire()) r->wire.clear();  // a borrowing request leaves its cold end alone
  r->borrowed = {};
  r->script = nullptr;
  r->script_share.reset();
  r->tail_offset = 0;
  r->replies = 1;
  r->deadline = clock::time_point::max();
  if (r->gather) r->gathered.reset();
  r->internal = r->use_eval = r->owed = r->gather = false;
  r->target.clear();
  ++r->generation;
  spare_.push_back(std::move(r));
}

void multiplexer::add(request_ptr r, clock::time_point now) {
  if (timed()) r->deadline = now + timeout_;
  queue_.push(std::move(r));
}

bool multiplexer::abandon(request& r, std::uint32_t generation) noexcept {
  return r.generation == generation && r.settle();
}

// ---- writing ----

std::size_t multiplexer::prepare_write(std::string& out) {
  if (writing_) return 0;
  return stage(out);
}

std::size_t multiplexer::stage(std::string& out) {
  written_ = 0;
  // Staged in place: no copy of each request's pointer (two atomic counts).
  auto skip = [](const request_ptr& r) { return !r->owed; };
  auto on_staged = [this, &out](const request_ptr& r) {
    if (r->script) choose_script_form(*r);
    out += r->bytes();
    r->replies_left = r->replies;
    if (r->gather && r->gathered) r->gathered->clear();  // a block written again gathers anew
    commands_ += r->replies;
  };
  std::size_t n = queue_.stage_each(skip, on_staged);
  if (n == 0) return 0;
  writing_ = true;
  return n;
}

bool multiplexer::keep_unwritten(std::string_view rest) {
  out_.assign(rest);
  return commit_write(0);
}

bool multiplexer::commit_write(std::size_t n) noexcept {
  written_ += n;
  if (written_ < out_.size()) return false;
  writing_ = false;
  return true;
}

// ---- scripts: EVAL first, then EVALSHA, never out of order ----
// A script's first use on a session goes as EVAL, which loads it; as the
// server runs commands in order, every later use can go as EVALSHA, even in
// the same write. Decided when the request is written, so a first use
// abandoned before being sent does not count.

// 40 digits as five words: compared inline (std::equal becomes a call to
// memcmp), for every script request staged.
multiplexer::sha1_words multiplexer::words_of(const std::string& sha1) noexcept {
  sha1_words words;
  std::memcpy(words.data(), sha1.data(), sizeof words);
  return words;
}

bool multiplexer::script_loaded(const script::data& s) const noexcept {
  if (s.sha1.size() != sha1_digits) return false;  // never: a script's SHA-1 is 40 hex digits
  auto wanted = words_of(s.sha1);
  auto same = [&wanted](const sha1_words& known) {
    for (std::size_t i = 0; i < known.size(); ++i)
      if (known[i] != wanted[i]) return false;
    return true;
  };
  return std::any_of(loaded_scripts_.begin(), loaded_scripts_.end(), same);
}

void multiplexer::choose_script_form(request& r) {
  if (!r.use_eval && script_loaded(*r.script)) return;  // the usual case: EVALSHA
  if (!r.use_eval) build_eval_form(r);
  constexpr std::size_t max_loaded = 64;  // many one-off scripts: start over rather than grow
  if (loaded_scripts_.size() >= max_loaded) loaded_scripts_.clear();
  if (r.script->sha1.size() == sha1_digits && !script_loaded(*r.script))
    loaded_scripts_.push_back(words_of(r.script->sha1));
}

// An EVALSHA answered NOSCRIPT: the server's cache was flushed since the
// script was loaded. Sending it again as EVAL keeps the issue order only if
// nothing was written after it; then it goes first among the waiting
// requests. Otherwise the caller gets script_not_run (false). Either way
// every script goes as EVAL again.
bool multiplexer::resend_as_eval(request_ptr& r) {
  loaded_scripts_.clear();
  if (queue_.in_flight_size() != 0) return false;
  build_eval_form(*r);
  queue_.push_first(std::move(r));
  return true;
}

// ---- reading ----

multiplexer::answer multiplexer::on_reply(const reply& r) {
  const request_ptr* oldest = queue_.oldest_in_flight();
  if (!oldest) return {answer::kind::unexpected, nullptr, {}};
  ++replies_;
  if ((*oldest)->replies_left > 1) {  // a MULTI block's reply before EXEC's
    --(*oldest)->replies_left;
    if ((*oldest)->gather) {
      // A script in the block met a flushed cache: its next use goes as EVAL
      // (the block's answer tells this one's caller).
      if (r.is_error() && classify_error(r.string()) == error::no_script) loaded_scripts_.clear();
      auto& gathered = (*oldest)->gathered;
      if (!gathered) gathered = std::make_unique<std::vector<reply>>();
      gathered->push_back(r);
    }
    return {answer::kind::more, nullptr, {}};
  }
  request_ptr req = queue_.pop_answered();
  // Abandoned: dropped, the stream stays in sync.
  if (!req->owed) return {answer::kind::drop, std::move(req), {}};
  error_code ec;
  if (r.is_error()) {
    ec = classify_error(r.string());
    if (ec == error::no_script && req->script && !req->use_eval) {
      if (resend_as_eval(req)) return {answer::kind::resend, nullptr, {}};
      ec = error::script_not_run;
    }
  }
  req->settle();
  return {answer::kind::complete, std::move(req), ec};
}

// ---- deadlines ----
// Commands are queued in order with the same timeout, so deadlines rise along
// the queue: the timer sleeps until the oldest owed one.

clock::time_point multiplexer::next_deadline(clock::time_point now) const {
  auto next = now + timeout_;
  queue_.visit([&](const request_ptr& r) {
    if (!r->owed) return true;
    next = std::min(next, r->deadline);
    return false;
  });
  return next;
}

// The oldest unanswered command (timed out, abandoned, e.g. by Redlock's
// own master timeout, or not) waited a full timeout with nothing at all read
// since it was issued: the server is silent (stopped, or a black hole that
// sends no RST), so the connection resets rather than keep every timed-out
// command in flight until TCP gives up. A slow server that still answers
// earlier commands is not silent. (Requests are queued only while a session
// is open, and a reset empties the queue: a written one means a session.)
bool multiplexer::expire(clock::time_point now, std::vector<request_ptr>& expired) {
  queue_.visit([&](const request_ptr& r) {
    if (!r->owed) return true;
    if (r->deadline > now) return false;
    r->settle();
    expired.push_back(r);
    return true;
  });
  const request_ptr* oldest = queue_.oldest_in_flight();
  return oldest && (*oldest)->deadline <= now && last_read_ <= (*oldest)->deadline - timeout_;
}

// ---- the session ----

bool multiplexer::reset(std::vector<request_ptr>& failed) {
  bool had_pending = !queue_.empty();
  loaded_scripts_.clear();
  writing_ = false;
  out_.clear();
  written_ = 0;
  queue_.drain([&](request_ptr& r) {
    if (r->settle()) failed.push_back(std::move(r));
  });
  return had_pending;
}

}  // namespace dlock::redis::detail

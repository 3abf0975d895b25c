// The Redis connection's multiplexer, without any socket: what goes out in
// which write, which request a reply answers, NOSCRIPT, abandonment,
// deadlines, a loss mid-pipeline, request reuse.
#include "redis/connection/multiplexer.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/command.hpp>
#include <dlock/redis/script.hpp>

#include <boost/test/unit_test.hpp>

#include <string>
#include <ostream>
#include <vector>

// Printable in failed checks (found by argument-dependent lookup).
namespace dlock {
inline std::ostream& operator<<(std::ostream& out, error e) { return out << make_error_code(e).message(); }
namespace redis {
inline std::ostream& operator<<(std::ostream& out, error e) { return out << make_error_code(e).message(); }
}  // namespace redis
}  // namespace dlock

using namespace std::chrono_literals;
namespace redis = dlock::redis;
using steady = redis::detail::clock;
using redis::detail::multiplexer;
using redis::detail::request_ptr;
using kind = multiplexer::answer::kind;

namespace {

const steady::time_point t0{std::chrono::seconds(1000)};

request_ptr make(multiplexer& m, std::string wire) {
  auto r = m.make_request();
  r->wire = std::move(wire);
  r->owed = true;  // as answer_to() leaves it (no handler needed here)
  return r;
}

request_ptr add(multiplexer& m, std::string wire, steady::time_point now = t0) {
  auto r = make(m, std::move(wire));
  m.add(r, now);
  return r;
}

// A MULTI ... EXEC block: one request drawing `replies` replies.
request_ptr add_block(multiplexer& m, std::string wire, std::uint32_t replies) {
  auto r = make(m, std::move(wire));
  r->replies = replies;
  m.add(r, t0);
  return r;
}

// Writes the whole staged batch in one go; returns its bytes.
std::string write_all(multiplexer& m) {
  std::string out;
  if (m.prepare_write(out) == 0) return {};
  BOOST_TEST(m.keep_unwritten({}));
  return out;
}

request_ptr add_script(multiplexer& m, const redis::script& s, std::string key) {
  redis::command tail;
  tail.arg(std::size_t(1)).arg(key);
  auto r = make(m, "*3\r\n$7\r\nEVALSHA\r\n$40\r\n" + s.shared()->sha1 + "\r\n");
  r->tail_offset = r->wire.size();
  r->wire += tail.body();
  r->run_script(s.shared());
  m.add(r, t0);
  return r;
}

// A first use of `s` (as EVAL) answered: the session has it loaded.
void load(multiplexer& m, const redis::script& s) {
  add_script(m, s, "first");
  write_all(m);
  m.on_reply(redis::reply::make_integer(1));
}

bool is_eval(const std::string& bytes) { return bytes.find("$4\r\nEVAL\r\n") != std::string::npos; }
bool is_evalsha(const std::string& bytes) { return bytes.find("EVALSHA") != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(multiplexer_tests)

BOOST_AUTO_TEST_CASE(everything_waiting_leaves_in_one_write_and_replies_match_in_order) {
  multiplexer m(0ms);
  auto a = add(m, "A");
  auto b = add(m, "B");
  BOOST_TEST(m.wants_write());
  std::string staged;
  BOOST_TEST(m.prepare_write(staged) == 2u);
  BOOST_TEST(!m.keep_unwritten(staged));  // nothing went out at once
  BOOST_TEST(m.unwritten() == "AB");
  auto c = add(m, "C");  // issued during the write: waits for the next one
  std::string more;
  BOOST_TEST(m.prepare_write(more) == 0u);
  BOOST_TEST(!m.wants_write());
  BOOST_TEST(!m.commit_write(1));  // a short write: the rest goes next
  BOOST_TEST(m.unwritten() == "B");
  BOOST_TEST(m.commit_write(1));
  BOOST_TEST(m.wants_write());
  BOOST_TEST(write_all(m) == "C");
  BOOST_TEST(m.commands_written() == 3u);

  auto first = m.on_reply(redis::reply::make_status("OK"));
  BOOST_TEST((first.what == kind::complete && first.request == a && !first.ec));
  BOOST_TEST(!a->owed);
  auto second = m.on_reply(redis::reply::make_error("WRONGTYPE x"));
  BOOST_TEST((second.what == kind::complete && second.request == b));
  BOOST_TEST(second.ec == redis::error::wrong_type);
  BOOST_TEST(m.on_reply(redis::reply::make_nil()).request == c);
  BOOST_TEST(m.replies_read() == 3u);
  BOOST_TEST(m.pending() == 0u);
}

// A MULTI ... EXEC block is one request drawing one reply per command; it is
// answered with the last (EXEC's), and the next request with the one after.
BOOST_AUTO_TEST_CASE(a_multi_block_is_answered_with_its_last_reply) {
  multiplexer m(0ms);
  auto block = add_block(m, "MULTI SET INCR EXEC", 4);
  auto after = add(m, "GET");
  BOOST_TEST(write_all(m) == "MULTI SET INCR EXECGET");
  BOOST_TEST(m.commands_written() == 5u);  // counted as the server counts them
  BOOST_TEST((m.on_reply(redis::reply::make_status("OK")).what == kind::more));
  BOOST_TEST((m.on_reply(redis::reply::make_status("QUEUED")).what == kind::more));
  BOOST_TEST((m.on_reply(redis::reply::make_error("ERR queued")).what == kind::more));
  BOOST_TEST(block->owed);
  auto exec = m.on_reply(redis::reply::make_error("EXECABORT Transaction discarded"));
  BOOST_TEST((exec.what == kind::complete && exec.request == block && exec.ec));
  auto get = m.on_reply(redis::reply::make_nil());
  BOOST_TEST((get.what == kind::complete && get.request == after && !get.ec));
  BOOST_TEST(m.replies_read() == 5u);
  BOOST_TEST(m.pending() == 0u);
}

// Abandoned once written: every reply of the block is still read, then dropped.
BOOST_AUTO_TEST_CASE(an_abandoned_multi_block_drops_all_its_replies) {
  multiplexer m(0ms);
  auto block = add_block(m, "BLOCK", 3);
  auto after = add(m, "GET");
  write_all(m);
  BOOST_TEST(m.abandon(*block, block->generation));
  BOOST_TEST((m.on_reply(redis::reply::make_status("OK")).what == kind::more));
  BOOST_TEST((m.on_reply(redis::reply::make_status("QUEUED")).what == kind::more));
  auto last = m.on_reply(redis::reply::make_integer(1));
  BOOST_TEST((last.what == kind::drop && last.request == block));
  BOOST_TEST(m.on_reply(redis::reply::make_nil()).request == after);
}

// A gathering block (SET then WAIT) is answered with every reply, as one
// array; lost mid-replies, it gathers afresh; reused, it gathers nothing.
BOOST_AUTO_TEST_CASE(a_gathering_block_is_answered_with_all_its_replies) {
  multiplexer m(0ms);
  auto block = add_block(m, "SET WAIT", 2);
  block->gather = true;
  write_all(m);
  BOOST_TEST((m.on_reply(redis::reply::make_status("OK")).what == kind::more));
  std::vector<request_ptr> failed;
  m.reset(failed);  // lost after SET's reply: the next session's SET answers again
  block->owed = true;
  m.add(block, t0);
  write_all(m);
  BOOST_TEST((m.on_reply(redis::reply::make_nil()).what == kind::more));
  auto last = redis::reply::make_integer(1);
  auto answered = m.on_reply(last);
  BOOST_TEST((answered.what == kind::complete && answered.request == block && !answered.ec));
  auto all = block->take_gathered(std::move(last));
  BOOST_REQUIRE(all.is_array());
  BOOST_REQUIRE(all.elements().size() == 2u);
  BOOST_TEST(all.elements()[0].is_nil());
  BOOST_TEST(all.elements()[1].integer() == 1);
  failed.clear();
  block.reset();
  m.recycle(std::move(answered.request));
  auto reused = add(m, "GET");
  BOOST_TEST((!reused->gather && !reused->gathered));
}

// A block lost mid-replies: the next session writes it whole again and
// counts all its replies afresh; a reused request draws one reply.
BOOST_AUTO_TEST_CASE(a_multi_block_counts_its_replies_again_after_a_reset) {
  multiplexer m(0ms);
  auto block = add_block(m, "BLOCK", 2);
  write_all(m);
  BOOST_TEST((m.on_reply(redis::reply::make_status("OK")).what == kind::more));
  std::vector<request_ptr> failed;
  m.reset(failed);
  BOOST_TEST(failed.size() == 1u);
  block->owed = true;
  m.add(block, t0);
  write_all(m);
  BOOST_TEST((m.on_reply(redis::reply::make_status("OK")).what == kind::more));
  auto answered = m.on_reply(redis::reply::make_integer(7));
  BOOST_TEST((answered.what == kind::complete && answered.request == block));
  const auto* used = block.get();
  failed.clear();
  block.reset();
  m.recycle(std::move(answered.request));
  auto reused = add(m, "GET");
  BOOST_TEST(reused.get() == used);
  BOOST_TEST(reused->replies == 1u);
  write_all(m);
  BOOST_TEST(m.on_reply(redis::reply::make_nil()).request == reused);
}

BOOST_AUTO_TEST_CASE(a_reply_nobody_asked_for_is_unexpected) {
  multiplexer m(0ms);
  BOOST_TEST((m.on_reply(redis::reply::make_status("OK")).what == kind::unexpected));
  add(m, "A");  // queued, not written: still nobody asked
  BOOST_TEST((m.on_reply(redis::reply::make_status("OK")).what == kind::unexpected));
}

BOOST_AUTO_TEST_CASE(abandoned_before_the_write_is_never_sent) {
  multiplexer m(0ms);
  auto a = add(m, "A");
  add(m, "B");
  BOOST_TEST(m.abandon(*a, a->generation));
  BOOST_TEST(!m.abandon(*a, a->generation));  // completed once only
  BOOST_TEST(write_all(m) == "B");
}

BOOST_AUTO_TEST_CASE(a_reply_for_an_abandoned_request_is_read_and_dropped) {
  multiplexer m(0ms);
  auto a = add(m, "A");
  auto b = add(m, "B");
  write_all(m);
  BOOST_TEST(m.abandon(*a, a->generation));
  auto dropped = m.on_reply(redis::reply::make_status("late"));
  BOOST_TEST((dropped.what == kind::drop && dropped.request == a));
  auto answered = m.on_reply(redis::reply::make_status("OK"));  // the stream stayed in sync
  BOOST_TEST((answered.what == kind::complete && answered.request == b));
}

BOOST_AUTO_TEST_CASE(abandoning_an_earlier_use_of_a_reused_request_does_nothing) {
  multiplexer m(0ms);
  auto a = add(m, "A");
  write_all(m);
  auto answered = m.on_reply(redis::reply::make_status("OK"));
  auto old_generation = a->generation;
  a.reset();
  m.recycle(std::move(answered.request));
  auto reused = add(m, "B");  // the same object, from the spares
  BOOST_TEST(reused->generation != old_generation);
  BOOST_TEST(!m.abandon(*reused, old_generation));
  BOOST_TEST(reused->owed);
}

BOOST_AUTO_TEST_CASE(answered_requests_are_reused_with_clean_buffers) {
  multiplexer m(10ms);
  redis::script s("return 1");
  auto r = add_script(m, s, "k");
  auto* object = r.get();
  write_all(m);
  auto answered = m.on_reply(redis::reply::make_integer(1));
  r.reset();
  m.recycle(std::move(answered.request));
  auto again = m.make_request();
  BOOST_TEST(again.get() == object);
  BOOST_TEST((again->wire.empty() && again->borrowed.empty() && again->bytes().empty() && !again->script &&
              !again->use_eval));
  BOOST_TEST((again->deadline == steady::time_point::max() && !again->owed));
}

BOOST_AUTO_TEST_CASE(a_request_still_held_elsewhere_is_not_reused) {
  multiplexer m(0ms);
  auto r = add(m, "A");
  write_all(m);
  auto answered = m.on_reply(redis::reply::make_nil());
  m.recycle(std::move(answered.request));  // `r` still holds it
  BOOST_TEST(m.make_request().get() != r.get());
}

BOOST_AUTO_TEST_CASE(a_script_goes_as_eval_once_per_session_then_as_evalsha) {
  multiplexer m(0ms);
  redis::script s("return 1");
  add_script(m, s, "a");
  add_script(m, s, "b");  // same write: EVALSHA already (the server runs them in order)
  auto bytes = write_all(m);
  BOOST_TEST(is_eval(bytes));
  BOOST_TEST(is_evalsha(bytes));
  BOOST_TEST(bytes.find("return 1") == bytes.rfind("return 1"));  // the source once
  std::vector<request_ptr> failed;
  m.reset(failed);  // a new session may reach a restarted server
  add_script(m, s, "c");
  BOOST_TEST(is_eval(write_all(m)));
}

BOOST_AUTO_TEST_CASE(noscript_with_nothing_written_after_is_resent_as_eval_first) {
  multiplexer m(0ms);
  redis::script s("return 1");
  load(m, s);
  auto r = add_script(m, s, "b");
  auto sent = write_all(m);
  BOOST_TEST((is_evalsha(sent) && !is_eval(sent)));
  add(m, "LATER");  // waiting, not written: the resend goes before it
  auto answer = m.on_reply(redis::reply::make_error("NOSCRIPT No matching script"));
  BOOST_TEST((answer.what == kind::resend && !answer.request));
  BOOST_TEST(r->owed);
  auto bytes = write_all(m);
  BOOST_TEST(is_eval(bytes));
  BOOST_TEST(bytes.find("LATER") > bytes.find("return 1"));
  auto done = m.on_reply(redis::reply::make_integer(1));
  BOOST_TEST((done.what == kind::complete && done.request == r && !done.ec));
}

// A Redlock fan-out's requests borrow the bytes of the one command their
// sink owns: written from there, an EVAL form built from there, and nothing
// of the borrow left once the request is reused.
BOOST_AUTO_TEST_CASE(a_borrowed_command_is_written_from_its_owner_and_forgotten_on_reuse) {
  multiplexer m(0ms);
  redis::script s("return 1");
  load(m, s);
  redis::command tail;
  tail.arg(std::size_t(1)).arg("borrowed-key");
  const std::string head = "*3\r\n$7\r\nEVALSHA\r\n$40\r\n" + s.shared()->sha1 + "\r\n";
  const std::string owner = head + std::string(tail.body());  // the sink's command
  auto r = make(m, "");
  r->borrowed = owner;
  r->tail_offset = head.size();
  r->script = s.shared().get();  // the sink's, borrowed
  auto* object = r.get();
  m.add(r, t0);
  BOOST_TEST(write_all(m) == owner);
  BOOST_TEST(r->wire.empty(), "no copy of its own");
  auto answer = m.on_reply(redis::reply::make_error("NOSCRIPT No matching script"));
  BOOST_TEST((answer.what == kind::resend));
  auto bytes = write_all(m);
  BOOST_TEST((is_eval(bytes) && bytes.find("return 1") != std::string::npos &&
              bytes.find("borrowed-key") != std::string::npos));
  auto done = m.on_reply(redis::reply::make_integer(1));
  BOOST_TEST((done.what == kind::complete && done.request == r));
  r.reset();
  m.recycle(std::move(done.request));
  auto again = m.make_request();
  BOOST_TEST(again.get() == object);
  BOOST_TEST((again->borrowed.empty() && again->bytes().empty()));
}

BOOST_AUTO_TEST_CASE(noscript_with_later_commands_written_is_script_not_run_and_forgets_loaded_scripts) {
  multiplexer m(0ms);
  redis::script s("return 1");
  load(m, s);
  auto r = add_script(m, s, "b");
  add(m, "AFTER");
  write_all(m);
  auto answer = m.on_reply(redis::reply::make_error("NOSCRIPT No matching script"));
  BOOST_TEST((answer.what == kind::complete && answer.request == r));
  BOOST_TEST(answer.ec == redis::error::script_not_run);
  m.on_reply(redis::reply::make_status("OK"));
  add_script(m, s, "c");
  BOOST_TEST(is_eval(write_all(m)));  // every script goes as EVAL again
}

BOOST_AUTO_TEST_CASE(noscript_for_a_plain_command_or_an_eval_is_an_error) {
  multiplexer m(0ms);
  redis::script s("return 1");
  auto r = add_script(m, s, "a");  // first use: EVAL already
  write_all(m);
  auto answer = m.on_reply(redis::reply::make_error("NOSCRIPT x"));
  BOOST_TEST((answer.what == kind::complete && answer.request == r && answer.ec == redis::error::no_script));
  auto plain = add(m, "GET");
  write_all(m);
  answer = m.on_reply(redis::reply::make_error("NOSCRIPT x"));
  BOOST_TEST((answer.what == kind::complete && answer.request == plain && answer.ec == redis::error::no_script));
}

BOOST_AUTO_TEST_CASE(deadlines_expire_in_order_and_the_timer_follows_the_oldest_owed) {
  multiplexer m(100ms);
  BOOST_TEST(m.timed());
  BOOST_TEST((m.next_deadline(t0) == t0 + 100ms));  // idle: one timeout ahead
  auto a = add(m, "A", t0);
  auto b = add(m, "B", t0 + 50ms);
  BOOST_TEST((a->deadline == t0 + 100ms && b->deadline == t0 + 150ms));
  BOOST_TEST((m.next_deadline(t0 + 10ms) == t0 + 100ms));
  m.abandon(*a, a->generation);  // an abandoned request no longer holds the timer
  BOOST_TEST((m.next_deadline(t0 + 10ms) == t0 + 110ms));  // sooner than b's: idle rule
  BOOST_TEST((m.next_deadline(t0 + 60ms) == t0 + 150ms));

  std::vector<request_ptr> expired;
  BOOST_TEST(!m.expire(t0 + 149ms, expired));
  BOOST_TEST(expired.empty());
  BOOST_TEST(!m.expire(t0 + 150ms, expired));  // unwritten: the server is not to blame
  BOOST_TEST((expired.size() == 1u && expired[0] == b && !b->owed));
  BOOST_TEST(write_all(m).empty());  // neither is sent any more
}

BOOST_AUTO_TEST_CASE(a_silent_server_is_one_that_sent_nothing_since_the_oldest_write) {
  multiplexer m(100ms);
  auto a = add(m, "A", t0);
  write_all(m);
  std::vector<request_ptr> expired;
  m.note_read(t0 + 20ms);  // an answer to something earlier: the server is alive
  BOOST_TEST(!m.expire(t0 + 100ms, expired));
  BOOST_TEST((expired.size() == 1u && expired[0] == a));
  // A timed-out request still in flight, nothing read since it was issued.
  multiplexer silent(100ms);
  silent.note_read(t0 - 1ms);
  auto b = add(silent, "B", t0);
  write_all(silent);
  expired.clear();
  BOOST_TEST(silent.expire(t0 + 100ms, expired));
  // Abandoned, it still counts: its reply is owed by the server.
  multiplexer abandoned(100ms);
  auto c = add(abandoned, "C", t0);
  write_all(abandoned);
  abandoned.abandon(*c, c->generation);
  expired.clear();
  BOOST_TEST(abandoned.expire(t0 + 100ms, expired));
  BOOST_TEST(expired.empty());
}

BOOST_AUTO_TEST_CASE(without_a_timeout_nothing_has_a_deadline) {
  multiplexer m(0ms);
  BOOST_TEST(!m.timed());
  auto a = add(m, "A", t0);
  BOOST_TEST((a->deadline == steady::time_point::max()));
}

// The glue stages into a buffer of its own, writes at once, and hands back
// only what the socket did not take.
BOOST_AUTO_TEST_CASE(a_write_staged_in_the_callers_buffer_keeps_only_what_was_not_written) {
  multiplexer m(0ms);
  auto a = add(m, "A");
  auto b = add(m, "BB");
  std::string staging = "stale";
  staging.clear();
  BOOST_TEST(m.prepare_write(staging) == 2u);
  BOOST_TEST(staging == "ABB");
  BOOST_TEST(m.unwritten().empty());  // the connection's own buffer is untouched
  add(m, "C");  // issued during the write: waits for the next one
  std::string again;
  BOOST_TEST(m.prepare_write(again) == 0u);
  BOOST_TEST(!m.keep_unwritten(std::string_view(staging).substr(1)));  // one byte went out
  BOOST_TEST(m.unwritten() == "BB");
  BOOST_TEST(!m.wants_write());
  BOOST_TEST(m.commit_write(2));
  BOOST_TEST(m.wants_write());
  std::string next;
  BOOST_TEST(m.prepare_write(next) == 1u);
  BOOST_TEST(next == "C");
  BOOST_TEST(m.keep_unwritten({}));  // all of it went out: the write ended
  BOOST_TEST(m.commands_written() == 3u);
  auto first = m.on_reply(redis::reply::make_status("OK"));
  BOOST_TEST((first.what == kind::complete && first.request == a));
  auto second = m.on_reply(redis::reply::make_status("OK"));
  BOOST_TEST((second.what == kind::complete && second.request == b));
}

// A loss during such a write: the rest kept in the connection's buffer is dropped.
BOOST_AUTO_TEST_CASE(a_loss_after_a_short_write_from_the_callers_buffer_forgets_the_rest) {
  multiplexer m(0ms);
  auto a = add(m, "AAAA");
  std::string staging;
  BOOST_TEST(m.prepare_write(staging) == 1u);
  BOOST_TEST(!m.keep_unwritten(std::string_view(staging).substr(2)));
  std::vector<request_ptr> failed;
  m.reset(failed);
  BOOST_TEST(failed.size() == 1u);
  BOOST_TEST(m.unwritten().empty());
  BOOST_TEST(!m.wants_write());
  add(m, "B");
  std::string after;
  BOOST_TEST(m.prepare_write(after) == 1u);  // a new session writes from scratch
  BOOST_TEST(after == "B");
}

BOOST_AUTO_TEST_CASE(a_loss_mid_pipeline_fails_written_and_unwritten_requests_once) {
  multiplexer m(0ms);
  auto answered = add(m, "A");
  auto written = add(m, "B");
  auto abandoned = add(m, "C");
  write_all(m);
  m.on_reply(redis::reply::make_status("OK"));
  m.abandon(*abandoned, abandoned->generation);
  auto waiting = add(m, "D");
  std::string staged;
  m.prepare_write(staged);
  m.keep_unwritten(staged);  // a write in progress, cut short
  auto unwritten = add(m, "E");
  std::vector<request_ptr> failed;
  BOOST_TEST(m.reset(failed));  // requests were pending: close with an RST
  BOOST_TEST(failed.size() == 3u);  // not the answered one, not the abandoned one
  BOOST_TEST((failed[0] == written && failed[1] == waiting && failed[2] == unwritten));
  for (auto& r : failed) BOOST_TEST(!r->owed);
  BOOST_TEST(m.pending() == 0u);
  BOOST_TEST(!m.wants_write());
  // The next session starts clean: a new write, replies matched from scratch.
  failed.clear();
  BOOST_TEST(!m.reset(failed));
  auto next = add(m, "F");
  BOOST_TEST(write_all(m) == "F");
  BOOST_TEST(m.on_reply(redis::reply::make_nil()).request == next);
}

BOOST_AUTO_TEST_CASE(a_loss_with_only_an_abandoned_request_in_flight_still_resets_abortively) {
  multiplexer m(0ms);
  auto a = add(m, "A");
  write_all(m);
  m.abandon(*a, a->generation);
  std::vector<request_ptr> failed;
  BOOST_TEST(m.reset(failed));
  BOOST_TEST(failed.empty());
}

BOOST_AUTO_TEST_SUITE_END()

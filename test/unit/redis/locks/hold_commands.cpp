// What redis::lock and redis::semaphore send for one hold (hold_commands in
// src/redis/locks/algorithm/attempt.hpp), and what the answers mean (its
// answer_reader): the one difference between the two over their shared
// shell. No server.
#include "redis/locks/algorithm/replies.hpp"
#include "redis/locks/algorithm/scripts.hpp"
#include "redis/locks/algorithm/attempt.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/error.hpp>

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace redis = dlock::redis;
namespace detail = dlock::redis::detail;
using detail::hold_commands;
using dlock::error_code;
using redis::reply;
using namespace std::chrono_literals;

namespace {

error_code failure(const hold_commands& c, error_code ec, const reply& r) {
  std::int64_t token = -7;
  return c.reader().attempt_failure(ec, r, token);
}

bool runs(const detail::inline_command& e, const redis::script& s) { return e.script && e.script->sha1 == s.sha1(); }

// What each command writes, in the fan-out's own buffer.
detail::inline_command attempt(const hold_commands& c, std::string_view token, std::chrono::milliseconds ttl) {
  detail::inline_command out;
  c.attempt(out, token, ttl);
  return out;
}
detail::inline_command release(const hold_commands& c, std::string_view token) {
  detail::inline_command out;
  c.release(out, token);
  return out;
}
detail::inline_command extend(const hold_commands& c, std::string_view token, std::chrono::milliseconds ttl) {
  detail::inline_command out;
  c.extend(out, token, ttl);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_hold_commands)

BOOST_AUTO_TEST_CASE(bad_keys_ttls_and_a_semaphore_of_none_are_refused) {
  constexpr std::chrono::milliseconds ttl{1000};
  BOOST_CHECK(!hold_commands::lock("k", false).invalid(ttl));
  BOOST_CHECK(!hold_commands::lock("k", true).invalid(ttl));
  BOOST_CHECK(hold_commands::lock("", false).invalid(ttl) == dlock::error::invalid_argument);
  BOOST_CHECK(hold_commands::lock("k", false).invalid(std::chrono::milliseconds(0)) == dlock::error::invalid_argument);
  BOOST_CHECK(hold_commands::lock("k", true).invalid(std::chrono::milliseconds(-1)) == dlock::error::invalid_argument);
  BOOST_CHECK(!hold_commands::semaphore("k", 1).invalid(ttl));
  BOOST_CHECK(!hold_commands::semaphore("k", 1000000).invalid(ttl));
  BOOST_CHECK(hold_commands::semaphore("k", 0).invalid(ttl) == dlock::error::invalid_argument);
  BOOST_CHECK(hold_commands::semaphore("", 3).invalid(ttl) == dlock::error::invalid_argument);
  BOOST_CHECK(hold_commands::semaphore("k", 3).invalid(std::chrono::milliseconds(0)) == dlock::error::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_plain_lock_sends_set_nx_px) {
  auto c = hold_commands::lock("k", false);
  auto sent = attempt(c, "tok", 1500ms);
  BOOST_CHECK(!sent.script);
  BOOST_CHECK_EQUAL(sent.bytes(), "*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\ntok\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n1500\r\n");
  BOOST_CHECK(!failure(c, {}, reply::make_status("OK")));
  BOOST_CHECK(failure(c, {}, reply::make_nil()) == dlock::error::taken);
  BOOST_CHECK(failure(c, {}, reply::make_integer(1)) == redis::error::protocol_error);
  BOOST_CHECK(runs(release(c, "tok"), detail::release_script()));
  BOOST_CHECK(runs(extend(c, "tok", 200ms), detail::extend_script()));
  BOOST_CHECK(extend(c, "tok", 200ms).bytes().ends_with("$1\r\n1\r\n$1\r\nk\r\n$3\r\ntok\r\n$3\r\n200\r\n"));
}

BOOST_AUTO_TEST_CASE(a_fenced_lock_counts_in_the_same_multi_block) {
  auto c = hold_commands::lock("k", true);
  BOOST_CHECK_EQUAL(c.counter_key, "k:fencing");
  auto sent = attempt(c, "tok", 1500ms);
  BOOST_CHECK(!sent.script);
  BOOST_CHECK_EQUAL(sent.replies, 4u);
  BOOST_CHECK_EQUAL(sent.bytes(),
                    "*1\r\n$5\r\nMULTI\r\n"
                    "*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\ntok\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n1500\r\n"
                    "*2\r\n$4\r\nINCR\r\n$9\r\nk:fencing\r\n"
                    "*1\r\n$4\r\nEXEC\r\n");
  auto exec = [](reply set, reply counter) {
    std::vector<reply> items;
    items.push_back(std::move(set));
    items.push_back(std::move(counter));
    return reply::make_array(std::move(items));
  };
  std::int64_t token = 0;
  BOOST_CHECK(!c.reader().attempt_failure({}, exec(reply::make_status("OK"), reply::make_integer(42)), token));
  BOOST_CHECK_EQUAL(token, 42);
  BOOST_CHECK(failure(c, {}, exec(reply::make_nil(), reply::make_integer(43))) == dlock::error::taken);
  BOOST_CHECK(failure(c, {}, exec(reply::make_status("OK"), reply::make_integer(0))) == redis::error::protocol_error);
  BOOST_CHECK(failure(c, {}, exec(reply::make_error("ERR x"), reply::make_integer(5))) ==
              redis::error::server_error);
  BOOST_CHECK(failure(c, {}, reply::make_integer(42)) == redis::error::protocol_error);
  // An error to the block (EXECABORT, or MULTI refused so the SET ran alone)
  // may have set the key: the attempt is deleted by its token.
  const dlock::error_code server_error = redis::error::server_error;
  BOOST_CHECK(c.reader().attempt_may_have_landed(server_error, server_error));
  BOOST_CHECK(c.reader().attempt_may_have_landed({}, {}));  // won
  BOOST_CHECK(!c.reader().attempt_may_have_landed({}, dlock::error::taken));
  auto plain = hold_commands::lock("k", false);
  BOOST_CHECK(!plain.reader().attempt_may_have_landed(server_error, server_error));  // SET refused: nothing ran
  BOOST_CHECK(plain.reader().attempt_may_have_landed(redis::error::connection_lost, redis::error::connection_lost));
  BOOST_CHECK(plain.reader().attempt_may_have_landed({}, redis::error::protocol_error));  // a reply we did not expect
}

// Issue #31, reproduction 4: the counter holds no integer (text, a list) or
// INCR would overflow (INT64_MAX): EXEC answers [OK, error] after its SET
// ran. The server's error, and the key deleted. It used to be "not valid
// RESP" with the key left for a whole ttl.
BOOST_AUTO_TEST_CASE(a_fenced_attempt_whose_incr_failed_after_its_set_is_the_servers_error_and_deleted) {
  auto c = hold_commands::lock("k", true);
  auto exec = [](reply set, reply incr) {
    std::vector<reply> items;
    items.push_back(std::move(set));
    items.push_back(std::move(incr));
    return reply::make_array(std::move(items));
  };
  for (auto text : {"ERR value is not an integer or out of range", "ERR increment or decrement would overflow",
                    "WRONGTYPE Operation against a key holding the wrong kind of value"}) {
    std::int64_t token = 0;
    auto why = c.reader().attempt_failure({}, exec(reply::make_status("OK"), reply::make_error(text)), token);
    BOOST_CHECK(why);
    BOOST_CHECK(why != redis::error::protocol_error);
    BOOST_CHECK(why.category() == redis::error_category());
    BOOST_CHECK(c.reader().attempt_may_have_landed({}, why));
  }
}

BOOST_AUTO_TEST_CASE(a_semaphore_admits_by_script_with_its_maximum) {
  auto c = hold_commands::semaphore("sem", 7);
  auto sent = attempt(c, "tok", 1500ms);
  BOOST_CHECK(runs(sent, detail::semaphore_acquire_script()));
  BOOST_CHECK(sent.bytes().starts_with("*7\r\n$7\r\nEVALSHA\r\n$40\r\n"));
  BOOST_CHECK(sent.bytes().ends_with("$1\r\n1\r\n$3\r\nsem\r\n$3\r\ntok\r\n$4\r\n1500\r\n$1\r\n7\r\n"));
  BOOST_CHECK(!failure(c, {}, reply::make_integer(1)));
  BOOST_CHECK(failure(c, {}, reply::make_integer(0)) == dlock::error::taken);
  BOOST_CHECK(failure(c, {}, reply::make_integer(2)) == redis::error::protocol_error);
  BOOST_CHECK(failure(c, {}, reply::make_nil()) == redis::error::protocol_error);
  BOOST_CHECK(failure(c, {}, reply::make_status("OK")) == redis::error::protocol_error);
  BOOST_CHECK(runs(release(c, "tok"), detail::semaphore_release_script()));
  BOOST_CHECK(release(c, "tok").bytes().ends_with("$1\r\n1\r\n$3\r\nsem\r\n$3\r\ntok\r\n"));
  BOOST_CHECK(runs(extend(c, "tok", 200ms), detail::semaphore_extend_script()));
  BOOST_CHECK(extend(c, "tok", 200ms).bytes().ends_with("$1\r\n1\r\n$3\r\nsem\r\n$3\r\ntok\r\n$3\r\n200\r\n"));
}

// Numbers are written from a buffer on the stack: its edges, whole.
BOOST_AUTO_TEST_CASE(numbers_are_written_whole_at_their_edges) {
  BOOST_CHECK_EQUAL(std::string_view(detail::decimal(std::numeric_limits<std::int64_t>::min())),
                    "-9223372036854775808");
  BOOST_CHECK_EQUAL(std::string_view(detail::decimal(std::numeric_limits<std::uint64_t>::max())),
                    "18446744073709551615");
  BOOST_CHECK_EQUAL(std::string_view(detail::decimal(0)), "0");
  auto most = hold_commands::semaphore("s", std::numeric_limits<std::size_t>::max());
  BOOST_REQUIRE_EQUAL(dlock::max_duration.count(), 3'153'600'000'000);
  auto sent = attempt(most, "t", dlock::max_duration);
  auto wire = sent.bytes();
  BOOST_CHECK(wire.find("$13\r\n3153600000000\r\n") != std::string_view::npos);
  auto leases = std::to_string(std::numeric_limits<std::size_t>::max());
  BOOST_CHECK(wire.ends_with("\r\n"));
  BOOST_CHECK(wire.substr(0, wire.size() - 2).ends_with(leases));
}

// Only a script's NOSCRIPT (or the connection's script_not_run) is sent again.
BOOST_AUTO_TEST_CASE(only_a_script_not_run_may_be_sent_again) {
  BOOST_CHECK(detail::script_did_not_run(redis::error::no_script));
  BOOST_CHECK(detail::script_did_not_run(redis::error::script_not_run));
  BOOST_CHECK(!detail::script_did_not_run({}));
  BOOST_CHECK(!detail::script_did_not_run(redis::error::server_error));
  BOOST_CHECK(!detail::script_did_not_run(dlock::error::taken));
}

BOOST_AUTO_TEST_CASE(an_error_wins_over_any_answer) {
  error_code lost = redis::error::connection_lost;
  for (const auto& c : {hold_commands::lock("k", false), hold_commands::lock("k", true),
                        hold_commands::semaphore("k", 2)}) {
    BOOST_CHECK(failure(c, lost, reply::make_integer(1)) == lost);
    BOOST_CHECK(failure(c, lost, reply::make_status("OK")) == lost);
  }
}

BOOST_AUTO_TEST_CASE(the_semaphore_scripts_read_the_server_clock) {
  // Leases are scored by the server's TIME: the clients' clocks never count,
  // and expired members are dropped before counting.
  for (const auto* s : {&detail::semaphore_acquire_script(), &detail::semaphore_extend_script(),
                        &detail::semaphore_release_script()})
    BOOST_CHECK(s->source().find("redis.call('time')") != std::string::npos);
  BOOST_CHECK(detail::semaphore_acquire_script().source().find("zremrangebyscore") != std::string::npos);
  BOOST_CHECK(detail::semaphore_acquire_script().source().find("zcard") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_admit_answer) {
  BOOST_CHECK(detail::interpret_admit(reply::make_integer(1)) == detail::set_outcome::acquired);
  BOOST_CHECK(detail::interpret_admit(reply::make_integer(0)) == detail::set_outcome::taken);
  BOOST_CHECK(detail::interpret_admit(reply::make_integer(-1)) == detail::set_outcome::unexpected);
  BOOST_CHECK(detail::interpret_admit(reply::make_error("ERR x")) == detail::set_outcome::unexpected);
}

BOOST_AUTO_TEST_SUITE_END()

// dlock's own commands are encoded straight into one buffer, or into a
// fan-out (connection_api.cpp): byte for byte what the general encoders write, with
// the EVALSHA tail (from which an EVAL form is built) at the same place.
BOOST_AUTO_TEST_CASE(the_one_buffer_encoders_write_what_a_command_writes) {
  std::string key = "lock-key", token(33, 't'), ttl = "1500", long_argument(300, 'x');
  detail::inline_command direct;  // a fan-out's, in its own buffer
  direct.set({"SET", key, token, "NX", "PX", ttl});
  auto general = redis::command{"SET", key, token, "NX", "PX", ttl}.encoded();
  BOOST_CHECK_EQUAL(direct.bytes(), general);
  BOOST_CHECK(!direct.script);
  BOOST_CHECK_EQUAL(direct.replies, 1u);

  // Longer than the inline room: the fan-out's buffer grows to the heap.
  const auto& script = detail::release_script();
  detail::inline_command eval_inline;
  eval_inline.set(script, {key, "counter"}, {token, ttl, long_argument, ""});
  redis::command tail;
  tail.arg(std::size_t(2)).arg(key).arg("counter").arg(token).arg(ttl).arg(long_argument).arg("");
  auto eval_general = detail::evalsha_wire(*script.shared(), tail);  // what connection::eval sends
  BOOST_CHECK_EQUAL(eval_inline.bytes(), eval_general.first);
  BOOST_CHECK_EQUAL(eval_inline.tail_offset, eval_general.second);
  BOOST_CHECK(eval_inline.script == script.shared());
  BOOST_CHECK_EQUAL(eval_inline.replies, 1u);
}

// Replica acknowledgement: WAIT follows the attempt and the extension in
// the same write, both answers gathered; fewer replicas than asked fail a
// yes with not_replicated (and it may have landed: deleted), a no stays a no.
BOOST_AUTO_TEST_CASE(with_replicas_wait_follows_and_fewer_acknowledgements_fail_a_yes) {
  auto c = hold_commands::lock("k", false);
  c.wait_for_replicas(2, 150ms);
  auto sent = attempt(c, "tok", 1500ms);
  BOOST_CHECK_EQUAL(sent.replies, 2u);
  BOOST_CHECK(sent.gather);
  BOOST_CHECK_EQUAL(sent.bytes(),
                    "*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\ntok\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n1500\r\n"
                    "*3\r\n$4\r\nWAIT\r\n$1\r\n2\r\n$3\r\n150\r\n");
  auto gathered = [](reply answer, std::int64_t acknowledged) {
    std::vector<reply> items;
    items.push_back(std::move(answer));
    items.push_back(reply::make_integer(acknowledged));
    return reply::make_array(std::move(items));
  };
  using detail::master_outcome;
  BOOST_CHECK(c.reader().read_attempt({}, gathered(reply::make_status("OK"), 2)).outcome == master_outcome::ok);
  auto short_of = c.reader().read_attempt({}, gathered(reply::make_status("OK"), 1));
  BOOST_CHECK(short_of.outcome == master_outcome::failed);
  BOOST_CHECK(short_of.error == dlock::error::not_replicated);
  BOOST_CHECK(c.reader().attempt_may_have_landed({}, short_of.error));
  BOOST_CHECK(c.reader().read_attempt({}, gathered(reply::make_nil(), 0)).outcome == master_outcome::taken);
  auto refused = c.reader().read_attempt({}, gathered(reply::make_error("OOM"), 2));
  BOOST_CHECK(refused.error == redis::error::server_error);
  BOOST_CHECK(c.reader().read_attempt(redis::error::connection_lost, reply()).error == redis::error::connection_lost);
  BOOST_CHECK(c.reader().read_attempt({}, reply::make_status("OK")).error == redis::error::protocol_error);  // not gathered
  // The extension: the script, then WAIT; a NOSCRIPT inside is the script's own error (sent again).
  detail::inline_command extended;
  c.extend(extended, "tok", 1500ms);
  BOOST_CHECK(extended.script && extended.gather && extended.replies == 2u);
  BOOST_CHECK(c.reader().read_extend({}, gathered(reply::make_integer(1), 2)).outcome == master_outcome::ok);
  BOOST_CHECK(c.reader().read_extend({}, gathered(reply::make_integer(1), 0)).error == dlock::error::not_replicated);
  BOOST_CHECK(c.reader().read_extend({}, gathered(reply::make_integer(0), 0)).error == dlock::error::not_owned);
  BOOST_CHECK(c.reader().unwrap({}, gathered(reply::make_error("NOSCRIPT x"), 2)).ec == redis::error::no_script);
  // A fenced block: EXEC's array is the answer before WAIT's.
  auto fenced = hold_commands::lock("k", true);
  fenced.wait_for_replicas(1, 100ms);
  BOOST_CHECK_EQUAL(attempt(fenced, "tok", 1500ms).replies, 5u);
  std::vector<reply> block;
  block.push_back(reply::make_status("OK"));
  block.push_back(reply::make_status("QUEUED"));
  block.push_back(reply::make_status("QUEUED"));
  std::vector<reply> exec;
  exec.push_back(reply::make_status("OK"));
  exec.push_back(reply::make_integer(9));
  block.push_back(reply::make_array(std::move(exec)));
  block.push_back(reply::make_integer(1));
  auto won = fenced.reader().read_attempt({}, reply::make_array(std::move(block)));
  BOOST_CHECK(won.outcome == master_outcome::ok);
  BOOST_CHECK_EQUAL(won.counter, 9);
}

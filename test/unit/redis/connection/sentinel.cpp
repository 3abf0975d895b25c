// Sentinel, without any socket: what a sentinel's answers and messages say,
// what INFO replication says, the order sentinels are asked in and the
// error a discovery ends in; then the lifecycle with Sentinel: discovery
// before each attempt, the role check, a failover at every phase, READONLY.
#include "redis/connection/lifecycle.hpp"
#include "redis/connection/sentinel.hpp"

#include <dlock/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <ostream>

namespace dlock {
inline std::ostream& operator<<(std::ostream& out, error e) { return out << make_error_code(e).message(); }
namespace redis {
inline std::ostream& operator<<(std::ostream& out, error e) { return out << make_error_code(e).message(); }
}  // namespace redis
}  // namespace dlock

using namespace std::chrono_literals;
namespace redis = dlock::redis;
namespace detail = redis::detail;
using redis::reply;
using detail::lifecycle;
using kind = lifecycle::action::kind;
using phase = lifecycle::phase;

namespace {

reply bulks(std::vector<std::string> items) {
  std::vector<reply> out;
  for (auto& i : items) out.push_back(reply::make_bulk(std::move(i)));
  return reply::make_array(std::move(out));
}

reply info(std::string role, std::string replid) {
  return reply::make_bulk("# Replication\r\nrole:" + role + "\r\nconnected_slaves:2\r\nmaster_replid:" + replid +
                          "\r\nmaster_repl_offset:7\r\n");
}

redis::options sentinel_options() {
  redis::options o;
  o.sentinel.sentinels = {{"127.0.0.1", 26379}, {"127.0.0.1", 26380}};
  o.sentinel.master_name = "mymaster";
  o.reconnect_min = 100ms;
  o.reconnect_max = 400ms;
  return o;
}

const redis::server_address first_master{"10.0.0.1", 6379};
const redis::server_address second_master{"10.0.0.2", 6380};

// A discovery naming `master`, then the whole attempt; the role check's answer is `role_info`.
lifecycle::action connect_to(lifecycle& l, const redis::server_address& master, const reply& role_info) {
  auto a = l.attempt();
  BOOST_TEST((l.current() == phase::discovering));
  auto resolve = l.on_discovered(a, {}, master);
  BOOST_TEST((resolve.what == kind::resolve && !resolve.begins_attempt));
  BOOST_TEST(l.address().host == master.host);
  BOOST_TEST((l.on_resolved(a, {}).what == kind::connect));
  auto greet = l.on_connected(a, {});
  BOOST_TEST((greet.what == kind::greet && greet.index == 0u));  // INFO replication, the only greeting
  BOOST_TEST(l.greeting_command(0) == "*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n");
  return l.on_greeting_reply(a, {}, role_info);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sentinel_answers)

BOOST_AUTO_TEST_CASE(the_master_address_reads_host_and_port_or_nothing) {
  auto a = detail::master_address(bulks({"127.0.0.1", "6379"}));
  BOOST_REQUIRE(a);
  BOOST_TEST(a->host == "127.0.0.1");
  BOOST_TEST(a->port == 6379);
  BOOST_TEST(!detail::master_address(reply::make_nil()));  // the name is unknown
  BOOST_TEST(!detail::master_address(bulks({"127.0.0.1"})));
  BOOST_TEST(!detail::master_address(bulks({"127.0.0.1", "0"})));
  BOOST_TEST(!detail::master_address(bulks({"127.0.0.1", "65536"})));
  BOOST_TEST(!detail::master_address(bulks({"127.0.0.1", "63x"})));
  BOOST_TEST(!detail::master_address(bulks({"", "6379"})));
  BOOST_TEST(!detail::master_address(reply::make_error("ERR unknown command")));
}

BOOST_AUTO_TEST_CASE(a_switch_message_names_the_new_master_of_our_name_only) {
  auto message = bulks({"message", "+switch-master", "mymaster 10.0.0.1 6379 10.0.0.2 6380"});
  BOOST_TEST(detail::is_message(message));
  auto m = detail::switched_master(message, "mymaster");
  BOOST_REQUIRE(m);
  BOOST_TEST(m->host == "10.0.0.2");
  BOOST_TEST(m->port == 6380);
  BOOST_TEST(!detail::switched_master(message, "mymaster2"));
  BOOST_TEST(!detail::switched_master(message, "my"));
  BOOST_TEST(!detail::switched_master(bulks({"message", "+switch-master", "mymaster 10.0.0.1 6379 10.0.0.2"}),
                                      "mymaster"));
  BOOST_TEST(!detail::switched_master(bulks({"message", "+sdown", "mymaster 10.0.0.1 6379 10.0.0.2 6380"}),
                                      "mymaster"));
  // Answers of the subscription's own commands are not messages.
  BOOST_TEST(!detail::is_message(bulks({"subscribe", "+switch-master"})));
  BOOST_TEST(!detail::is_message(bulks({"pong", ""})));
  BOOST_TEST(!detail::is_message(reply::make_status("OK")));
}

BOOST_AUTO_TEST_CASE(info_replication_says_role_and_history) {
  auto r = detail::replication_of(info("master", "abc").string());
  BOOST_TEST(r.master);
  BOOST_TEST(r.replid == "abc");
  BOOST_TEST(!detail::replication_of(info("slave", "abc").string()).master);
  BOOST_TEST(!detail::replication_of("").master);
  BOOST_TEST(!detail::replication_of("role:masterx\r\n").master);
}

BOOST_AUTO_TEST_CASE(a_round_asks_each_sentinel_once_from_the_last_good_one) {
  detail::sentinel_round round(3, 1);
  BOOST_TEST(*round.next() == 1u);
  BOOST_TEST(*round.next() == 2u);
  BOOST_TEST(*round.next() == 0u);
  BOOST_TEST(!round.next());
  BOOST_TEST(round.failure() == redis::error::sentinels_unreachable);
  detail::sentinel_round answered(2, 0);
  answered.next();
  answered.answered_unknown();
  BOOST_TEST(answered.failure() == redis::error::master_unknown);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(lifecycle_with_sentinel)

BOOST_AUTO_TEST_CASE(every_attempt_asks_the_sentinels_then_checks_the_role) {
  lifecycle l(sentinel_options(), 1);
  BOOST_TEST((l.start().what == kind::discover));
  BOOST_TEST((l.state() == redis::connection_state::connecting));
  auto up = connect_to(l, first_master, info("master", "r1"));
  BOOST_TEST((up.what == kind::up && !up.master_changed));
  BOOST_TEST(l.master_epoch() == 0u);
  // A plain loss: the next attempt asks again.
  auto lost = l.on_lost(redis::error::connection_lost);
  BOOST_TEST((lost.what == kind::lost && !lost.master_changed));
  BOOST_TEST((l.on_backoff_done().what == kind::discover));
}

BOOST_AUTO_TEST_CASE(a_failure_at_every_step_of_discovery_and_the_role_check_fails_the_attempt) {
  const dlock::error_code unknown = redis::error::master_unknown;
  {
    lifecycle l(sentinel_options(), 1);
    l.start();
    auto failed = l.on_discovered(l.attempt(), unknown, {});
    BOOST_TEST((failed.what == kind::attempt_failed && failed.error == unknown && failed.retry));
    BOOST_TEST((l.on_backoff_done().what == kind::discover));
  }
  {
    lifecycle l(sentinel_options(), 1);
    l.start();
    auto failed = connect_to(l, first_master, info("slave", "r1"));
    BOOST_TEST((failed.what == kind::attempt_failed && failed.error == redis::error::not_master));
  }
  {
    lifecycle l(sentinel_options(), 1);
    l.start();
    auto failed = connect_to(l, first_master, reply::make_error("NOPERM"));
    BOOST_TEST((failed.what == kind::attempt_failed));  // no role: not a master we can trust
  }
  {
    lifecycle l(sentinel_options(), 1);
    l.start();
    auto a = l.attempt();
    BOOST_TEST((l.on_connect_timeout(a).what == kind::attempt_failed));  // discovery counts in connect_timeout
    BOOST_TEST((l.on_discovered(a, {}, first_master).what == kind::none));  // late
  }
}

BOOST_AUTO_TEST_CASE(a_reconnect_to_another_history_is_a_new_master) {
  lifecycle l(sentinel_options(), 1);
  l.start();
  connect_to(l, first_master, info("master", "r1"));
  l.on_lost(redis::error::connection_lost);
  l.on_backoff_done();
  auto same = connect_to(l, first_master, info("master", "r1"));
  BOOST_TEST((same.what == kind::up && !same.master_changed));
  l.on_lost(redis::error::connection_lost);
  l.on_backoff_done();
  auto other = connect_to(l, first_master, info("master", "r2"));  // same address, new data
  BOOST_TEST((other.what == kind::up && other.master_changed));
  BOOST_TEST(l.master_epoch() == 1u);
}

BOOST_AUTO_TEST_CASE(a_switch_at_every_phase_changes_the_master_and_goes_there_at_once) {
  // Connected: the session ends with failed_over.
  {
    lifecycle l(sentinel_options(), 1);
    l.start();
    connect_to(l, first_master, info("master", "r1"));
    auto a = l.on_switch_master(second_master);
    BOOST_TEST((a.what == kind::lost && a.master_changed && a.error == dlock::error::failed_over));
    BOOST_TEST((a.retry && a.backoff == lifecycle::duration::zero()));
    BOOST_TEST(l.master_epoch() == 1u);
    auto resolve = l.on_backoff_done();  // no discovery: the sentinel said where
    BOOST_TEST((resolve.what == kind::resolve && resolve.begins_attempt));
    BOOST_TEST(l.address().host == second_master.host);
    BOOST_TEST(l.address().port == second_master.port);
    // The other sentinels announce the same switch: nothing more happens.
    auto again = l.on_switch_master(second_master);
    BOOST_TEST((again.what == kind::none && !again.master_changed));
    BOOST_TEST(l.master_epoch() == 1u);
  }
  // Attempting: the attempt ends.
  {
    lifecycle l(sentinel_options(), 1);
    l.start();
    auto a = l.on_switch_master(second_master);
    BOOST_TEST((a.what == kind::attempt_failed && a.master_changed && a.backoff == lifecycle::duration::zero()));
  }
  // Backing off: the backoff ends now.
  {
    lifecycle l(sentinel_options(), 1);
    l.start();
    l.on_discovered(l.attempt(), redis::error::sentinels_unreachable, {});
    auto a = l.on_switch_master(second_master);
    BOOST_TEST((a.what == kind::retry_now && a.master_changed));
    BOOST_TEST((l.on_backoff_done().what == kind::resolve));
  }
  // Closed or never started: nothing.
  {
    lifecycle l(sentinel_options(), 1);
    BOOST_TEST((l.on_switch_master(second_master).what == kind::none));
    l.close();
    BOOST_TEST((l.on_switch_master(second_master).what == kind::none));
    BOOST_TEST(l.master_epoch() == 0u);
  }
}

BOOST_AUTO_TEST_CASE(readonly_is_a_demotion) {
  lifecycle l(sentinel_options(), 1);
  l.start();
  connect_to(l, first_master, info("master", "r1"));
  auto a = l.on_read_only();
  BOOST_TEST((a.what == kind::lost && a.master_changed && a.error == redis::error::read_only));
  BOOST_TEST((l.on_read_only().what == kind::none));  // once
  BOOST_TEST((l.on_backoff_done().what == kind::discover));
  // Without Sentinel: the locks are lost, the session stays.
  redis::options plain;
  lifecycle p(plain, 1);
  p.start();
  auto at = p.attempt();
  p.on_resolved(at, {});
  BOOST_TEST((p.on_connected(at, {}).what == kind::up));
  auto demoted = p.on_read_only();
  BOOST_TEST((demoted.what == kind::none && demoted.master_changed));
  BOOST_TEST(p.master_epoch() == 1u);
  BOOST_TEST((p.state() == redis::connection_state::connected));
}

BOOST_AUTO_TEST_SUITE_END()

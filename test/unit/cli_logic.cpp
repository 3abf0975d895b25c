// The dlock tool's I/O-free pieces: durations, host lists, exit statuses, CMD's environment, credentials.
#include "dlock/duration.hpp"
#include "dlock/environment.hpp"
#include "dlock/exit_status.hpp"
#include "dlock/hosts.hpp"
#include "dlock/lock_stats.hpp"
#include "dlock/secrets.hpp"

#include <dlock/error.hpp>

#include <boost/test/unit_test.hpp>

#include <csignal>
#include <sys/wait.h>

using namespace dlock::cli;

namespace {
// Milliseconds, or -1 when rejected (printable, unlike an optional duration).
long long milliseconds_of(std::string_view text) {
  auto parsed = parse_duration(text);
  return parsed ? parsed->count() : -1;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(cli_duration)

BOOST_AUTO_TEST_CASE(units) {
  BOOST_TEST(milliseconds_of("500ms") == 500);
  BOOST_TEST(milliseconds_of("30s") == 30'000);
  BOOST_TEST(milliseconds_of("2m") == 120'000);
  BOOST_TEST(milliseconds_of("1h") == 3'600'000);
  BOOST_TEST(milliseconds_of("0") == 0);
  BOOST_TEST(milliseconds_of("7") == 7'000);  // bare: seconds
}

BOOST_AUTO_TEST_CASE(rejects_malformed_and_huge) {
  for (const char* bad : {"", "ms", "-1s", "1.5s", "10 s", "10sec", "1d", "s10", "+3s", "99999999999999999999s",
                          "600h"})
    BOOST_TEST(!parse_duration(bad).has_value(), "accepted '" << bad << "'");
  BOOST_TEST(parse_duration("596h").has_value());  // just under 2^31 ms
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cli_hosts)

BOOST_AUTO_TEST_CASE(one_and_several) {
  auto one = parse_host_list("127.0.0.1:6379");
  BOOST_REQUIRE(one);
  BOOST_TEST((*one == std::vector<host_port>{{"127.0.0.1", 6379}}));
  auto several = parse_host_list("a:1,b.example:65535,[::1]:6380");
  BOOST_REQUIRE(several);
  BOOST_TEST((*several == std::vector<host_port>{{"a", 1}, {"b.example", 65535}, {"::1", 6380}}));
}

BOOST_AUTO_TEST_CASE(rejects_malformed) {
  for (const char* bad : {"", "host", "host:", ":6379", "h:0", "h:65536", "h:12x", "a:1,", ",a:1", "a:1,,b:2",
                          "[::1]6379", "[::1", "[]:1", "h:-1"})
    BOOST_TEST(!parse_host_list(bad).has_value(), "accepted '" << bad << "'");
}

// A Redlock master named twice would count twice toward the majority.
BOOST_AUTO_TEST_CASE(rejects_duplicates) {
  for (const char* dup : {"a:1,a:1", "a:1,b:2,a:1", "localhost:1,127.0.0.1:1", "LocalHost:5,localhost:5",
                          "[::1]:6,[::1]:6"})
    BOOST_TEST(!parse_host_list(dup).has_value(), "accepted '" << dup << "'");
  BOOST_TEST(parse_host_list("a:1,a:2,b:1").has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cli_exit_status)

BOOST_AUTO_TEST_CASE(the_documented_numbers) {
  BOOST_TEST(exit_status::usage == 2);
  BOOST_TEST(exit_status::lost == 121);
  BOOST_TEST(exit_status::timed_out == 124);
  BOOST_TEST(exit_status::failed == 125);
  BOOST_TEST(exit_status::cannot_execute == 126);
  BOOST_TEST(exit_status::not_found == 127);
}

BOOST_AUTO_TEST_CASE(wait_statuses_map_as_shells_do) {
  BOOST_TEST(exit_status::from_wait_status(W_EXITCODE(0, 0)) == 0);
  BOOST_TEST(exit_status::from_wait_status(W_EXITCODE(42, 0)) == 42);
  BOOST_TEST(exit_status::from_wait_status(W_EXITCODE(0, SIGTERM)) == 128 + SIGTERM);
  BOOST_TEST(exit_status::from_wait_status(W_EXITCODE(0, SIGKILL)) == 137);
}

BOOST_AUTO_TEST_CASE(a_loss_overrides_the_command_status) {
  BOOST_TEST(exit_status::for_supervised(true, W_EXITCODE(0, 0)) == 121);
  BOOST_TEST(exit_status::for_supervised(true, W_EXITCODE(0, SIGTERM)) == 121);
  BOOST_TEST(exit_status::for_supervised(false, W_EXITCODE(3, 0)) == 3);
}

BOOST_AUTO_TEST_CASE(spawn_errors) {
  BOOST_TEST(exit_status::from_spawn_error(ENOENT) == 127);
  BOOST_TEST(exit_status::from_spawn_error(EACCES) == 126);
  BOOST_TEST(exit_status::from_spawn_error(ENOEXEC) == 126);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cli_environment)

BOOST_AUTO_TEST_CASE(adds_and_replaces_variables) {
  const char* inherited[] = {"PATH=/bin", "DLOCK_FENCING_TOKEN=9", "HOME=/root", "DLOCK_LOCK_NAME=/old", "X=1",
                             nullptr};
  auto env = child_environment(inherited, {"DLOCK_LOCK_NAME=/new", "X=2"});
  BOOST_TEST((env == std::vector<std::string>{"PATH=/bin", "HOME=/root", "DLOCK_LOCK_NAME=/new", "X=2"}));
}

BOOST_AUTO_TEST_CASE(an_inherited_fencing_token_never_leaks) {
  // A Redis lock has no token: CMD must not see one set for an outer dlock.
  const char* inherited[] = {"DLOCK_FENCING_TOKEN=9", "DLOCK_FENCING_TOKEN_X=keep", nullptr};
  auto env = child_environment(inherited, {"DLOCK_LOCK_NAME=k"});
  BOOST_TEST((env == std::vector<std::string>{"DLOCK_FENCING_TOKEN_X=keep", "DLOCK_LOCK_NAME=k"}));
  BOOST_TEST(child_environment(nullptr, {}).empty());
}

BOOST_AUTO_TEST_CASE(dlock_secrets_are_not_passed_on) {
  const char* inherited[] = {"DLOCK_REDIS_PASSWORD=p", "DLOCK_ZK_AUTH=u:p", "REDISCLI_AUTH=kept", nullptr};
  auto env = child_environment(inherited, {"DLOCK_LOCK_NAME=k"});
  BOOST_TEST((env == std::vector<std::string>{"REDISCLI_AUTH=kept", "DLOCK_LOCK_NAME=k"}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cli_secrets)

BOOST_AUTO_TEST_CASE(a_file_loses_one_line_ending_only) {
  BOOST_TEST(without_line_end("pass\n") == "pass");
  BOOST_TEST(without_line_end("pass\r\n") == "pass");
  BOOST_TEST(without_line_end("pass") == "pass");
  BOOST_TEST(without_line_end("pass\n\n") == "pass\n");
  BOOST_TEST(without_line_end(" pass \n") == " pass ");  // spaces may be part of it
  BOOST_TEST(without_line_end("pass\r") == "pass\r");   // no line ending: kept whole
  BOOST_TEST(without_line_end("") == "");
}

BOOST_AUTO_TEST_CASE(digest_credentials_split_at_the_first_colon) {
  auto d = parse_digest("user:pa:ss");
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(d->user == "user");
  BOOST_TEST(d->password == "pa:ss");
  auto empty_password = parse_digest("user:");
  BOOST_REQUIRE(empty_password.has_value());
  BOOST_TEST(empty_password->password == "");
  BOOST_TEST(!parse_digest("no-colon").has_value());
  BOOST_TEST(!parse_digest(":password").has_value());
  BOOST_TEST(!parse_digest("").has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cli_lock_stats)

using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(what_did_not_happen_is_null) {
  dlock::cli::lock_stats stats;
  BOOST_TEST(stats.json() ==
             "{\"name\":\"\",\"kind\":\"\",\"outcome\":null,\"wait_ms\":0,\"attempts\":0,\"held_ms\":null,"
             "\"ended\":null,\"reason\":null,\"extensions\":0,\"failed_extensions\":0,"
             "\"min_validity_left_ms\":null,\"last_validity_ms\":null}");
}

BOOST_AUTO_TEST_CASE(a_wait_a_hold_and_its_extensions) {
  dlock::cli::lock_stats stats;
  dlock::lock_id id{"/locks/\"backup\"", dlock::lock_kind::redis_lock};
  stats.on_acquire_finished({id, {}, 12500us, 3, 7});
  stats.on_extended({id, {}, 6000ms, 10000ms});
  stats.on_extended({id, {}, 4000ms, 10000ms});
  stats.on_extended({id, make_error_code(dlock::error::not_owned), 3000ms, 3000ms});
  stats.on_hold_ended({id, dlock::hold_end::lost, make_error_code(dlock::error::lost), 2500ms});
  auto line = stats.json();
  BOOST_TEST(line.find("\"name\":\"/locks/\\\"backup\\\"\"") != std::string::npos, line);
  BOOST_TEST(line.find("\"kind\":\"redis_lock\",\"outcome\":\"ok\",\"wait_ms\":12.5,\"attempts\":3") != std::string::npos,
             line);
  BOOST_TEST(line.find("\"held_ms\":2500,\"ended\":\"lost\"") != std::string::npos, line);
  BOOST_TEST(line.find("\"extensions\":2,\"failed_extensions\":1,\"min_validity_left_ms\":4000,"
                       "\"last_validity_ms\":10000}") != std::string::npos,
             line);
}

BOOST_AUTO_TEST_SUITE_END()

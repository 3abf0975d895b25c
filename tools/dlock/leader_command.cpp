// dlock leader: print an election's current leader, or follow its changes.
#include "dlock/backend.hpp"
#include "dlock/command_line.hpp"
#include "dlock/commands.hpp"
#include "dlock/exit_status.hpp"
#include "dlock/race.hpp"
#include "dlock/run.hpp"
#include "dlock/server_options.hpp"

#include <dlock/zk/leader_election.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/signal_set.hpp>

#include <csignal>
#include <iostream>

namespace dlock::cli {
namespace {

struct leader_settings {
  zk_settings zk;
  std::string path;
  bool watch = false;
};

po::options_description leader_options() {
  po::options_description options("Options");
  options.add_options()
      ("zk", po::value<std::string>(), "ZooKeeper servers \"host:port,...[/chroot]\"")
      ("watch", "print the leader, then each change (an empty line: no leader), until SIGINT/SIGTERM")
      ("path", po::value<std::string>(), "the election's PATH (positional)");
  add_connect_timeout_option(options);
  add_zk_auth_options(options);
  add_common_options(options);
  return options;
}

void print_line(const std::optional<std::string>& leader) { std::cout << leader.value_or("") << std::endl; }

// Prints every change until a stop signal; then status 0.
asio::awaitable<int> follow(zk::leader_election& election, std::optional<std::string> leader, asio::signal_set& stop) {
  asio::steady_timer no_timeout(co_await asio::this_coro::executor);
  arm(no_timeout, std::nullopt);
  for (;;) {
    print_line(leader);
    auto [order, ec, next, timer_ec, signal_ec, signo] = co_await race(election.observe(leader, asio::deferred),
                                                                       no_timeout, stop);
    if (first_finished(order[0]) != race_end::operation) co_return exit_status::success;
    if (ec) throw failure("watching the leader of " + election.path() + ": " + ec.message());
    leader = std::move(next);
  }
}

asio::awaitable<int> print_leader(zk::client& client, leader_settings s, asio::signal_set& stop) {
  zk::leader_election election(client, s.path);
  auto [ec, leader] = co_await election.leader(asio::as_tuple(asio::deferred));
  if (ec) throw failure("reading the leader of " + s.path + ": " + ec.message());
  if (s.watch) co_return co_await follow(election, leader, stop);
  if (leader) print_line(leader);
  co_return leader ? exit_status::success : exit_status::empty;
}

asio::awaitable<int> show_leader(leader_settings s) {
  auto executor = co_await asio::this_coro::executor;
  asio::signal_set stop(executor, SIGINT, SIGTERM, SIGHUP);
  asio::steady_timer no_timeout(executor);
  arm(no_timeout, std::nullopt);
  auto client = make_zk_client(executor, s.zk);
  auto connected = co_await connect_within(connect_zk(client, s.zk.hosts), no_timeout, stop);
  int status = exit_status::failed;
  if (connected.end == race_end::signal) status = exit_status::for_signal(connected.signo);
  else if (!connected.failure) status = co_await print_leader(*client, s, stop);
  co_await close_zk(*client);
  if (connected.failure) std::rethrow_exception(connected.failure);
  co_return status;
}

}  // namespace

int leader_command(const std::vector<std::string>& args) {
  auto options = leader_options();
  auto parsed_or_help = parse_or_print_help(args, "leader", options, {"path"}, false,
      "Prints the id of the candidate leading the election at PATH (see 'dlock elect').\n"
      "Exit status: 0, 1 when there is no leader, 2 usage error, 125 failure.\n\n" +
      std::string(secrets_help_text(false)));
  if (!parsed_or_help) return exit_status::success;
  auto& parsed = *parsed_or_help;
  leader_settings s;
  auto hosts = required_string(parsed.values, "zk", "--zk HOSTS is required");
  s.path = required_string(parsed.values, "path", "missing the election's PATH");
  s.zk = zk_settings_from(parsed.values, hosts);
  require_zk_path(s.path);
  s.watch = parsed.values.count("watch") > 0;
  route_library_log(parsed.values.count("verbose") > 0);
  return run_to_exit_status(&show_leader, std::move(s));
}

}  // namespace dlock::cli

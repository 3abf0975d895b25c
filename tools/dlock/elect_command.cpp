// dlock elect: campaign for leadership on ZooKeeper, run CMD while leader.
#include "dlock/backend.hpp"
#include "dlock/command_line.hpp"
#include "dlock/commands.hpp"
#include "dlock/hold.hpp"
#include "dlock/server_options.hpp"

#include <dlock/zk/leader_election.hpp>

#include <boost/asio/signal_set.hpp>

#include <csignal>
#include <unistd.h>

namespace dlock::cli {
namespace {

struct elect_settings {
  zk_settings zk;
  std::string id;
  hold_settings hold;
};

/// A candidacy seen as a lock, so `hold_while_running` serves elections too:
/// leading is holding, resigning is releasing.
class candidacy {
 public:
  candidacy(zk::leader_election& election, std::string id) : election_(&election), id_(std::move(id)) {}
  template <class Token>
  auto acquire(Token&& token) { return election_->campaign(id_, std::forward<Token>(token)); }
  // An election has no single attempt: elect refuses --timeout 0, so this is never used.
  template <class Token>
  auto try_acquire(Token&& token) { return acquire(std::forward<Token>(token)); }
  template <class Token>
  auto release(Token&& token) { return election_->resign(std::forward<Token>(token)); }
  lock_loss& loss() { return election_->loss(); }
  asio::any_io_executor get_executor() const noexcept { return election_->get_executor(); }
  std::int64_t fencing_token() const noexcept { return election_->fencing_token(); }

 private:
  zk::leader_election* election_;
  std::string id_;
};

static_assert(holdable<candidacy> && fenced<candidacy>);

std::string default_id() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(::getpid());
}

po::options_description elect_options() {
  po::options_description options("Options");
  options.add_options()
      ("zk", po::value<std::string>(), "ZooKeeper servers \"host:port,...[/chroot]\"")
      ("id", po::value<std::string>(), "this candidate's id, shown by 'dlock leader' (default host:pid)")
      ("timeout", po::value<std::string>(), "give up (status 124) if not leader within D, connecting included")
      ("session-timeout", po::value<std::string>()->default_value("10s"), "the ZooKeeper session timeout")
      ("grace", po::value<std::string>()->default_value("5s"), "after losing leadership, SIGKILL CMD this long after SIGTERM")
      ("path", po::value<std::string>(), "the election's PATH (positional)");
  add_connect_timeout_option(options);
  add_zk_auth_options(options);
  add_common_options(options);
  return options;
}

elect_settings settings_from(const parsed_arguments& parsed) {
  const auto& values = parsed.values;
  elect_settings s;
  auto hosts = required_string(values, "zk", "--zk HOSTS is required");
  s.hold.name = required_string(values, "path", "missing the election's PATH");
  require_zk_path(s.hold.name);
  s.hold.command = parsed.command;
  s.hold.timeout = duration_option(values, "timeout");
  // An election has no single attempt (see candidacy::try_acquire).
  if (s.hold.timeout && s.hold.timeout->count() == 0) throw usage_error("--timeout must be more than 0");
  s.hold.grace = *duration_option(values, "grace");
  s.zk = zk_settings_from(values, hosts, *duration_option(values, "session-timeout"));
  s.id = string_option(values, "id").value_or(default_id());
  if (s.id.empty()) throw usage_error("--id must not be empty");
  return s;
}

// As for locks: a session expiry while campaigning costs the place in line, not the wait.
zk::election_options campaign_options() {
  zk::election_options options;
  options.restart_after_expiry = true;
  options.retry.max_attempts = 1'000'000;  // connection losses retried until --timeout, as for locks
  return options;
}

asio::awaitable<int> campaign(zk::client& client, elect_settings s, asio::steady_timer& deadline,
                              asio::signal_set& stop) {
  zk::leader_election election(client, s.hold.name, campaign_options());
  candidacy candidate(election, s.id);
  co_return co_await hold_while_running(candidate, s.hold, deadline, stop);
}

asio::awaitable<int> lead(elect_settings s) {
  auto executor = co_await asio::this_coro::executor;
  asio::signal_set stop(executor, SIGINT, SIGTERM, SIGHUP);
  asio::steady_timer deadline(executor);
  arm_deadline(deadline, s.hold);
  auto client = make_zk_client(executor, s.zk);
  auto connected = co_await connect_within(connect_zk(client, s.zk.hosts), deadline, stop);
  int status = status_for(connected, s.hold);
  if (status == exit_status::success) status = co_await campaign(*client, s, deadline, stop);
  co_await close_zk(*client);
  co_return status;
}

}  // namespace

int elect_command(const std::vector<std::string>& args) {
  auto options = elect_options();
  auto parsed_or_help = parse_or_print_help(args, "elect", options, {"path"}, true,
      "CMD runs while this candidate leads, with DLOCK_LOCK_NAME (PATH) and\n"
      "DLOCK_FENCING_TOKEN (the term's token) in its environment. Signals are forwarded\n"
      "as for 'dlock lock'; losing leadership is handled like a lost lock (status 121).\n\n" +
      std::string(secrets_help_text(false)) + std::string(exit_status::help_text()));
  if (!parsed_or_help) return exit_status::success;
  auto& parsed = *parsed_or_help;
  auto settings = settings_from(parsed);
  route_library_log(parsed.values.count("verbose") > 0);
  return run_to_exit_status(&lead, std::move(settings));
}

}  // namespace dlock::cli

// dlock queue: put, take, peek at and count the items of a ZooKeeper queue.
#include "dlock/backend.hpp"
#include "dlock/command_line.hpp"
#include "dlock/commands.hpp"
#include "dlock/exit_status.hpp"
#include "dlock/race.hpp"
#include "dlock/run.hpp"
#include "dlock/server_options.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/queue.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/signal_set.hpp>

#include <csignal>
#include <iostream>

namespace dlock::cli {
namespace {

enum class queue_action { put, take, peek, size };

struct queue_settings {
  zk_settings zk;
  std::string path;
  queue_action action = queue_action::size;
  std::string data;
  std::optional<std::chrono::milliseconds> timeout;
};

constexpr auto with_error = asio::as_tuple(asio::deferred);

po::options_description queue_options() {
  po::options_description options("Options");
  options.add_options()
      ("zk", po::value<std::string>(), "ZooKeeper servers \"host:port,...[/chroot]\"")
      ("timeout", po::value<std::string>(), "take: give up (status 124) if nothing arrives within D, "
                                            "connecting included")
      ("path", po::value<std::string>(), "the queue's PATH (positional)")
      ("action", po::value<std::string>(), "put, take, peek or size (positional)")
      ("data", po::value<std::string>(), "put: the item (positional)");
  add_connect_timeout_option(options);
  add_zk_auth_options(options);
  add_common_options(options);
  return options;
}

queue_action action_named(const std::string& name) {
  if (name == "put") return queue_action::put;
  if (name == "take") return queue_action::take;
  if (name == "peek") return queue_action::peek;
  if (name == "size") return queue_action::size;
  throw usage_error("unknown queue action '" + name + "' (put, take, peek, size)");
}

queue_settings settings_from(const po::variables_map& values) {
  queue_settings s;
  s.zk = zk_settings_from(values, required_string(values, "zk", "--zk HOSTS is required"));
  s.path = required_string(values, "path", "missing the queue's PATH");
  require_zk_path(s.path);
  s.action = action_named(required_string(values, "action", "missing the action: put, take, peek or size"));
  auto data = string_option(values, "data");
  if (s.action == queue_action::put && !data) throw usage_error("put: missing DATA");
  if (s.action != queue_action::put && data) throw usage_error("unexpected argument '" + *data + "'");
  s.data = data.value_or("");
  s.timeout = duration_option(values, "timeout");
  if (s.timeout && s.action != queue_action::take) throw usage_error("--timeout is for take");
  return s;
}

void print_item(const std::string& item) { std::cout << item << std::endl; }

asio::awaitable<int> take(zk::queue& queue, asio::steady_timer& deadline, asio::signal_set& stop) {
  auto [order, ec, item, timer_ec, signal_ec, signo] = co_await race(queue.take(asio::deferred), deadline, stop);
  // The take's own result first: a take stopped by the timeout or a signal
  // while its item's removal was under way still completes with the item,
  // which is gone from the queue: print it (and succeed), never drop it.
  if (!ec) {
    print_item(item);
    co_return exit_status::success;
  }
  if (ec == dlock::error::removal_uncertain) {
    print_item(item);  // the item may be ours: never drop it silently
    throw failure("take: the connection dropped during the removal; the item printed may also go to another consumer");
  }
  switch (first_finished(order[0])) {
    case race_end::timeout: co_return exit_status::timed_out;
    case race_end::signal: co_return exit_status::for_signal(signo);
    case race_end::operation: break;
  }
  throw failure("take: " + ec.message());
}

asio::awaitable<int> act(zk::queue& queue, queue_settings s, asio::steady_timer& deadline, asio::signal_set& stop) {
  switch (s.action) {
    case queue_action::put: {
      auto [ec, node] = co_await queue.offer(s.data, with_error);
      if (ec) throw failure("put: " + ec.message());
      co_return exit_status::success;
    }
    case queue_action::take: co_return co_await take(queue, deadline, stop);
    case queue_action::peek: {
      auto [ec, head] = co_await queue.peek(with_error);
      if (ec) throw failure("peek: " + ec.message());
      if (!head) co_return exit_status::empty;
      print_item(*head);
      co_return exit_status::success;
    }
    case queue_action::size: {
      auto [ec, size] = co_await queue.size(with_error);
      if (ec) throw failure("size: " + ec.message());
      std::cout << size << std::endl;
      co_return exit_status::success;
    }
  }
  co_return exit_status::failed;
}

asio::awaitable<int> act_on_queue(zk::client& client, queue_settings s, asio::steady_timer& deadline,
                                  asio::signal_set& stop) {
  zk::queue queue(client, s.path);
  co_return co_await act(queue, s, deadline, stop);
}

asio::awaitable<int> use_queue(queue_settings s) {
  auto executor = co_await asio::this_coro::executor;
  asio::signal_set stop(executor, SIGINT, SIGTERM, SIGHUP);
  asio::steady_timer deadline(executor);  // take --timeout: connecting counts
  arm(deadline, s.timeout);
  auto client = make_zk_client(executor, s.zk);
  auto connected = co_await connect_within(connect_zk(client, s.zk.hosts), deadline, stop);
  int status = exit_status::failed;
  switch (connected.end) {
    case race_end::timeout: status = exit_status::timed_out; break;
    case race_end::signal: status = exit_status::for_signal(connected.signo); break;
    case race_end::operation:
      if (!connected.failure) status = co_await act_on_queue(*client, s, deadline, stop);
      break;
  }
  co_await close_zk(*client);
  if (connected.failure) std::rethrow_exception(connected.failure);
  co_return status;
}

}  // namespace

int queue_command(const std::vector<std::string>& args) {
  auto options = queue_options();
  auto parsed_or_help = parse_or_print_help(args, "queue", options, {"path", "action", "data"}, false,
      "take and peek print the item and a newline; size prints the count.\n"
      "Exit status: 0; 1 peek on an empty queue (nothing printed); 2 usage error;\n"
      "124 take --timeout with nothing arriving; 125 failure (a take whose removal\n"
      "is uncertain prints the item and exits 125); 128+N stopped by signal N.\n"
      "A take stopped (timeout, signal) after it removed its item prints it, status 0.\n\n" +
      std::string(secrets_help_text(false)));
  if (!parsed_or_help) return exit_status::success;
  auto& parsed = *parsed_or_help;
  auto settings = settings_from(parsed.values);
  route_library_log(parsed.values.count("verbose") > 0);
  return run_to_exit_status(&use_queue, std::move(settings));
}

}  // namespace dlock::cli

#include <dlock/redis/error.hpp>

#include <string>

namespace dlock::redis {
namespace {

class category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "dlock.redis"; }
  std::string message(int value) const override {
    switch (static_cast<error>(value)) {
      case error::server_error: return "the server answered with an error";
      case error::no_script: return "NOSCRIPT: the script is not cached on the server";
      case error::wrong_type: return "WRONGTYPE: the key holds a value of another type";
      case error::auth_failed: return "authentication failed (wrong user or password, or not permitted)";
      case error::busy: return "the server is busy, loading or has no master";
      case error::not_connected: return "the connection is not established (reconnecting)";
      case error::connection_lost: return "the connection to the server was lost";
      case error::timed_out: return "no answer from the server in time";
      case error::protocol_error: return "the server's reply is not valid RESP";
      case error::script_not_run:
        return "the script was not run: the server's script cache was flushed and later commands were already "
               "sent (issue it again)";
      case error::read_only: return "READONLY: the server is a replica now (a failover demoted it)";
      case error::sentinels_unreachable: return "no sentinel answered";
      case error::master_unknown: return "the sentinels monitor no master by that name";
      case error::not_master: return "the server the sentinels named is not a master";
    }
    return "unknown dlock.redis error " + std::to_string(value);
  }
};

}  // namespace

const boost::system::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

}  // namespace dlock::redis

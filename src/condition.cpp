// dlock::condition: "connection lost", "timed out" and "closed", whatever
// the backend's own error category says.
#include <dlock/error.hpp>
#include <dlock/redis/error.hpp>
#include <dlock/zk/error.hpp>

#include <string>

namespace dlock {
namespace {

bool is_zk(const error_code& ec, zk::error e) noexcept {
  return ec.category() == zk::error_category() && ec.value() == static_cast<int>(e);
}
bool is_redis(const error_code& ec, redis::error e) noexcept {
  return ec.category() == redis::error_category() && ec.value() == static_cast<int>(e);
}
bool is_dlock(const error_code& ec, error e) noexcept {
  return ec.category() == error_category() && ec.value() == static_cast<int>(e);
}

class category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "dlock.condition"; }

  std::string message(int value) const override {
    switch (static_cast<condition>(value)) {
      case condition::connection_lost: return "the connection was lost";
      case condition::timed_out: return "timed out";
      case condition::closed: return "closed";
    }
    return "unknown dlock condition " + std::to_string(value);
  }

  bool equivalent(const error_code& code, int value) const noexcept override {
    switch (static_cast<condition>(value)) {
      case condition::connection_lost:
        return is_zk(code, zk::error::connection_loss) || is_zk(code, zk::error::operation_timeout) ||
               is_redis(code, redis::error::connection_lost) || is_redis(code, redis::error::not_connected);
      case condition::timed_out:
        return is_dlock(code, error::timed_out) || is_zk(code, zk::error::operation_timeout) ||
               is_redis(code, redis::error::timed_out);
      case condition::closed:
        return is_dlock(code, error::closed) || is_zk(code, zk::error::closing);
    }
    return false;
  }
};

}  // namespace

const boost::system::error_category& condition_category() noexcept {
  static const category instance;
  return instance;
}

}  // namespace dlock

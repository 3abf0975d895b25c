#include <dlock/error.hpp>

#include <string>

namespace dlock {
namespace {

class category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "dlock"; }
  std::string message(int value) const override {
    switch (static_cast<error>(value)) {
      case error::invalid_argument: return "invalid argument";
      case error::already_held: return "the lock is already held by this object (locks are not reentrant)";
      case error::not_held: return "the lock is not held by this object";
      case error::taken: return "the lock is held by someone else";
      case error::timed_out: return "the wait limit ran out";
      case error::lost: return "the lock was lost";
      case error::not_owned: return "the lock is no longer owned (expired or taken over)";
      case error::no_quorum: return "no quorum: too many masters failed or timed out";
      case error::expired: return "the lock's validity ran out before the acquire was decided";
      case error::closed: return "the client is closed";
      case error::empty: return "the queue is empty";
      case error::removal_uncertain:
        return "the item's removal reply was lost to a connection drop: the item may have been removed "
               "(by this consumer or another) or may be delivered again";
      case error::in_progress:
        return "another operation on this lock object has not finished yet (one operation at a time: "
               "await the previous acquire or release first)";
      case error::stale_token:
        return "the write carried a fencing token lower than one already seen: a later holder of the lock "
               "has written since, so this holder's lock had expired";
      case error::stalled:
        return "the event loop stalled for longer than the hold's margin: the lock may have expired meanwhile";
      case error::failed_over:
        return "the Redis master the lock was granted on failed over: the new master may not have the key";
      case error::not_replicated:
        return "fewer replicas acknowledged the lock's key than asked: it was not taken";
    }
    return "unknown dlock error " + std::to_string(value);
  }
};

}  // namespace

const boost::system::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

}  // namespace dlock

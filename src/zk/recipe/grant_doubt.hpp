// Whether a grant a recipe just read may be trusted: the session that made
// the holder's nodes must still be the client's, and the servers cannot have
// expired it yet. A grant decided later (the client was paused between the
// request and its reply) is given back, not held.
#pragma once

#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>

#include <cstdint>
#include <optional>

namespace dlock::zk::detail {

/// On the client's strand. `owner`: the session that created the nodes
/// (none to compare when the grant made none). Empty when the grant holds;
/// else `closed`, `session_expired` (lost, or another session now), or
/// `expired` (the session's last word from the servers is too old to vouch for it).
error_code grant_doubt(const client& zk, std::optional<std::int64_t> owner);

}  // namespace dlock::zk::detail

/// @file
/// Transactions: the operations `client::multi` applies all together or not
/// at all, and what it reports for each. The operation itself (handler
/// signature, executor, cancellation, errors) is documented at `client::multi`.
#pragma once

#include <dlock/config.hpp>
#include <dlock/zk/types.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dlock::zk {

/// One operation of a transaction (ZooKeeper's `Op`); build it with the factories.
struct op {
  /// Which operation.
  enum class kind {
    create,  ///< see `op::create`
    remove,  ///< see `op::remove`
    set,     ///< see `op::set`
    check,   ///< see `op::check`
  };

  /// Creates `path` (for sequential modes, `path` is the prefix), with the
  /// client's default ACL. Not `create_mode::container`: the C client cannot
  /// read its result inside a transaction (`dlock::error::invalid_argument`).
  static op create(std::string path, std::string data, create_mode mode = create_mode::persistent);
  /// Deletes `path` if its version matches (-1: any).
  static op remove(std::string path, std::int32_t version = -1);
  /// Replaces the data if the version matches (-1: any).
  static op set(std::string path, std::string data, std::int32_t version = -1);
  /// Requires `path` to exist with this version (-1: any version, existence only).
  static op check(std::string path, std::int32_t version = -1);

  kind type = kind::check;                     ///< the operation
  std::string path;                            ///< the node (a prefix for sequential creates)
  std::string data;                            ///< create and set: the node's data
  create_mode mode = create_mode::persistent;  ///< create: the node's mode
  std::int32_t version = -1;                   ///< remove, set, check: the version required (-1: any)
};

/// One operation's outcome.
struct op_result {
  error_code error;  ///< this operation's own error (see `multi_result`)
  std::string path;  ///< create: the path created (with the sequence suffix, without the chroot)
  zk::stat stat;     ///< set: the node's new metadata
};

/// What `client::multi` reports.
///
/// When the server refused the transaction, nothing was applied and
/// `failed_op` is the operation that failed it; in `results`, that one has
/// the error, the ones before it none of their own, the ones after it
/// `zk::error::runtime_inconsistency` (not attempted). When the request got
/// no answer (connection loss, closed...), every result has that error and
/// `failed_op` is empty.
struct multi_result {
  std::vector<op_result> results;        ///< one per operation, in order; empty if nothing was sent
  std::optional<std::size_t> failed_op;  ///< index of the operation that failed the transaction
};

}  // namespace dlock::zk

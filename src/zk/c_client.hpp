// Every call into the ZooKeeper C client goes through here.
//
// zookeeper_st keeps its request-id counter in a plain process-wide global
// (st_adaptor.c get_xid), so calls from every handle in the process are
// serialized by one mutex, whichever thread runs each client's strand. The C
// client's log lines are buffered while the mutex is held and handed to
// dlock's log hook after it is released, so no user code runs inside it.
#pragma once

#include <zookeeper/zookeeper.h>

namespace dlock::zk::detail {

class c_call_guard {
 public:
  c_call_guard();
  ~c_call_guard();
  c_call_guard(const c_call_guard&) = delete;
  c_call_guard& operator=(const c_call_guard&) = delete;
};

/// The log callback given to zookeeper_init2.
extern "C" void c_client_log(const char* message);

/// Sets the C client's process-wide log level from dlock's (at each session opening).
void configure_c_client_logging();

}  // namespace dlock::zk::detail

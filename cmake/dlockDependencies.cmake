# Finds what dlock links against. Used by the build and, installed, by dlockConfig.cmake.
include(CMakeFindDependencyMacro)
find_dependency(Boost 1.81)
find_dependency(Threads)
find_dependency(OpenSSL)  # redis::connection's TLS (asio::ssl, libssl) and redis::script's SHA1 (libcrypto)

if(NOT TARGET dlock_deps::zookeeper_st)
  find_path(DLOCK_ZOOKEEPER_INCLUDE_DIR zookeeper/zookeeper.h)
  find_library(DLOCK_ZOOKEEPER_LIBRARY zookeeper_st)
  if(NOT DLOCK_ZOOKEEPER_INCLUDE_DIR OR NOT DLOCK_ZOOKEEPER_LIBRARY)
    message(FATAL_ERROR "dlock: the ZooKeeper C client (zookeeper_st) was not found; install libzookeeper-st-dev")
  endif()
  add_library(dlock_deps::zookeeper_st UNKNOWN IMPORTED)
  set_target_properties(dlock_deps::zookeeper_st PROPERTIES
    IMPORTED_LOCATION "${DLOCK_ZOOKEEPER_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${DLOCK_ZOOKEEPER_INCLUDE_DIR}")
endif()

if(NOT TARGET dlock_deps::hiredis)
  find_path(DLOCK_HIREDIS_INCLUDE_DIR hiredis/read.h)
  find_library(DLOCK_HIREDIS_LIBRARY hiredis)
  if(NOT DLOCK_HIREDIS_INCLUDE_DIR OR NOT DLOCK_HIREDIS_LIBRARY)
    message(FATAL_ERROR "dlock: hiredis was not found; install libhiredis-dev")
  endif()
  add_library(dlock_deps::hiredis UNKNOWN IMPORTED)
  set_target_properties(dlock_deps::hiredis PROPERTIES
    IMPORTED_LOCATION "${DLOCK_HIREDIS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${DLOCK_HIREDIS_INCLUDE_DIR}")
endif()

# Finds what dlock links against. Used by dlock's own build and, installed, by
# dlockConfig.cmake. There a missing dependency is not an error of its own: it
# sets dlock_FOUND to false with dlock_NOT_FOUND_MESSAGE, so find_package(dlock)
# reports dlock as not found (an error only when REQUIRED; silent with QUIET) and
# a project can build without it. In dlock's own build it stops the configure.
include(CMakeFindDependencyMacro)

# Inside find_package(dlock), CMAKE_FIND_PACKAGE_NAME is dlock.
macro(dlock_find_dependency)
  if(CMAKE_FIND_PACKAGE_NAME STREQUAL "dlock")
    find_dependency(${ARGN})  # passes QUIET and REQUIRED on; returns when not found
  else()
    find_package(${ARGN} REQUIRED)
  endif()
endmacro()

# A macro, so that return() leaves this file, as find_dependency's does.
macro(dlock_dependency_missing message)
  if(CMAKE_FIND_PACKAGE_NAME STREQUAL "dlock")
    set(dlock_NOT_FOUND_MESSAGE "${message}")
    set(dlock_FOUND FALSE)
    return()
  endif()
  message(FATAL_ERROR "${message}")
endmacro()

dlock_find_dependency(Boost 1.81)
dlock_find_dependency(Threads)
dlock_find_dependency(OpenSSL)  # redis::connection's TLS (asio::ssl, libssl) and redis::script's SHA1 (libcrypto)

if(NOT TARGET dlock_deps::zookeeper_st)
  find_path(DLOCK_ZOOKEEPER_INCLUDE_DIR zookeeper/zookeeper.h)
  find_library(DLOCK_ZOOKEEPER_LIBRARY zookeeper_st)
  if(NOT DLOCK_ZOOKEEPER_INCLUDE_DIR OR NOT DLOCK_ZOOKEEPER_LIBRARY)
    dlock_dependency_missing("dlock: the ZooKeeper C client (zookeeper_st: zookeeper/zookeeper.h and its library) was not found; install libzookeeper-st-dev, or set DLOCK_ZOOKEEPER_INCLUDE_DIR and DLOCK_ZOOKEEPER_LIBRARY")
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
    dlock_dependency_missing("dlock: hiredis (hiredis/read.h and its library) was not found; install libhiredis-dev, or set DLOCK_HIREDIS_INCLUDE_DIR and DLOCK_HIREDIS_LIBRARY")
  endif()
  add_library(dlock_deps::hiredis UNKNOWN IMPORTED)
  set_target_properties(dlock_deps::hiredis PROPERTIES
    IMPORTED_LOCATION "${DLOCK_HIREDIS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${DLOCK_HIREDIS_INCLUDE_DIR}")
endif()

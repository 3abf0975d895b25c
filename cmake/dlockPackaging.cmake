# Debian packages, built by `cpack -G DEB` (see scripts/package):
#   libdlock-dev  the headers, libdlock.a, the CMake package files and dlock.pc (component `dev`)
#   dlock         the command-line tool (component `tool`)
# Configure with -DCMAKE_INSTALL_PREFIX=/usr: the packages install there, and
# GNUInstallDirs then picks Debian's multiarch library folder.

# pkg-config, for builds without CMake: `pkg-config --cflags --libs dlock`.
# A static libdlock.a leaves the libraries it uses to its users' link; a
# shared libdlock.so links them itself (Libs.private, for `--static` only).
get_target_property(dlock_type dlock TYPE)
set(DLOCK_PC_DEPENDENCIES "-lzookeeper_st -lhiredis -lssl -lcrypto")
if(dlock_type STREQUAL "SHARED_LIBRARY")
  set(DLOCK_PC_LIBS "-ldlock -pthread")
  set(DLOCK_PC_LIBS_PRIVATE "Libs.private: ${DLOCK_PC_DEPENDENCIES}")
else()
  set(DLOCK_PC_LIBS "-ldlock ${DLOCK_PC_DEPENDENCIES} -pthread")
  set(DLOCK_PC_LIBS_PRIVATE "")
endif()
# Relocatable: the prefix is found from dlock.pc's own folder (${pcfiledir}),
# so `cmake --install build --prefix X` gives a dlock.pc that points into X.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(DLOCK_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH pc_to_prefix "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")  # ../.. or ../../..
  string(REGEX REPLACE "/$" "" pc_to_prefix "${pc_to_prefix}")
  set(DLOCK_PC_PREFIX "\${pcfiledir}/${pc_to_prefix}")
endif()
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(DLOCK_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(DLOCK_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/dlock.pc.in ${PROJECT_BINARY_DIR}/dlock.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/dlock.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# CPack packages the top-level project: not when dlock is built inside another one.
if(NOT PROJECT_IS_TOP_LEVEL)
  return()
endif()

set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR "dlock")
set(CPACK_PACKAGE_CONTACT "dlock maintainers <dlock@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # name_version_arch.deb

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "distributed locks over ZooKeeper and Redis for C++20 (Boost.Asio)
dlock is a C++20 coroutine library on Boost.Asio for distributed locks and
coordination over ZooKeeper (mutex, read/write lock, leader election, queue)
and Redis (single-instance lock, Redlock). This package holds the headers,
the static library, the CMake package (find_package(dlock CONFIG)) and a
pkg-config file.")
# What a program linking libdlock.a needs (the list cmake/dlockDependencies.cmake finds).
# Boost: any version from 1.81 on. Debian 12's libboost-dev is 1.74, so its
# libboost1.81-dev is named too; Ubuntu 24.04 and Debian 13 have libboost-dev 1.83.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libboost-dev (>= 1.81) | libboost1.81-dev | libboost1.83-dev, libzookeeper-st-dev, libhiredis-dev, libssl-dev")

set(CPACK_DEBIAN_TOOL_PACKAGE_NAME dlock)
set(CPACK_DEBIAN_TOOL_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_TOOL_DESCRIPTION
    "run a command under a distributed lock (ZooKeeper or Redis)
The dlock command runs a program while holding a lock, leads an election or
uses a queue, on ZooKeeper or Redis, and stops the program when the lock is
lost.")
# Its shared libraries (Boost.Program_options, the ZooKeeper C client, hiredis,
# OpenSSL, libstdc++) become Depends through dpkg-shlibdeps.
set(CPACK_DEBIAN_TOOL_PACKAGE_SHLIBDEPS ON)

include(CPack)

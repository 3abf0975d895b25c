# Installs the build tree into a scratch prefix, then configures, builds and runs
# test/consumer against it with find_package(dlock CONFIG), compiling each
# installed header alone too; and checks that each header, included from C++17,
# stops at once with dlock's "needs C++20" error.
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
# The library as built (libdlock.a, or libdlock.so.X.Y with BUILD_SHARED_LIBS)
# is what got installed, and (below) what the consumer links.
file(GLOB_RECURSE installed ${WORK_DIR}/prefix/${LIBRARY_FILE})
if(NOT installed)
  message(FATAL_ERROR "${LIBRARY_FILE} is not installed under ${WORK_DIR}/prefix")
endif()
if(CHECK_TOOL)  # the dlock command-line tool is installed too, and runs
  run(${WORK_DIR}/prefix/bin/dlock --help)
endif()
set(flags "")
if(SANITIZE)
  set(flags "-fsanitize=address,undefined")
endif()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCHECK_EACH_HEADER=ON
    "-DCMAKE_CXX_FLAGS=${flags}" "-DCMAKE_EXE_LINKER_FLAGS=${flags}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build -j2)
run(${WORK_DIR}/build/consumer)
if(LIBRARY_FILE MATCHES "\\.so")
  execute_process(COMMAND ldd ${WORK_DIR}/build/consumer OUTPUT_VARIABLE linked)
  if(NOT linked MATCHES "libdlock\\.so")
    message(FATAL_ERROR "the consumer does not load libdlock.so:\n${linked}")
  endif()
endif()

# From an older standard, each header's first error is dlock's own, naming C++20
# (-Wfatal-errors: the first error is the only one). Nothing past it is read,
# so the dependencies' headers are not needed.
file(GLOB_RECURSE headers RELATIVE ${WORK_DIR}/prefix/include ${WORK_DIR}/prefix/include/dlock/*.hpp)
foreach(header IN LISTS headers)
  file(WRITE ${WORK_DIR}/cxx17.cpp "#include <${header}>\n")
  execute_process(COMMAND ${CXX_COMPILER} -std=c++17 -Wfatal-errors -fsyntax-only -I${WORK_DIR}/prefix/include
                          ${WORK_DIR}/cxx17.cpp
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0 OR NOT out MATCHES "dlock needs C\\+\\+20")
    message(FATAL_ERROR "${header} included from C++17 does not stop at dlock's C++20 error (status ${rc}):\n${out}")
  endif()
endforeach()

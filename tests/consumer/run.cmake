# Installs the zkr build into a scratch prefix, then configures, builds and runs the consumer,
# and runs the installed zklock from there.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${ZKR_BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH ${WORK_DIR}/build/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the consumer failed: ${rc}")
endif()

# zkr::testkit, when the build has it: a user's test project finds it as a component of the
# installed zkr, and its test runs (servers of its own, a partition, an expiry, a leader killed).
file(STRINGS ${ZKR_BUILD_DIR}/CMakeCache.txt testkit_setting REGEX "^ZKR_BUILD_TESTKIT:BOOL=")
string(REGEX REPLACE "^[^=]*=" "" testkit "${testkit_setting}")
if(testkit)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SRC}/testkit -B ${WORK_DIR}/testkit -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
                  RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "configuring the testkit consumer failed: ${rc}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/testkit RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "building the testkit consumer failed: ${rc}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH --unset=ZKR_TESTKIT_CONNECT
                          ${WORK_DIR}/testkit/lock_loss_test RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "the testkit consumer failed: ${rc}")
  endif()
endif()

# zklock, when the build has it, installed into a prefix the loader does not search: it must
# start as installed, with no LD_LIBRARY_PATH, on the libzkr installed beside it (not on one
# that happens to be in the loader's paths, from a package say).
file(STRINGS ${ZKR_BUILD_DIR}/CMakeCache.txt tools_setting REGEX "^ZKR_BUILD_TOOLS:BOOL=")
file(STRINGS ${ZKR_BUILD_DIR}/CMakeCache.txt bindir_setting REGEX "^CMAKE_INSTALL_BINDIR:PATH=")
string(REGEX REPLACE "^[^=]*=" "" tools "${tools_setting}")
string(REGEX REPLACE "^[^=]*=" "" bindir "${bindir_setting}")
if(NOT tools)
  return()
endif()
set(zklock ${WORK_DIR}/prefix/${bindir}/zklock)
if(NOT EXISTS ${zklock})
  message(FATAL_ERROR "zklock was built but not installed: no ${zklock}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH ${zklock} --version
                RESULT_VARIABLE rc OUTPUT_VARIABLE version ERROR_VARIABLE error)
if(rc OR NOT version MATCHES "^zklock [0-9]")
  message(FATAL_ERROR "the installed zklock does not start (${rc}): ${error}${version}")
endif()
find_program(LDD ldd)
if(LDD)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH ${LDD} ${zklock} OUTPUT_VARIABLE libraries)
  string(REGEX MATCH "libzkr\\.so[^\n]*" libzkr_line "${libraries}")
  string(FIND "${libzkr_line}" "=> ${WORK_DIR}/prefix/" beside)
  if(beside EQUAL -1)
    message(FATAL_ERROR "the installed zklock loads \"${libzkr_line}\", not the libzkr installed beside it in ${WORK_DIR}/prefix")
  endif()
endif()
message(STATUS "installed ${version}")

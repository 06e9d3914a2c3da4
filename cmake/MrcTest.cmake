# mrc_add_test(NAME <target> SOURCES <src...> LABELS <unit|bpf|netns|vm> [LIBS <lib...>]
#              [DISCOVER] [TIMEOUT <s>] [ARGS <args...>])
#
# Builds a GoogleTest executable and registers it with CTest under LABELS.
# DISCOVER registers every TEST() as its own CTest test (gtest_discover_tests),
# so a conformance behaviour shows up by name in `ctest -N`.
# Exit code 77 marks a test that skipped (feature missing on this kernel).
include(GoogleTest)
find_package(GTest REQUIRED)

function(mrc_add_test)
  cmake_parse_arguments(T "DISCOVER" "NAME;TIMEOUT" "SOURCES;LABELS;LIBS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  mrc_target_warnings(${T_NAME})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} mrc_test_support GTest::gtest GTest::gtest_main GTest::gmock Threads::Threads)
  if(T_DISCOVER)
    gtest_discover_tests(${T_NAME} EXTRA_ARGS ${T_ARGS}
      PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
      DISCOVERY_TIMEOUT 60)
  else()
    add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77)
  endif()
endfunction()

# mrc_add_script_test(NAME <name> COMMAND <cmd...> LABELS <label> [TIMEOUT <s>])
# A shell-driven test (netns, vm). Exit 77 = skipped.
function(mrc_add_script_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
    ENVIRONMENT "MRC_BUILD_DIR=${CMAKE_BINARY_DIR};MRC_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endfunction()

# mrc_bpf_object(<name> <source.bpf.c> [DEPENDS <headers...>])
#
# Compiles a BPF C source with clang (-target bpf -g -O2), generates a libbpf
# skeleton with `bpftool gen skeleton`, and provides:
#   <name>_skel  INTERFACE target: include dir of <name>.skel.h, links libbpf
#   ${CMAKE_BINARY_DIR}/bpf/<name>.bpf.o  the object (also embedded in the skeleton)
find_program(BPF_CLANG NAMES clang clang-14 REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)

execute_process(COMMAND ${BPF_CLANG} --version OUTPUT_VARIABLE _clang_ver)
string(REGEX MATCH "version ([0-9]+)" _m "${_clang_ver}")
if(CMAKE_MATCH_1 LESS 11)
  message(FATAL_ERROR "clang >= 11 is needed to build BPF programs (found ${CMAKE_MATCH_1})")
endif()

# __TARGET_ARCH_<arch> (bpf_tracing.h's PT_REGS_* and the like) names the
# architecture the programs will run on: the build host's, from
# CMAKE_SYSTEM_PROCESSOR (a cross build sets that to the target's).
string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" _bpf_proc)
if(_bpf_proc MATCHES "^(x86_64|amd64|i[3-6]86|x86)$")
  set(BPF_TARGET_ARCH x86)
elseif(_bpf_proc MATCHES "^(aarch64|arm64)")
  set(BPF_TARGET_ARCH arm64)
elseif(_bpf_proc MATCHES "^arm")
  set(BPF_TARGET_ARCH arm)
elseif(_bpf_proc MATCHES "^(ppc64|ppc64le|powerpc64|powerpc64le)$")
  set(BPF_TARGET_ARCH powerpc)
elseif(_bpf_proc MATCHES "^s390")
  set(BPF_TARGET_ARCH s390)
elseif(_bpf_proc MATCHES "^riscv")
  set(BPF_TARGET_ARCH riscv)
elseif(_bpf_proc MATCHES "^(loongarch64|loongarch)")
  set(BPF_TARGET_ARCH loongarch)
elseif(_bpf_proc MATCHES "^mips")
  set(BPF_TARGET_ARCH mips)
else()
  message(FATAL_ERROR "BPF programs: no __TARGET_ARCH_ for CMAKE_SYSTEM_PROCESSOR "
    "\"${CMAKE_SYSTEM_PROCESSOR}\" (cmake/BpfObject.cmake knows x86, arm64, arm, powerpc, "
    "s390, riscv, loongarch, mips)")
endif()
message(STATUS "BPF programs built for __TARGET_ARCH_${BPF_TARGET_ARCH}")

# Multiarch include dir for <asm/types.h> when compiling with -target bpf.
execute_process(COMMAND ${CMAKE_C_COMPILER} -print-multiarch OUTPUT_VARIABLE _multiarch OUTPUT_STRIP_TRAILING_WHITESPACE)
set(BPF_EXTRA_INCLUDES -I/usr/include/${_multiarch})

function(mrc_bpf_object name src)
  cmake_parse_arguments(B "" "" "DEPENDS" ${ARGN})
  set(out_dir ${CMAKE_BINARY_DIR}/bpf)
  set(obj ${out_dir}/${name}.bpf.o)
  set(skel ${out_dir}/${name}.skel.h)
  add_custom_command(OUTPUT ${obj}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${out_dir}
    COMMAND ${BPF_CLANG} -target bpf -g -O2 -Wall -Werror -D__TARGET_ARCH_${BPF_TARGET_ARCH}
            -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/bpf ${BPF_EXTRA_INCLUDES}
            -c ${CMAKE_CURRENT_SOURCE_DIR}/${src} -o ${obj}
    DEPENDS ${src} ${B_DEPENDS}
    COMMENT "BPF ${name}.bpf.o"
    VERBATIM)
  add_custom_command(OUTPUT ${skel}
    COMMAND ${BPFTOOL} gen skeleton ${obj} name ${name} > ${skel}
    DEPENDS ${obj}
    COMMENT "BPF skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(${name}_gen DEPENDS ${obj} ${skel})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_gen)
  target_include_directories(${name}_skel INTERFACE ${out_dir})
  target_link_libraries(${name}_skel INTERFACE PkgConfig::LIBBPF)
endfunction()

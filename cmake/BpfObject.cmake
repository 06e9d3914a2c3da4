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
    COMMAND ${BPF_CLANG} -target bpf -g -O2 -Wall -Werror -D__TARGET_ARCH_x86
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

# Warnings are errors for our C and C++ code (BPF objects set their own flags).
function(mrc_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror
    $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Wno-missing-field-initializers>)
endfunction()

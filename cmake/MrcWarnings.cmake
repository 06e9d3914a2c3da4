# Warnings are errors for our C and C++ code (BPF objects set their own flags).
# g++ 12 at -O3 (CMAKE_BUILD_TYPE=Release) reports false overlaps and bounds
# inside libstdc++'s std::string and std::vector::insert (GCC bugs 105329,
# 105651, 107138): those stay warnings there.
function(mrc_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror
    $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Wno-missing-field-initializers>
    "$<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_GREATER_EQUAL:$<CXX_COMPILER_VERSION>,12>>:-Wno-error=restrict;-Wno-error=array-bounds;-Wno-error=stringop-overflow;-Wno-error=stringop-overread>")
endfunction()

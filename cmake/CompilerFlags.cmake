# Compiler flags shared by every target. The baseline ISA is x86-64-v3 (AVX2+FMA); AVX-512 kernels are
# compiled per translation unit with target attributes and picked at run time by cpuid (backend/cpu).
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
endif()

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

add_library(deepinfer_flags INTERFACE)
# -ffp-contract=off: the reference computes with separate fp32 roundings (torch ops); letting the compiler
# fuse a*b+c into an FMA silently changes results at the last ulp. SIMD kernels use FMA explicitly.
target_compile_options(deepinfer_flags INTERFACE
  -march=x86-64-v3 -mtune=generic -ffp-contract=off -fno-math-errno
  -Wall -Wextra -Wno-unused-parameter)
if(DEEPINFER_WERROR)
  target_compile_options(deepinfer_flags INTERFACE -Werror)
  # GCC 12 at -O3 reports false -Wrestrict / -Wstringop-overflow inside libstdc++ for `"x" + std::string`
  # and small vector inserts (GCC bugs 105329, 105651); keep them as warnings there.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(deepinfer_flags INTERFACE -Wno-error=restrict -Wno-error=stringop-overflow)
  endif()
endif()
if(DEEPINFER_EMULATE_AVX512)
  # (and AVX-VNNI's ymm dot products, so that the AVX2 table's AvxVnni form runs on AVX2-only CPUs too:
  # src/backend/cpu/x86/avx2/emulated_vnni.h)
  target_compile_definitions(deepinfer_flags INTERFACE DEEPINFER_EMULATE_AVX512 DEEPINFER_EMULATE_AMX
                                                       DEEPINFER_EMULATE_AVX_VNNI)
elseif(DEEPINFER_EMULATE_AMX)
  target_compile_definitions(deepinfer_flags INTERFACE DEEPINFER_EMULATE_AMX)
endif()
if(DEEPINFER_SANITIZE)
  target_compile_options(deepinfer_flags INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                                                   -fno-sanitize-recover=undefined)
  target_link_options(deepinfer_flags INTERFACE -fsanitize=address,undefined)
endif()
if(DEEPINFER_SANITIZE_THREAD)
  if(DEEPINFER_SANITIZE)
    message(FATAL_ERROR "DEEPINFER_SANITIZE_THREAD and DEEPINFER_SANITIZE cannot be combined (TSan and ASan)")
  endif()
  target_compile_options(deepinfer_flags INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(deepinfer_flags INTERFACE -fsanitize=thread)
endif()
target_include_directories(deepinfer_flags INTERFACE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)

# deepinfer_library(<folder-name> SOURCES ... DEPS ...): one static library per src/ folder.
function(deepinfer_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PUBLIC_DEPS" ${ARGN})
  add_library(deepinfer_${name} STATIC ${ARG_SOURCES})
  target_link_libraries(deepinfer_${name} PUBLIC deepinfer_flags ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_DEPS})
endfunction()

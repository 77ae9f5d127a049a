# cmake/jllmDeps.cmake — the libraries libjetson_llm_core.a links (PCRE2, utf8proc, xxHash) as
# targets jllm::pcre2, jllm::utf8proc, jllm::xxhash: used by this build (cmake/deps.cmake) and
# installed beside jllmConfig.cmake, so find_package(jllm) finds them the same way.
# Locates a library through pkg-config, falling back to a plain header/library search (the GPU
# test machine unpacks .debs whose .pc files carry the original prefix).
find_package(PkgConfig QUIET)
if(NOT JLLM_LIB_ARCH)
  set(JLLM_LIB_ARCH "${CMAKE_LIBRARY_ARCHITECTURE}")
  if(NOT JLLM_LIB_ARCH)
    set(JLLM_LIB_ARCH "${CMAKE_SYSTEM_PROCESSOR}-linux-gnu")
  endif()
endif()

function(jllm_find_pkg target pcname header libname)
  if(TARGET jllm::${target})
    return()
  endif()
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(${target}_PC QUIET ${pcname})
  endif()
  find_path(${target}_INCLUDE ${header} HINTS ${${target}_PC_INCLUDE_DIRS}
            PATHS ${JLLM_DEPS_PREFIX}/usr/include)
  find_library(${target}_LIB NAMES ${libname} HINTS ${${target}_PC_LIBRARY_DIRS}
               PATHS ${JLLM_DEPS_PREFIX}/usr/lib/${JLLM_LIB_ARCH})
  if(NOT ${target}_INCLUDE OR NOT ${target}_LIB)
    message(FATAL_ERROR "${pcname} not found (install it with scripts/setup.sh, or its -dev package)")
  endif()
  add_library(jllm::${target} INTERFACE IMPORTED GLOBAL)
  target_include_directories(jllm::${target} INTERFACE ${${target}_INCLUDE})
  target_link_libraries(jllm::${target} INTERFACE ${${target}_LIB})
endfunction()

jllm_find_pkg(pcre2 libpcre2-8 pcre2.h pcre2-8)
jllm_find_pkg(utf8proc libutf8proc utf8proc.h utf8proc)
jllm_find_pkg(xxhash libxxhash xxhash.h xxhash)

# Dependencies, all from Debian/Ubuntu packages (scripts/setup.sh installs them). Nothing is
# downloaded at configure time. JLLM_DEPS_PREFIX adds a prefix (e.g. .debs unpacked with dpkg -x).
find_package(Threads REQUIRED)
# pkg-config is optional: jllm_find_pkg falls back to a plain header/library search (the GPU
# test machine may lack pkg-config).
find_package(PkgConfig QUIET)

# Multiarch library folder of Debian/Ubuntu packages (x86_64-linux-gnu, aarch64-linux-gnu).
set(JLLM_LIB_ARCH "${CMAKE_LIBRARY_ARCHITECTURE}")
if(NOT JLLM_LIB_ARCH)
  set(JLLM_LIB_ARCH "${CMAKE_SYSTEM_PROCESSOR}-linux-gnu")
endif()

if(JLLM_DEPS_PREFIX)
  get_filename_component(JLLM_DEPS_PREFIX "${JLLM_DEPS_PREFIX}" ABSOLUTE)
  list(PREPEND CMAKE_PREFIX_PATH ${JLLM_DEPS_PREFIX}/usr ${JLLM_DEPS_PREFIX}/usr/share/cmake
       ${JLLM_DEPS_PREFIX}/usr/lib/${JLLM_LIB_ARCH}/cmake)
  set(ENV{PKG_CONFIG_PATH} "${JLLM_DEPS_PREFIX}/usr/lib/${JLLM_LIB_ARCH}/pkgconfig:${JLLM_DEPS_PREFIX}/usr/share/pkgconfig:$ENV{PKG_CONFIG_PATH}")
  set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
endif()

find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)

# Locates a library through pkg-config, falling back to a plain header/library search (the
# GPU test machine unpacks .debs whose .pc files carry the original prefix).
function(jllm_find_pkg target pcname header libname)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(${target}_PC QUIET ${pcname})
  endif()
  find_path(${target}_INCLUDE ${header} HINTS ${${target}_PC_INCLUDE_DIRS}
            PATHS ${JLLM_DEPS_PREFIX}/usr/include)
  find_library(${target}_LIB NAMES ${libname} HINTS ${${target}_PC_LIBRARY_DIRS}
               PATHS ${JLLM_DEPS_PREFIX}/usr/lib/${JLLM_LIB_ARCH})
  if(NOT ${target}_INCLUDE OR NOT ${target}_LIB)
    message(FATAL_ERROR "${pcname} not found (install it with scripts/setup.sh)")
  endif()
  add_library(jllm::${target} INTERFACE IMPORTED GLOBAL)
  target_include_directories(jllm::${target} INTERFACE ${${target}_INCLUDE})
  target_link_libraries(jllm::${target} INTERFACE ${${target}_LIB})
endfunction()

jllm_find_pkg(pcre2 libpcre2-8 pcre2.h pcre2-8)
jllm_find_pkg(utf8proc libutf8proc utf8proc.h utf8proc)
jllm_find_pkg(xxhash libxxhash xxhash.h xxhash)

add_library(jllm_deps INTERFACE)
target_compile_definitions(jllm_deps INTERFACE PCRE2_CODE_UNIT_WIDTH=8)
target_link_libraries(jllm_deps INTERFACE nlohmann_json::nlohmann_json CLI11::CLI11
                      jllm::pcre2 jllm::utf8proc jllm::xxhash)

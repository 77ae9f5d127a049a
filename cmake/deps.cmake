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

include(${CMAKE_CURRENT_LIST_DIR}/jllmDeps.cmake)

add_library(jllm_deps INTERFACE)
target_compile_definitions(jllm_deps INTERFACE PCRE2_CODE_UNIT_WIDTH=8)
# nlohmann_json and CLI11 are header-only and needed to build the library and the programs, not
# by a program that links the installed library.
target_link_libraries(jllm_deps INTERFACE $<BUILD_INTERFACE:nlohmann_json::nlohmann_json>
                      $<BUILD_INTERFACE:CLI11::CLI11> jllm::pcre2 jllm::utf8proc jllm::xxhash)

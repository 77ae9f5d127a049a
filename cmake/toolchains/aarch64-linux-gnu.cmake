# cmake/toolchains/aarch64-linux-gnu.cmake — cross-build for 64-bit Arm Linux (the Jetson's
# Ubuntu) on an x86_64 Debian/Ubuntu host with the distribution's cross compiler
# (g++-aarch64-linux-gnu) and the target's -dev packages installed multiarch (`dpkg
# --add-architecture arm64`, then e.g. libpcre2-dev:arm64). Tests run under qemu-user.
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
#         -DJLLM_CUDA=OFF -DJLLM_BUILD_SERVER=OFF
# scripts/cross_test.sh does all of it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Multiarch: headers are shared under /usr/include, libraries under /usr/lib/aarch64-linux-gnu.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# Test binaries (and gtest_discover_tests' listing) run through qemu-user; -L finds the dynamic
# loader and libraries of the cross toolchain.
find_program(JLLM_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(JLLM_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${JLLM_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()

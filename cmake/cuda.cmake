# CUDA backend: optional, auto-detected. Only src/backend/cuda/ holds CUDA code; the registering
# translation unit sees JLLM_CUDA=1.
set(JLLM_HAVE_CUDA OFF)
if(NOT JLLM_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(JLLM_HAVE_CUDA ON)
  elseif(JLLM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "JLLM_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
if(JLLM_HAVE_CUDA)
  set(CMAKE_CUDA_ARCHITECTURES ${JLLM_CUDA_ARCHS})
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
message(STATUS "jllm: CUDA backend ${JLLM_HAVE_CUDA}")

function(jllm_add_cuda_backend core)
  file(GLOB JLLM_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu
       ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cpp)
  if(JLLM_HAVE_CUDA AND JLLM_CUDA_SOURCES)
    add_library(jetson_llm_cuda OBJECT ${JLLM_CUDA_SOURCES})
    target_include_directories(jetson_llm_cuda PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include
                               ${CMAKE_BINARY_DIR}/generated)
    target_compile_options(jetson_llm_cuda PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr -lineinfo>
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
    target_link_libraries(jetson_llm_cuda PUBLIC CUDA::cudart_static)
    target_sources(${core} PRIVATE $<TARGET_OBJECTS:jetson_llm_cuda>)
    target_link_libraries(${core} PUBLIC CUDA::cudart_static)
    target_compile_definitions(${core} PUBLIC JLLM_CUDA=1)
  endif()
endfunction()

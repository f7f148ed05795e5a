# The CUDA backend: -DFRUGAL_CUDA=AUTO|ON|OFF (default AUTO: on where nvcc,
# cuDNN 9 and cuBLAS are found; ON fails the configure if one is missing).
# The backend (src/backend/cuda, src/ops/cuda, src/distributed/nccl) is its own object
# library, frugal_cuda, whose objects go into libfrugal; without it
# src/backend/no_cuda and src/distributed/nccl/no_cuda.cc give the same entry
# points, which report that frugal was built without CUDA. Only sm_90
# (H100/H200) is compiled by default, to keep CI short; pass
# -DCMAKE_CUDA_ARCHITECTURES="80;90" for more.
set(FRUGAL_CUDA AUTO CACHE STRING "build the CUDA backend: AUTO, ON or OFF")
set_property(CACHE FRUGAL_CUDA PROPERTY STRINGS AUTO ON OFF)
set(FRUGAL_TSAN_NOTE "")
if(FRUGAL_TSAN)
  # The TSan build checks the CPU engine; CUDA's runtime is not instrumented.
  set(FRUGAL_CUDA OFF)
  set(FRUGAL_TSAN_NOTE ", as in every ThreadSanitizer build")
endif()

set(FRUGAL_WITH_CUDA OFF)
if(NOT FRUGAL_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  find_path(CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/include /usr/local/cuda/include)
  find_library(CUDNN_LIB cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/local/lib)
  find_path(NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/include /usr/local/cuda/include)
  find_library(NCCL_LIB nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/local/lib)
  set(missing "")
  if(NOT CMAKE_CUDA_COMPILER)
    list(APPEND missing "nvcc")
  endif()
  if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cublas)
    list(APPEND missing "the CUDA toolkit (cudart, cuBLAS)")
  endif()
  if(NOT CUDNN_INCLUDE OR NOT CUDNN_LIB)
    list(APPEND missing "cuDNN 9 (cudnn.h, libcudnn)")
  endif()
  if(missing STREQUAL "")
    set(FRUGAL_WITH_CUDA ON)
  elseif(FRUGAL_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FRUGAL_CUDA=ON but not found: ${missing} (install the CUDA toolkit and cuDNN, "
                        "or configure with -DFRUGAL_CUDA=OFF)")
  else()
    message(STATUS "CUDA backend off: not found: ${missing}")
  endif()
endif()

if(FRUGAL_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  file(GLOB FRUGAL_CUDA_SRCS CONFIGURE_DEPENDS src/backend/cuda/*.cc src/backend/cuda/*.cu src/ops/cuda/*.cu
     src/distributed/nccl/nccl_communicator.cc)
  add_library(frugal_cuda OBJECT ${FRUGAL_CUDA_SRCS})
  target_include_directories(frugal_cuda PRIVATE include src ${CMAKE_CURRENT_BINARY_DIR} ${CUDNN_INCLUDE})
  target_link_libraries(frugal_cuda PRIVATE CUDA::cudart glog::glog gflags)
  target_compile_definitions(frugal_cuda PRIVATE FRUGAL_WITH_CUDA=1)
  target_compile_options(frugal_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr --extended-lambda -Xcompiler=-Wall,-Wno-unknown-pragmas>)
  # cuBLAS is opened on first use (backend/cuda/cuda_util.h, Cublas), not linked.
  set(FRUGAL_CUDA_LIBS CUDA::cudart ${CUDNN_LIB})
  if(NCCL_INCLUDE AND NCCL_LIB)
    target_include_directories(frugal_cuda PRIVATE ${NCCL_INCLUDE})
    target_compile_definitions(frugal_cuda PRIVATE FRUGAL_WITH_NCCL=1)
    list(APPEND FRUGAL_CUDA_LIBS ${NCCL_LIB})
  endif()
  target_sources(frugal PRIVATE $<TARGET_OBJECTS:frugal_cuda>)
  # frugal was made before CUDA was enabled: give it the architectures too.
  set_target_properties(frugal frugal_cuda PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
  target_link_libraries(frugal PUBLIC ${FRUGAL_CUDA_LIBS})
  target_compile_definitions(frugal PUBLIC FRUGAL_WITH_CUDA=1)
  message(STATUS "CUDA backend on: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}, "
                 "cuDNN ${CUDNN_LIB}, NCCL ${NCCL_LIB}")
else()
  if(FRUGAL_CUDA STREQUAL "OFF")
    message(STATUS "CUDA backend off (FRUGAL_CUDA=OFF${FRUGAL_TSAN_NOTE})")
  endif()
  target_sources(frugal PRIVATE src/backend/no_cuda/no_cuda.cc src/distributed/nccl/no_cuda.cc)
endif()
set_property(SOURCE src/ops/registry.cc APPEND PROPERTY OBJECT_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/ops/cuda/cuda_op_list.def)

# FindCudaHeaders: the CUDA toolkit's headers (cuda.h, nvrtc.h), used at build time only. libcuda and NVRTC
# are opened at run time with dlopen (src/loader.c) and never linked, so the module loads without a GPU.
#
# Looks in CUDADEV_CUDA_INCLUDE_DIR (cache), $CUDA_HOME/include, $CUDA_PATH/include, /usr/local/cuda/include,
# /usr/include, and stops with a message listing those places. Defines
#   CudaHeaders::headers   interface target (a SYSTEM include, so cuda.h's own style raises no warnings)
#   CudaHeaders_CUDA_H     the path of cuda.h (the attribute tables are generated from it)
set(_cuda_places "")
foreach(_var CUDA_HOME CUDA_PATH)
  if(DEFINED ENV{${_var}} AND NOT "$ENV{${_var}}" STREQUAL "")
    list(APPEND _cuda_places "$ENV{${_var}}/include")
  endif()
endforeach()
list(APPEND _cuda_places /usr/local/cuda/include /usr/include)

find_path(CUDADEV_CUDA_INCLUDE_DIR cuda.h PATHS ${_cuda_places} NO_DEFAULT_PATH
  DOC "directory holding the CUDA toolkit's cuda.h")

if(NOT CUDADEV_CUDA_INCLUDE_DIR)
  list(JOIN _cuda_places "\n  " _cuda_list)
  message(FATAL_ERROR "cudadev needs the CUDA toolkit's headers (cuda.h) to build; it looked in:\n"
    "  ${_cuda_list}\n"
    "Set CUDA_HOME to the toolkit, or pass -DCUDADEV_CUDA_INCLUDE_DIR=<dir with cuda.h> "
    "(Debian: apt-get install nvidia-cuda-dev from non-free). No GPU or driver is needed to build.")
endif()

set(CudaHeaders_CUDA_H "${CUDADEV_CUDA_INCLUDE_DIR}/cuda.h")
set(CudaHeaders_FOUND TRUE)
if(NOT TARGET CudaHeaders::headers)
  add_library(CudaHeaders::headers INTERFACE IMPORTED)
  # /usr/include is already searched; naming it with -isystem would reorder the system directories.
  if(NOT CUDADEV_CUDA_INCLUDE_DIR STREQUAL "/usr/include")
    set_target_properties(CudaHeaders::headers PROPERTIES
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${CUDADEV_CUDA_INCLUDE_DIR}"
      INTERFACE_INCLUDE_DIRECTORIES "${CUDADEV_CUDA_INCLUDE_DIR}")
  endif()
endif()
message(STATUS "CUDA headers: ${CUDADEV_CUDA_INCLUDE_DIR} (build time only; libcuda/NVRTC are dlopen'd)")

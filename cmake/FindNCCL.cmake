# FindNCCL: NCCL wherever the machine keeps it (NCCL_ROOT, NCCL_HOME, the CUDA
# toolkit, /usr, or pip's nvidia-nccl-cu* wheel); see TandemFindNvidiaLibrary.cmake.
# Defines NCCL_FOUND, NCCL_VERSION, NCCL_INCLUDE_DIR, NCCL_LIBRARY and NCCL::nccl.
include("${CMAKE_CURRENT_LIST_DIR}/TandemFindNvidiaLibrary.cmake")
tandem_find_nvidia_library(NCCL NCCL::nccl nccl.h nccl.h nccl libnccl.so libnccl.so.2)

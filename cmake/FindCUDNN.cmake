# FindCUDNN: cuDNN wherever the machine keeps it (CUDNN_ROOT, CUDNN_HOME, the CUDA
# toolkit, /usr, or pip's nvidia-cudnn-cu* wheel); see TandemFindNvidiaLibrary.cmake.
# Defines CUDNN_FOUND, CUDNN_VERSION, CUDNN_INCLUDE_DIR, CUDNN_LIBRARY and CUDNN::cudnn.
include("${CMAKE_CURRENT_LIST_DIR}/TandemFindNvidiaLibrary.cmake")
tandem_find_nvidia_library(CUDNN CUDNN::cudnn cudnn.h cudnn_version.h cudnn libcudnn.so libcudnn.so.9)

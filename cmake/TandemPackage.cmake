# Tandem as a CMake package, the way LevelDB does it: every library as an
# exported target (Tandem::core, Tandem::kernels, ..., and Tandem::tandem for
# all of them), the public headers under include/tandem/ in the source tree's
# layout (so `#include "ddp/distributed_data_parallel.h"` works the same
# inside and outside), TandemConfig.cmake with the find_dependency calls the
# targets need, and a version file. The kernels' CPU and CUDA back-ends and
# the CUDA and NCCL helpers stay internal: no public header includes them.
include(CMakePackageConfigHelpers)

set(TANDEM_LIBRARIES tandem_core tandem_kernels tandem_comm tandem_data tandem_nn tandem_optim tandem_ddp
    tandem_profile tandem_report tandem_train)
foreach(lib IN LISTS TANDEM_LIBRARIES)
  string(REPLACE "tandem_" "" short "${lib}")
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${short})
  add_library(Tandem::${short} ALIAS ${lib})  # the same names in a parent project's build
endforeach()
set_target_properties(tandem_flags PROPERTIES EXPORT_NAME flags)
add_library(tandem_all INTERFACE)
target_link_libraries(tandem_all INTERFACE ${TANDEM_LIBRARIES})
set_target_properties(tandem_all PROPERTIES EXPORT_NAME tandem)
add_library(Tandem::tandem ALIAS tandem_all)

if(NOT TANDEM_INSTALL)
  return()
endif()

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Tandem)
install(TARGETS tandem_flags tandem_all ${TANDEM_LIBRARIES} EXPORT TandemTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS tandem RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})  # `tandem launch` starts a user's ranks
install(DIRECTORY core kernels nn optim comm ddp data profile report train
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tandem
        FILES_MATCHING PATTERN "*.h"
        PATTERN "cpu" EXCLUDE PATTERN "cuda" EXCLUDE
        PATTERN "cuda_check.h" EXCLUDE PATTERN "cuda_staging.h" EXCLUDE PATTERN "nccl_check.h" EXCLUDE)
install(EXPORT TandemTargets NAMESPACE Tandem:: DESTINATION ${config_dir})

configure_package_config_file(cmake/TandemConfig.cmake.in ${PROJECT_BINARY_DIR}/TandemConfig.cmake
                              INSTALL_DESTINATION ${config_dir})
# 0.x: a new minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/TandemConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/TandemConfig.cmake ${PROJECT_BINARY_DIR}/TandemConfigVersion.cmake
              cmake/FindNCCL.cmake cmake/TandemFindNvidiaLibrary.cmake
        DESTINATION ${config_dir})

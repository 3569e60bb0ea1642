# tandem_find_nvidia_library(): the search behind FindNCCL.cmake and FindCUDNN.cmake.
#
# NVIDIA's libraries live in different places on different machines: a
# toolkit install (/usr/local/cuda), a distribution package (/usr), a module
# system's NCCL_HOME, or the Python wheels pip installs next to PyTorch
# (site-packages/nvidia/<name>/{include,lib}, holding only the versioned
# libfoo.so.N with no libfoo.so link). A header from one place and a library
# from another is a silent ABI mismatch, so candidates are whole roots, tried
# in order, and the first root with both the header and the library wins:
#   1. <PREFIX>_ROOT (CMake variable), then the environment's <PREFIX>_ROOT and <PREFIX>_HOME;
#   2. the CUDA toolkit (CUDAToolkit_LIBRARY_ROOT, the parent of CUDAToolkit_INCLUDE_DIRS);
#   3. /usr and /usr/local (TANDEM_NVIDIA_SYSTEM_ROOTS, which may be set empty);
#   4. every entry of the Python interpreter's sys.path (so PYTHONPATH and
#      virtual environments count) that has nvidia/<WHEEL>/.
# Setting <PREFIX>_INCLUDE_DIR and <PREFIX>_LIBRARY skips the search.
#
# Sets <PREFIX>_FOUND, <PREFIX>_INCLUDE_DIR, <PREFIX>_LIBRARY, <PREFIX>_VERSION,
# <PREFIX>_SEARCHED (the roots tried, for messages) and the imported target
# <TARGET>.
include_guard(GLOBAL)
include(FindPackageHandleStandardArgs)

function(_tandem_python_wheel_roots wheel out)
  set(roots "")
  find_program(TANDEM_PYTHON3 NAMES python3 python)
  if(TANDEM_PYTHON3)
    execute_process(COMMAND "${TANDEM_PYTHON3}" -c "import sys; print(';'.join(p for p in sys.path if p))"
                    OUTPUT_VARIABLE paths OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
    if(rc EQUAL 0)
      foreach(p IN LISTS paths)
        if(IS_DIRECTORY "${p}/nvidia/${wheel}")
          list(APPEND roots "${p}/nvidia/${wheel}")
        endif()
      endforeach()
    endif()
  endif()
  set(${out} "${roots}" PARENT_SCOPE)
endfunction()

# tandem_find_nvidia_library(PREFIX TARGET HEADER VERSION_HEADER WHEEL LIBRARIES...)
function(tandem_find_nvidia_library prefix target header version_header wheel)
  set(names ${ARGN})
  set(roots "")
  foreach(r IN ITEMS "${${prefix}_ROOT}" "$ENV{${prefix}_ROOT}" "$ENV{${prefix}_HOME}")
    if(r)
      list(APPEND roots "${r}")
    endif()
  endforeach()
  if(CUDAToolkit_LIBRARY_ROOT)
    list(APPEND roots "${CUDAToolkit_LIBRARY_ROOT}")
  endif()
  foreach(inc IN LISTS CUDAToolkit_INCLUDE_DIRS)
    get_filename_component(r "${inc}" DIRECTORY)
    list(APPEND roots "${r}")
  endforeach()
  if(NOT DEFINED TANDEM_NVIDIA_SYSTEM_ROOTS)
    set(TANDEM_NVIDIA_SYSTEM_ROOTS /usr /usr/local)
  endif()
  list(APPEND roots ${TANDEM_NVIDIA_SYSTEM_ROOTS})
  _tandem_python_wheel_roots("${wheel}" wheel_roots)
  list(APPEND roots ${wheel_roots})
  list(REMOVE_DUPLICATES roots)

  set(include_dir "${${prefix}_INCLUDE_DIR}")
  set(library "${${prefix}_LIBRARY}")
  if(NOT (include_dir AND library))
    set(include_dir "")
    set(library "")
    foreach(root IN LISTS roots)
      set(lib "")
      foreach(libdir IN ITEMS lib64 lib lib/x86_64-linux-gnu lib/aarch64-linux-gnu)
        foreach(name IN LISTS names)
          if(NOT lib AND EXISTS "${root}/${libdir}/${name}")
            set(lib "${root}/${libdir}/${name}")
          endif()
        endforeach()
      endforeach()
      if(lib AND EXISTS "${root}/include/${header}")
        set(include_dir "${root}/include")
        set(library "${lib}")
        break()
      endif()
    endforeach()
  endif()

  set(version "")
  if(include_dir AND EXISTS "${include_dir}/${version_header}")
    file(STRINGS "${include_dir}/${version_header}" defines REGEX "^#define [A-Z]+_(MAJOR|MINOR|PATCH(LEVEL)?) +[0-9]+")
    foreach(part MAJOR MINOR PATCH)
      string(REGEX MATCH "_${part}[A-Z]* +([0-9]+)" m "${defines}")
      if(m)
        list(APPEND version "${CMAKE_MATCH_1}")
      endif()
    endforeach()
    list(JOIN version "." version)
  endif()

  list(JOIN roots ", " searched)
  list(JOIN names " or " names_text)
  set(${prefix}_SEARCHED "${searched}" PARENT_SCOPE)
  foreach(var INCLUDE_DIR LIBRARY VERSION)
    string(TOLOWER "${var}" local)
    set(${prefix}_${var} "${${local}}")  # for find_package_handle_standard_args below
    set(${prefix}_${var} "${${local}}" PARENT_SCOPE)
  endforeach()
  find_package_handle_standard_args(${prefix}
    REQUIRED_VARS ${prefix}_LIBRARY ${prefix}_INCLUDE_DIR
    VERSION_VAR ${prefix}_VERSION
    REASON_FAILURE_MESSAGE "no root with both include/${header} and a library named ${names_text} among: ${searched} (set ${prefix}_ROOT)")
  set(${prefix}_FOUND "${${prefix}_FOUND}" PARENT_SCOPE)
  if(${prefix}_FOUND AND NOT TARGET ${target})
    add_library(${target} SHARED IMPORTED GLOBAL)
    set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${library}"
                                               INTERFACE_INCLUDE_DIRECTORIES "${include_dir}")
  endif()
endfunction()

# The layers of the library (DESIGN.md, "Layout"): each is an object library that sees only its
# own headers, the headers of the layers below it and the public headers. The include path of a
# layer is a directory of symbolic links to exactly those source folders, so an upward include
# (say "core/context.h" from src/algorithms) does not compile. Only the layers that talk to MPI
# get MPI's include path, so <mpi.h> does not compile below src/core either.
#
# mpiar_layer(NAME name SOURCES files... [DEPS layers below...] [MPI])
function(mpiar_layer)
  cmake_parse_arguments(L "MPI" "NAME" "SOURCES;DEPS" ${ARGN})
  set(_dir "${PROJECT_BINARY_DIR}/layers/${L_NAME}")
  file(MAKE_DIRECTORY "${_dir}")
  foreach(_d ${L_DEPS} ${L_NAME})
    if(NOT EXISTS "${_dir}/${_d}")
      file(CREATE_LINK "${PROJECT_SOURCE_DIR}/src/${_d}" "${_dir}/${_d}" SYMBOLIC)
    endif()
  endforeach()
  add_library(mpiar_${L_NAME} OBJECT ${L_SOURCES})
  target_include_directories(mpiar_${L_NAME} PRIVATE "${_dir}" "${PROJECT_SOURCE_DIR}/include"
                                                     "${PROJECT_BINARY_DIR}/include")
  target_link_libraries(mpiar_${L_NAME} PRIVATE mpiar_flags)
  if(L_MPI)
    target_link_libraries(mpiar_${L_NAME} PRIVATE MPI::MPI_C)
  endif()
  set_property(GLOBAL APPEND PROPERTY MPIAR_LAYERS ${L_NAME})
  set_property(GLOBAL PROPERTY MPIAR_LAYER_DEPS_${L_NAME} "${L_DEPS}")
  set_property(GLOBAL PROPERTY MPIAR_LAYER_MPI_${L_NAME} ${L_MPI})
endfunction()

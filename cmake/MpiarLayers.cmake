# The layers of the library (DESIGN.md, "Layout"): each is an object library that sees only its
# own headers, the headers of the layers below it and the public headers. The include path of a
# layer is a directory of symbolic links to exactly those source folders, so an upward include
# (say "core/context.h" from src/algorithms) does not compile. Only the layers that talk to MPI
# get MPI's include path, so <mpi.h> does not compile below src/core either.
#
# A layer below may be seen only in part: ONLY names headers ("core/grequest.h"); a layer of DEPS
# that has headers among them is a directory of links to those headers alone, so that any other
# header of it does not compile. A layer of API is used through the public headers alone
# (include/mpiar.h): none of its headers is on the include path.
#
# The same holds at link level (tests/layers, `ctest -L layers`): an object file of a layer may
# reference a symbol of its own layer or of a layer of DEPS; of a layer seen in part, a public
# symbol (mpiar_x) or an internal one (mpiar__x) that the ONLY headers declare; of a layer of API,
# a public symbol only.
#
# mpiar_layer(NAME name SOURCES files... [DEPS layers below...] [ONLY headers...]
#             [API layers below...] [MPI])
function(mpiar_layer)
  cmake_parse_arguments(L "MPI" "NAME" "SOURCES;DEPS;ONLY;API" ${ARGN})
  set(_dir "${PROJECT_BINARY_DIR}/layers/${L_NAME}")
  file(MAKE_DIRECTORY "${_dir}")
  # Links of an older configuration to layers no longer seen go.
  file(GLOB _old LIST_DIRECTORIES true RELATIVE "${_dir}" "${_dir}/*")
  foreach(_o ${_old})
    if(NOT _o IN_LIST L_DEPS AND NOT _o STREQUAL L_NAME)
      if(IS_SYMLINK "${_dir}/${_o}")
        file(REMOVE "${_dir}/${_o}")
      else()
        file(REMOVE_RECURSE "${_dir}/${_o}")
      endif()
    endif()
  endforeach()
  foreach(_d ${L_DEPS} ${L_NAME})
    set(_only "")
    foreach(_h ${L_ONLY})
      if(_h MATCHES "^${_d}/[^/]+$")
        list(APPEND _only ${_h})
      endif()
    endforeach()
    if(_only)
      # A link to the whole folder (an older configuration) gives way to the headers' links.
      if(IS_SYMLINK "${_dir}/${_d}")
        file(REMOVE "${_dir}/${_d}")
      endif()
      file(MAKE_DIRECTORY "${_dir}/${_d}")
      file(GLOB _old RELATIVE "${_dir}" "${_dir}/${_d}/*")
      foreach(_h ${_old})
        if(NOT _h IN_LIST _only)
          file(REMOVE "${_dir}/${_h}")
        endif()
      endforeach()
      foreach(_h ${_only})
        if(NOT EXISTS "${PROJECT_SOURCE_DIR}/src/${_h}")
          message(FATAL_ERROR "mpiar_layer(${L_NAME}): ONLY names ${_h}, which does not exist")
        endif()
        if(NOT EXISTS "${_dir}/${_h}")
          file(CREATE_LINK "${PROJECT_SOURCE_DIR}/src/${_h}" "${_dir}/${_h}" SYMBOLIC)
        endif()
      endforeach()
    elseif(NOT IS_SYMLINK "${_dir}/${_d}")
      file(REMOVE_RECURSE "${_dir}/${_d}") # the headers' links of an older configuration
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
  set_property(GLOBAL PROPERTY MPIAR_LAYER_ONLY_${L_NAME} "${L_ONLY}")
  set_property(GLOBAL PROPERTY MPIAR_LAYER_API_${L_NAME} "${L_API}")
  set_property(GLOBAL PROPERTY MPIAR_LAYER_MPI_${L_NAME} ${L_MPI})
endfunction()

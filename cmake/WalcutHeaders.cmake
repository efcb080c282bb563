# Which headers of each walcut library other code may include.
#
#   walcut_headers(LIB [TARGET T]
#     [INSTALLED h...]   the library's API for programs outside walcut: installed
#                        under include/LIB/ (cmake/Install.cmake); any code may
#                        include them
#     [PUBLIC h...])     for the other walcut libraries that link against LIB,
#                        the CLI, the tests and the benches; not installed
#
# Every other header of LIB's directory is internal: only LIB's own sources
# include it, and, white-box, the tests of LIB (tests/LIB_*), bench/ and
# fuzz/. So a new header is internal until it is listed here. LIB is the
# directory; TARGET the CMake target built from it when the name differs.
#
# scripts/check-includes.cmake (the ctest test "build: include rules") reads
# the table walcut_write_include_rules() writes and fails on a file that
# includes another library's internal header, a library that includes a
# header of a library it does not link against, an installed header that
# includes a header that is not installed, a public header that includes an
# internal one, and an example that includes anything but installed headers.
function(walcut_headers lib)
  cmake_parse_arguments(PARSE_ARGV 1 H "" "TARGET" "INSTALLED;PUBLIC")
  if(NOT H_TARGET)
    set(H_TARGET ${lib})
  endif()
  file(GLOB all RELATIVE "${CMAKE_CURRENT_SOURCE_DIR}" CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*.h")
  set(lines "")
  foreach(h IN LISTS all)
    set(tier INTERNAL)
    if(h IN_LIST H_INSTALLED)
      set(tier INSTALLED)
    elseif(h IN_LIST H_PUBLIC)
      set(tier PUBLIC)
    endif()
    string(APPEND lines "${lib}/${h} ${tier}\n")
  endforeach()
  foreach(h IN LISTS H_INSTALLED H_PUBLIC)
    if(NOT h IN_LIST all)
      message(FATAL_ERROR "walcut_headers(${lib}): no header ${h} in ${CMAKE_CURRENT_SOURCE_DIR}")
    endif()
  endforeach()
  set_property(GLOBAL APPEND_STRING PROPERTY WALCUT_INCLUDE_RULES "${lines}")
  set_property(GLOBAL APPEND PROPERTY WALCUT_HEADER_LIBRARIES ${lib})
  set_property(GLOBAL PROPERTY WALCUT_TARGET_OF_${lib} ${H_TARGET})
  list(TRANSFORM H_INSTALLED PREPEND "${CMAKE_CURRENT_SOURCE_DIR}/")
  set_property(GLOBAL PROPERTY WALCUT_INSTALLED_HEADERS_${lib} ${H_INSTALLED})
endfunction()

# Writes ${PROJECT_BINARY_DIR}/include-rules.txt once every library is
# defined: "<lib>/<header> <TIER>" per header, then "library <lib> <deps>"
# with the walcut libraries <lib> links against, directly or not.
function(walcut_write_include_rules)
  get_property(rules GLOBAL PROPERTY WALCUT_INCLUDE_RULES)
  get_property(libs GLOBAL PROPERTY WALCUT_HEADER_LIBRARIES)
  set(targets "")
  foreach(lib IN LISTS libs)
    get_property(t GLOBAL PROPERTY WALCUT_TARGET_OF_${lib})
    list(APPEND targets ${t})
  endforeach()
  foreach(lib IN LISTS libs)
    set(deps "")
    get_property(todo GLOBAL PROPERTY WALCUT_TARGET_OF_${lib})
    while(todo)
      list(POP_FRONT todo t)
      get_target_property(direct ${t} LINK_LIBRARIES)
      foreach(d IN LISTS direct)
        if(d IN_LIST targets AND NOT d IN_LIST deps)
          list(APPEND deps ${d})
          list(APPEND todo ${d})
        endif()
      endforeach()
    endwhile()
    list(JOIN deps "," deps)
    string(APPEND rules "library ${lib} ${deps}\n")
  endforeach()
  file(WRITE "${PROJECT_BINARY_DIR}/include-rules.txt" "${rules}")
endfunction()

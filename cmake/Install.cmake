# `cmake --install build [--prefix P]` (default prefix /usr/local; the .deb
# uses /usr). What goes where (GNUInstallDirs; README.md, "Install"):
#
#   bin/walcut                                       the tool            component walcut
#   share/man/man1/walcut.1.gz, walcut-<cmd>.1.gz    its manual          component walcut
#   share/bash-completion/completions/walcut         bash completion     component walcut
#   share/zsh/vendor-completions/_walcut             zsh completion      component walcut
#     (share/zsh/site-functions/_walcut when the prefix is not /usr)
#   lib/libwalfmt.so.1, .so.<version>                the shared library  component libwalfmt
#   lib/libwalfmt.so, lib/libwalfmt.a                link-time files     component libwalfmt-dev
#   include/walfmt/*.h                               the installed API   component libwalfmt-dev
#   lib/cmake/walcut/walcutConfig*.cmake, ...        find_package(walcut) component libwalfmt-dev
#   lib/pkgconfig/walfmt.pc                          pkg-config walfmt   component libwalfmt-dev
#   share/doc/walcut/FORMAT.md                       the bytes, which the headers cite  component libwalfmt-dev
include(CMakePackageConfigHelpers)

install(TARGETS walcut RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT walcut)

# The manual pages (docs/man/*.1), gzip-compressed (-n: no name or time
# stamp, so the bytes do not depend on when they were built).
file(GLOB WALCUT_MAN_PAGES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/man/*.1)
set(WALCUT_MAN_GZ "")
foreach(page IN LISTS WALCUT_MAN_PAGES)
  get_filename_component(name ${page} NAME)
  set(gz ${PROJECT_BINARY_DIR}/man/${name}.gz)
  add_custom_command(OUTPUT ${gz}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
    COMMAND gzip -9n -c ${page} > ${gz}
    DEPENDS ${page} VERBATIM)
  list(APPEND WALCUT_MAN_GZ ${gz})
endforeach()
add_custom_target(walcut_man ALL DEPENDS ${WALCUT_MAN_GZ})
install(FILES ${WALCUT_MAN_GZ} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT walcut)

install(FILES ${PROJECT_SOURCE_DIR}/completions/walcut.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME walcut COMPONENT walcut)
# zsh looks in vendor-completions for the system's packages (Debian's zsh),
# in $prefix/share/zsh/site-functions for the others: the directory is chosen
# when installing, by the prefix installed to.
install(CODE "
  if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
    set(WALCUT_ZSH_DIR \"${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions\")
  else()
    set(WALCUT_ZSH_DIR \"${CMAKE_INSTALL_DATADIR}/zsh/site-functions\")
  endif()" COMPONENT walcut)
install(FILES ${PROJECT_SOURCE_DIR}/completions/_walcut DESTINATION "\${WALCUT_ZSH_DIR}" COMPONENT walcut)

# The library: static and shared, the installed headers, the CMake package
# (walcut::walfmt is the shared library, walcut::walfmt_static the static
# one) and walfmt.pc.
set_target_properties(walfmt PROPERTIES EXPORT_NAME walfmt_static)
set_target_properties(walfmt_shared PROPERTIES EXPORT_NAME walfmt)
install(TARGETS walfmt_shared EXPORT walcutTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT libwalfmt NAMELINK_COMPONENT libwalfmt-dev)
install(TARGETS walfmt EXPORT walcutTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT libwalfmt-dev)
get_property(WALFMT_INSTALLED_HEADERS GLOBAL PROPERTY WALCUT_INSTALLED_HEADERS_walfmt)
install(FILES ${WALFMT_INSTALLED_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/walfmt COMPONENT libwalfmt-dev)

set(WALCUT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/walcut)
install(EXPORT walcutTargets NAMESPACE walcut:: DESTINATION ${WALCUT_CMAKE_DIR} COMPONENT libwalfmt-dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/walcutConfig.cmake.in
  ${PROJECT_BINARY_DIR}/walcutConfig.cmake INSTALL_DESTINATION ${WALCUT_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/walcutConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/walcutConfig.cmake ${PROJECT_BINARY_DIR}/walcutConfigVersion.cmake
        DESTINATION ${WALCUT_CMAKE_DIR} COMPONENT libwalfmt-dev)

# The format the headers implement (they cite it as FORMAT.md).
install(FILES ${PROJECT_SOURCE_DIR}/walfmt/FORMAT.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT libwalfmt-dev)

# walfmt.pc, relocatable: the prefix is found from the file's own place.
file(RELATIVE_PATH WALFMT_PC_TO_PREFIX /P/${CMAKE_INSTALL_LIBDIR}/pkgconfig /P)
string(REGEX REPLACE "/$" "" WALFMT_PC_TO_PREFIX "${WALFMT_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/walfmt.pc.in ${PROJECT_BINARY_DIR}/walfmt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/walfmt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT libwalfmt-dev)

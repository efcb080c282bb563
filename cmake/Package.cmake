# `cpack -G DEB` in the build directory (or `cpack --config build/CPackConfig.cmake`)
# makes three Debian packages, split as Debian splits a tool and its library:
#
#   walcut_<v>_<arch>.deb         bin/walcut, its manual pages, bash and zsh completion
#   libwalfmt1_<v>_<arch>.deb     libwalfmt.so.1 (the shared library)
#   libwalfmt-dev_<v>_<arch>.deb  headers, libwalfmt.a, libwalfmt.so, CMake package, walfmt.pc
#
# The runtime dependencies of walcut and libwalfmt1 are computed by
# dpkg-shlibdeps from the binaries (libc6, libstdc++6, libfmt9, libzstd1,
# libxxhash0, libssl3 on Debian 12), plus libcurl4 for walcut, which loads
# libcurl.so.4 with dlopen for S3 (dpkg-shlibdeps cannot see that); libwalfmt-dev depends on libwalfmt1 of the same
# version and on the -dev packages its static library and CMake package need.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME walcut)
set(CPACK_PACKAGE_VENDOR "walcut")
# The Maintainer field: give yours when the packages leave this machine.
set(WALCUT_PACKAGE_CONTACT "walcut developers <walcut@localhost>" CACHE STRING
    "Maintainer of the Debian packages (Name <address>)")
set(CPACK_PACKAGE_CONTACT "${WALCUT_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL walcut libwalfmt libwalfmt-dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(CPACK_DEBIAN_WALCUT_PACKAGE_NAME walcut)
set(CPACK_DEBIAN_WALCUT_PACKAGE_DEPENDS "libcurl4")
set(CPACK_DEBIAN_WALCUT_DESCRIPTION "inspect, cut, restore and validate the write-ahead logs of a distributed KV store
walcut verifies WAL segments, dumps their records, lists the consistent cuts of a
cluster, restores every node to a cut and checks all of it for CI.")

set(CPACK_DEBIAN_LIBWALFMT_PACKAGE_NAME libwalfmt1)
set(CPACK_DEBIAN_LIBWALFMT_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # for libwalfmt1, the one with a shared library
set(CPACK_DEBIAN_LIBWALFMT_DESCRIPTION "walcut WAL format library
Reads and writes the segments, records and snapshot files of walcut's WAL format.")

set(CPACK_DEBIAN_LIBWALFMT-DEV_PACKAGE_NAME libwalfmt-dev)
set(CPACK_DEBIAN_LIBWALFMT-DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_LIBWALFMT-DEV_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_LIBWALFMT-DEV_PACKAGE_DEPENDS "libfmt-dev, libzstd-dev")
set(CPACK_COMPONENT_LIBWALFMT-DEV_DEPENDS libwalfmt)
set(CPACK_DEBIAN_LIBWALFMT-DEV_DESCRIPTION "walcut WAL format library: development files
Headers, the static library, the CMake package (find_package(walcut)) and walfmt.pc.")

include(CPack)

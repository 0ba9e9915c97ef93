# CPack: `cpack -G DEB` in the build directory makes four packages, split in Debian's manner:
#   gdrstored          the daemon, gdrctl, the systemd unit, the config (a conffile), the docs;
#   libgdrclient1      libgdrclient.so.1 (the C ABI and the C++ API);
#   libgdrclient-dev   headers, the .so link, gdrstore.pc, the CMake package, the .proto;
#   python3-gdrstore   the Python package (pure Python over libgdrclient1).
# Installed under /usr. Library dependencies come from dpkg-shlibdeps on the binaries.
set(CPACK_PACKAGE_NAME gdrstored)
set(CPACK_PACKAGE_VENDOR "gdrstored")
set(CPACK_PACKAGE_CONTACT "gdrstored maintainers <gdrstored@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "one-sided RDMA storage-simulation daemon (gdrstored) and its CLI (gdrctl)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon library dev python)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(_gdr_lib_dep "libgdrclient1 (= ${PROJECT_VERSION})")

set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME gdrstored)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION net)
set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "systemd")
set(CPACK_DEBIAN_DAEMON_PACKAGE_RECOMMENDS "rdma-core, ibverbs-providers")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/deploy/debian/conffiles;${PROJECT_SOURCE_DIR}/deploy/debian/postinst;${PROJECT_SOURCE_DIR}/deploy/debian/prerm;${PROJECT_SOURCE_DIR}/deploy/debian/postrm")
set(CPACK_COMPONENT_DAEMON_DESCRIPTION
    "one-sided RDMA storage-simulation daemon (gdrstored) and its CLI (gdrctl)")

set(CPACK_DEBIAN_LIBRARY_PACKAGE_NAME libgdrclient1)
set(CPACK_DEBIAN_LIBRARY_PACKAGE_SECTION libs)
# A shlibs file and the ldconfig trigger, as a Debian shared-library package carries.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_COMPONENT_LIBRARY_DESCRIPTION
    "gdrstored client library: C ABI and C++ API for one-sided transfers to your memory")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libgdrclient-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "${_gdr_lib_dep}, libgrpc++-dev, libprotobuf-dev, libabsl-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "gdrstored client library: headers, pkg-config file, CMake package and the .proto")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-gdrstore)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3, ${_gdr_lib_dep}")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION
    "gdrstored client for Python: tensors and arrays moved in place (over libgdrclient1)")
include(CPack)

# CPack: `cpack -G DEB` in the build directory makes gdrstored_<version>_<arch>.deb with the
# daemon, gdrctl, the systemd unit, the config (a conffile) and the docs, installed under /usr.
# Dependencies come from dpkg-shlibdeps on the binaries.
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
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "rdma-core, ibverbs-providers")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/deploy/debian/conffiles;${PROJECT_SOURCE_DIR}/deploy/debian/postinst;${PROJECT_SOURCE_DIR}/deploy/debian/prerm;${PROJECT_SOURCE_DIR}/deploy/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

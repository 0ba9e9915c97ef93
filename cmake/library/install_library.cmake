# Installing libgdrclient for callers outside this tree: the shared library, its headers (with
# the generated gdrstore.v1 headers the C++ API includes), gdrstore.pc for pkg-config and a CMake
# package for find_package(gdrstore CONFIG). Relocatable: both find the prefix from where they
# are installed.
include(CMakePackageConfigHelpers)
install(TARGETS gdrclient_shared EXPORT gdrstoreTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library NAMELINK_COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set_target_properties(gdrclient_shared PROPERTIES EXPORT_NAME gdrclient)
install(EXPORT gdrstoreTargets NAMESPACE gdrstore::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gdrstore COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/gdrstoreConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/gdrstoreConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gdrstore)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/gdrstoreConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/gdrstoreConfig.cmake
              ${CMAKE_BINARY_DIR}/gdrstoreConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gdrstore COMPONENT dev)
file(RELATIVE_PATH GDR_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" GDR_PC_TO_PREFIX "${GDR_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/gdrstore.pc.in ${CMAKE_BINARY_DIR}/gdrstore.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/gdrstore.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)
install(FILES ${PROJECT_BINARY_DIR}/proto/gdrstore/v1/gdrstore.pb.h
              ${PROJECT_BINARY_DIR}/proto/gdrstore/v1/gdrstore.grpc.pb.h
              ${PROJECT_BINARY_DIR}/proto/gdrstore/v1/cluster.pb.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gdrstore/v1 COMPONENT dev)
# The Python package, where Debian's python3 looks (pure Python: the same for every Python 3).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/gdrstore DESTINATION lib/python3/dist-packages
        COMPONENT python FILES_MATCHING PATTERN "*.py" PATTERN "py.typed")

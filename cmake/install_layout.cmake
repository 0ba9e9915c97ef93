# Installed layout of gdrstored. `cmake --install build [--prefix P]` puts
#   P/sbin/gdrstored, P/sbin/gdragent, P/bin/gdrctl, P/lib/systemd/system/gdrstored.service and
#   gdragent.service, CONF/gdrstored/gdrstored.conf and CONF/gdragent/gdragent.conf (CONF = /etc
#   when P is /usr, else P/etc),
#   P/share/doc/gdrstored/{README.md,operations.md,architecture.md,...}.
# The unit and the config are written at install time so that ExecStart and --config name the
# prefix actually installed to (a --prefix given to `cmake --install` included). An existing,
# edited config is never overwritten: the packaged one goes next to it as gdrstored.conf.dist.

# The install script runs without the project's variables: hand it the source directory.
install(CODE "set(GDR_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")" COMPONENT daemon)
install(CODE [[
  set(_gdr_prefix "${CMAKE_INSTALL_PREFIX}")
  if(_gdr_prefix STREQUAL "/usr")
    set(_gdr_conf_dir "/etc/gdrstored")
  else()
    set(_gdr_conf_dir "${_gdr_prefix}/etc/gdrstored")
  endif()
  file(READ "${GDR_SOURCE_DIR}/deploy/systemd/gdrstored.service" _gdr_unit)
  string(REPLACE "/usr/sbin/gdrstored" "${_gdr_prefix}/sbin/gdrstored" _gdr_unit "${_gdr_unit}")
  string(REPLACE "/etc/gdrstored/" "${_gdr_conf_dir}/" _gdr_unit "${_gdr_unit}")
  string(REPLACE "file:/usr/share/doc/" "file:${_gdr_prefix}/share/doc/" _gdr_unit "${_gdr_unit}")
  set(_gdr_unit_dir "$ENV{DESTDIR}${_gdr_prefix}/lib/systemd/system")
  file(MAKE_DIRECTORY "${_gdr_unit_dir}" "$ENV{DESTDIR}${_gdr_conf_dir}")
  message(STATUS "Installing: ${_gdr_unit_dir}/gdrstored.service")
  file(WRITE "${_gdr_unit_dir}/gdrstored.service" "${_gdr_unit}")
  set(_gdr_conf "$ENV{DESTDIR}${_gdr_conf_dir}/gdrstored.conf")
  if(EXISTS "${_gdr_conf}")
    set(_gdr_conf "${_gdr_conf}.dist")
  endif()
  message(STATUS "Installing: ${_gdr_conf}")
  file(COPY_FILE "${GDR_SOURCE_DIR}/deploy/systemd/gdrstored.conf" "${_gdr_conf}")
]] COMPONENT daemon)
# gdragent (the node agent) beside it: its unit and /etc/gdragent/gdragent.conf, written the same
# way (the unit names the prefix installed to; an edited config is kept).
install(CODE [[
  set(_gdr_prefix "${CMAKE_INSTALL_PREFIX}")
  if(_gdr_prefix STREQUAL "/usr")
    set(_gdr_conf_dir "/etc/gdragent")
  else()
    set(_gdr_conf_dir "${_gdr_prefix}/etc/gdragent")
  endif()
  file(READ "${GDR_SOURCE_DIR}/deploy/systemd/gdragent.service" _gdr_unit)
  string(REPLACE "/usr/sbin/gdragent" "${_gdr_prefix}/sbin/gdragent" _gdr_unit "${_gdr_unit}")
  string(REPLACE "/etc/gdragent/" "${_gdr_conf_dir}/" _gdr_unit "${_gdr_unit}")
  string(REPLACE "file:/usr/share/doc/" "file:${_gdr_prefix}/share/doc/" _gdr_unit "${_gdr_unit}")
  set(_gdr_unit_dir "$ENV{DESTDIR}${_gdr_prefix}/lib/systemd/system")
  file(MAKE_DIRECTORY "${_gdr_unit_dir}" "$ENV{DESTDIR}${_gdr_conf_dir}")
  message(STATUS "Installing: ${_gdr_unit_dir}/gdragent.service")
  file(WRITE "${_gdr_unit_dir}/gdragent.service" "${_gdr_unit}")
  set(_gdr_conf "$ENV{DESTDIR}${_gdr_conf_dir}/gdragent.conf")
  if(EXISTS "${_gdr_conf}")
    set(_gdr_conf "${_gdr_conf}.dist")
  endif()
  message(STATUS "Installing: ${_gdr_conf}")
  file(COPY_FILE "${GDR_SOURCE_DIR}/deploy/systemd/gdragent.conf" "${_gdr_conf}")
]] COMPONENT daemon)
install(FILES README.md docs/operations.md docs/architecture.md docs/benchmarks.md docs/agent.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT daemon)
# The Grafana dashboard over the daemon's /metrics (docs/simulation.md, Prometheus metrics).
install(FILES deploy/grafana/gdrstored.json DESTINATION ${CMAKE_INSTALL_DATADIR}/gdrstored/grafana
        COMPONENT daemon)

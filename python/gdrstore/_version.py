"""The project's version, written here once: CMake's project() (the daemon, agent, library and
.debs), python/pyproject.toml, scripts/build-wheel.sh and scripts/build-image.sh read it from
this line, so it stays one plain string assignment."""

__version__ = "0.1.0"

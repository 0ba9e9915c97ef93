# Sourced by the scripts that run podman: its configuration (scripts/podman/containers.conf:
# runc, no default ulimits) unless the caller names another, and a clear error without podman.
GDR_PODMAN_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$GDR_PODMAN_HERE/podman/containers.conf}
for tool in podman runc; do
  if ! command -v "$tool" > /dev/null 2>&1; then
    echo "podman-env: no $tool on PATH (scripts/install-deps.sh installs Debian's)" >&2
    return 1 2>/dev/null || exit 1
  fi
done

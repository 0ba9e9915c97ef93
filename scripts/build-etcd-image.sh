#!/usr/bin/env bash
# Builds the etcd image deploy/kubernetes/examples/etcd.yaml runs: Debian 12's etcd-server on a
# debootstrapped root file system, made by scripts/build-image.sh itself (GDR_IMAGE_KIND=etcd),
# so it has that image's properties: no registry pulled from, package versions pinned (here in
# scripts/etcd-image-packages.txt), uid 10001, the same ID from the same commit on any day.
# Prints the image's ID and size.
#
# usage: scripts/build-etcd-image.sh [TAG]     (root: debootstrap and chroot need it)
#   TAG default localhost/gdrstore-etcd:<etcd-server's pinned version>. build-image.sh's GDR_*
#   variables apply; GDR_IMAGE_CACHE defaults to a directory of its own
#   (/var/cache/gdrstore-image/etcd), as its base differs from the project image's.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
version=$(sed -n 's/^etcd-server=\([0-9.]*\).*/\1/p' "$HERE/etcd-image-packages.txt" \
  2>/dev/null || true)
export GDR_IMAGE_KIND=etcd
export GDR_IMAGE_CACHE=${GDR_IMAGE_CACHE:-/var/cache/gdrstore-image/etcd}
# No build directory: the image holds none of the project's .debs.
exec "$HERE/build-image.sh" "$HERE/.." "${1:-localhost/gdrstore-etcd:${version:-3.4.23}}"

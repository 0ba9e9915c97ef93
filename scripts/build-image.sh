#!/usr/bin/env bash
# Builds the OCI image of gdrstored, gdragent, gdrctl and the Python package from the project's
# own .debs on a Debian 12 root file system made with debootstrap from Debian's archive: no
# registry is pulled from. The image runs as uid 10001 and needs no shell (every entrypoint is
# a binary). Reproducible: file times are the last commit's (SOURCE_DATE_EPOCH), the tar is
# sorted with numeric owners, and podman builds with --timestamp, so the same packages give the
# same image. Prints the image's ID (its config digest).
#
# usage: scripts/build-image.sh BUILD_DIR [TAG]        (root: debootstrap and chroot need it)
#   TAG default localhost/gdrstore:VERSION. GDR_DEBIAN_MIRROR picks the archive (default
#   http://deb.debian.org/debian). GDR_IMAGE_ROOTFS=FILE reuses a root file system tar made by
#   an earlier run (its path is printed), skipping debootstrap. podman runs with the runc
#   runtime through scripts/podman-env.sh.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
B=$(cd "${1:?usage: build-image.sh BUILD_DIR [TAG]}" && pwd)
VERSION=$(sed -n 's/^__version__ = "\([0-9.]*\)"$/\1/p' "$SRC/python/gdrstore/_version.py")
TAG=${2:-localhost/gdrstore:$VERSION}
MIRROR=${GDR_DEBIAN_MIRROR:-http://deb.debian.org/debian}
EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$SRC" log -1 --format=%ct)}
source "$HERE/podman-env.sh"

WORK=$(mktemp -d /var/tmp/gdrstore-image.XXXXXX)
cleanup() {
  for m in proc dev/pts dev; do umount "$WORK/rootfs/$m" 2>/dev/null || true; done
  rm -rf "$WORK/rootfs" "$WORK/pkg"
}
trap cleanup EXIT

echo "build-image: packages from $B"
(cd "$B" && cpack -G DEB -B "$WORK/pkg" > "$WORK/cpack.log" 2>&1) || { cat "$WORK/cpack.log"; exit 1; }
debs=("$WORK"/pkg/gdrstored_*.deb "$WORK"/pkg/libgdrclient1_*.deb "$WORK"/pkg/python3-gdrstore_*.deb)

ROOTFS_TAR=${GDR_IMAGE_ROOTFS:-}
if [[ -z $ROOTFS_TAR ]]; then
  echo "build-image: Debian 12 root file system from $MIRROR"
  debootstrap --variant=minbase --include=python3 bookworm "$WORK/rootfs" "$MIRROR" \
    > "$WORK/debootstrap.log" 2>&1 || { tail -20 "$WORK/debootstrap.log"; exit 1; }
  mkdir -p "$WORK/rootfs/tmp/debs"
  cp "${debs[@]}" "$WORK/rootfs/tmp/debs/"
  mount -t proc proc "$WORK/rootfs/proc"
  in_root=()
  for d in "${debs[@]}"; do in_root+=("/tmp/debs/$(basename "$d")"); done
  chroot "$WORK/rootfs" /usr/bin/env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${in_root[@]}" > "$WORK/apt.log" 2>&1 ||
    { tail -20 "$WORK/apt.log"; exit 1; }
  chroot "$WORK/rootfs" /usr/sbin/groupadd -g 10001 gdrstore
  chroot "$WORK/rootfs" /usr/sbin/useradd -u 10001 -g 10001 -d /var/lib/gdrstored -M \
    -s /usr/sbin/nologin gdrstore
  umount "$WORK/rootfs/proc"
  # What differs from run to run without changing what runs: caches, logs, apt's lists.
  rm -rf "$WORK/rootfs/tmp/debs" "$WORK"/rootfs/var/cache/apt/* "$WORK"/rootfs/var/lib/apt/lists/* \
    "$WORK"/rootfs/var/log/* "$WORK"/rootfs/var/cache/debconf/*-old \
    "$WORK"/rootfs/var/cache/ldconfig/aux-cache "$WORK"/rootfs/usr/lib/python3*/__pycache__
  find "$WORK/rootfs" -name __pycache__ -prune -exec rm -rf {} +
  : > "$WORK/rootfs/etc/machine-id"
  mkdir -p "$WORK/rootfs/var/lib/gdrstored" "$WORK/rootfs/run/gdragent" "$WORK/rootfs/run/gdrstored"
  chown 10001:10001 "$WORK/rootfs/var/lib/gdrstored" "$WORK/rootfs/run/gdragent" \
    "$WORK/rootfs/run/gdrstored"
  ROOTFS_TAR=$WORK/rootfs.tar
  tar -C "$WORK/rootfs" --sort=name --numeric-owner --mtime="@$EPOCH" --format=gnu \
    --exclude=./proc/* --exclude=./sys/* --exclude=./dev/* -cf "$ROOTFS_TAR" .
  echo "build-image: root file system $ROOTFS_TAR"
fi

cp "$ROOTFS_TAR" "$WORK/context-rootfs.tar"
cat > "$WORK/Containerfile" <<EOF
FROM scratch
ADD context-rootfs.tar /
USER 10001:10001
WORKDIR /var/lib/gdrstored
ENTRYPOINT ["/usr/sbin/gdrstored"]
CMD ["--config", "/etc/gdrstored/gdrstored.conf"]
LABEL org.opencontainers.image.title="gdrstore" org.opencontainers.image.version="$VERSION" \\
      org.opencontainers.image.description="gdrstored, gdragent, gdrctl and the gdrstore Python package on Debian 12"
EOF
podman build -q --timestamp "$EPOCH" -f "$WORK/Containerfile" -t "$TAG" "$WORK" > "$WORK/id"
rm -f "$WORK/context-rootfs.tar"
echo "build-image: $TAG"
echo "image id: sha256:$(podman image inspect --format '{{.Id}}' "$TAG")"

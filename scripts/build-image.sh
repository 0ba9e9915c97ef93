#!/usr/bin/env bash
# Builds the OCI image of gdrstored, gdragent, gdrctl and the Python package from the project's
# own .debs on a Debian 12 root file system made with debootstrap from Debian's archive: no
# registry is pulled from. The image runs as uid 10001 and needs no shell (every entrypoint is
# a binary). Prints the image's ID (its config digest) and size.
# Reproducible across days (SOURCE_DATE_EPOCH, default the last commit's time): Debian's package
# versions must equal scripts/image-packages.txt (the archive has no snapshot reachable here, so
# the list is the pin: a build on a moved archive stops naming what moved); the shadow file's
# dates are set to it, every file time is set to it, the tar is sorted with numeric owners,
# and podman builds with --timestamp. The same commit gives the same image ID on any day.
#
# usage: scripts/build-image.sh BUILD_DIR [TAG]        (root: debootstrap and chroot need it)
#   TAG default localhost/gdrstore:VERSION. GDR_DEBIAN_MIRROR picks the archive (default
#   http://deb.debian.org/debian). GDR_IMAGE_CACHE (default /var/cache/gdrstore-image) keeps
#   the debootstrapped base and apt's downloads for the next build. GDR_IMAGE_ROOTFS=FILE reuses
#   a root file system tar made by an earlier run (its path is printed), skipping debootstrap.
#   GDR_IMAGE_DEBS=DIR takes the .debs from DIR, making them there (cpack) when it has none.
#   GDR_IMAGE_WORK=DIR holds the working directory (default /var/tmp). GDR_IMAGE_KIND=etcd
#   makes the etcd image of deploy/kubernetes/examples/etcd.yaml instead (Debian's etcd-server
#   alone, pinned in scripts/etcd-image-packages.txt): scripts/build-etcd-image.sh sets it.
#   GDR_IMAGE_RECORD=1 writes the versions found to scripts/image-packages.txt instead of
#   checking them (after reviewing an archive update). GDR_IMAGE_FAKETIME=+1d runs the steps in
#   the root file system under libfaketime with that offset: a later day, for the tests.
#   podman runs with the runc runtime through scripts/podman-env.sh.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
B=$(cd "${1:?usage: build-image.sh BUILD_DIR [TAG]}" && pwd)
VERSION=$(sed -n 's/^__version__ = "\([0-9.]*\)"$/\1/p' "$SRC/python/gdrstore/_version.py")
TAG=${2:-localhost/gdrstore:$VERSION}
MIRROR=${GDR_DEBIAN_MIRROR:-http://deb.debian.org/debian}
EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$SRC" log -1 --format=%ct)}
if [[ ! $EPOCH =~ ^[0-9]+$ ]]; then
  echo "build-image: SOURCE_DATE_EPOCH '$EPOCH' is not a count of seconds" >&2; exit 1
fi
# What the image holds: gdrstore, the project's .debs; etcd (scripts/build-etcd-image.sh),
# Debian's etcd-server alone, for deploy/kubernetes/examples/etcd.yaml. Each pins its own list.
KIND=${GDR_IMAGE_KIND:-gdrstore}
case $KIND in
  gdrstore)
    PACKAGES=$HERE/image-packages.txt
    # libibverbs1 only recommends its providers (rxe, mlx5, ...), without which it finds no
    # device.
    APT_INSTALL=(ibverbs-providers)
    WORKDIR=/var/lib/gdrstored
    ENTRYPOINT='["/usr/sbin/gdrstored"]'
    CMD='["--config", "/etc/gdrstored/gdrstored.conf"]'
    TITLE=gdrstore
    DESCRIPTION="gdrstored, gdragent, gdrctl and the gdrstore Python package on Debian 12" ;;
  etcd)
    PACKAGES=$HERE/etcd-image-packages.txt
    APT_INSTALL=(etcd-server)
    WORKDIR=/var/lib/etcd
    ENTRYPOINT='["/usr/bin/etcd"]'
    CMD='[]'
    TITLE=gdrstore-etcd
    DESCRIPTION="Debian 12's etcd-server, for the gdrstore cluster's membership" ;;
  *) echo "build-image: GDR_IMAGE_KIND '$KIND' is neither gdrstore nor etcd" >&2; exit 1 ;;
esac
CACHE=${GDR_IMAGE_CACHE:-/var/cache/gdrstore-image}
FAKETIME_LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
if [[ -n ${GDR_IMAGE_FAKETIME:-} && ! -f $FAKETIME_LIB ]]; then
  echo "build-image: GDR_IMAGE_FAKETIME needs $FAKETIME_LIB (Debian's faketime)" >&2; exit 1
fi
source "$HERE/podman-env.sh"
echo "build-image: SOURCE_DATE_EPOCH=$EPOCH"

WORK=$(mktemp -d "${GDR_IMAGE_WORK:-/var/tmp}/gdrstore-image.XXXXXX")
R=$WORK/rootfs
cleanup() {
  for m in proc var/cache/apt/archives dev/pts dev; do umount "$R/$m" 2>/dev/null || true; done
  rm -rf "$R" "$WORK/pkg"
}
trap cleanup EXIT

# Runs a command in the root file system with SOURCE_DATE_EPOCH set (shadow's tools honour it)
# and nothing else of the caller's environment.
in_root() {
  local fake=()
  if [[ -n ${GDR_IMAGE_FAKETIME:-} ]]; then
    fake=(LD_PRELOAD=/tmp/libfaketime.so.1 "FAKETIME=${GDR_IMAGE_FAKETIME}")
  fi
  chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C \
    DEBIAN_FRONTEND=noninteractive "SOURCE_DATE_EPOCH=$EPOCH" "${fake[@]}" "$@"
}

BOOTSTRAP=(--variant=minbase --include=python3 bookworm)
# The cached base depends on how it is made and on the versions pinned: a new list, a new base.
cache_base() {
  local key
  key=$({ echo "$MIRROR ${BOOTSTRAP[*]}"; grep -v '^#' "$PACKAGES" 2>/dev/null || true; } |
    sha256sum)
  echo "$CACHE/base-${key:0:16}.tar"
}

PKG=${GDR_IMAGE_DEBS:-$WORK/pkg}
debs=()
if [[ $KIND == etcd ]]; then
  echo "build-image: Debian's etcd-server, no .debs of the project"
elif compgen -G "$PKG/gdrstored_*.deb" > /dev/null; then
  echo "build-image: packages from $PKG"
else
  echo "build-image: packages from $B"
  mkdir -p "$PKG"
  (cd "$B" && cpack -G DEB -B "$PKG" > "$WORK/cpack.log" 2>&1) || { cat "$WORK/cpack.log"; exit 1; }
fi
[[ $KIND == etcd ]] ||
  debs=("$PKG"/gdrstored_*.deb "$PKG"/libgdrclient1_*.deb "$PKG"/python3-gdrstore_*.deb)

ROOTFS_TAR=${GDR_IMAGE_ROOTFS:-}
if [[ -z $ROOTFS_TAR ]]; then
  if [[ ! -f $PACKAGES && ${GDR_IMAGE_RECORD:-} != 1 ]]; then
    echo "build-image: no $PACKAGES: record one with GDR_IMAGE_RECORD=1" >&2; exit 1
  fi
  base=$(cache_base)
  mkdir -p "$CACHE/archives/partial" "$R"
  if [[ -f $base ]]; then
    echo "build-image: Debian 12 root file system from $base"
    tar -C "$R" --numeric-owner -xpf "$base"
  else
    echo "build-image: Debian 12 root file system from $MIRROR"
    SOURCE_DATE_EPOCH=$EPOCH debootstrap "${BOOTSTRAP[@]}" "$R" "$MIRROR" \
      > "$WORK/debootstrap.log" 2>&1 || { tail -20 "$WORK/debootstrap.log"; exit 1; }
    rm -f "$CACHE"/base-*.tar
    tar -C "$R" --numeric-owner -cf "$base.part" . && mv "$base.part" "$base"
  fi
  mkdir -p "$R/tmp/debs"
  (( ${#debs[@]} == 0 )) || cp "${debs[@]}" "$R/tmp/debs/"
  [[ -n ${GDR_IMAGE_FAKETIME:-} ]] && cp "$FAKETIME_LIB" "$R/tmp/libfaketime.so.1"
  mount -t proc proc "$R/proc"
  mount --bind "$CACHE/archives" "$R/var/cache/apt/archives"
  in_debs=()
  for d in "${debs[@]}"; do in_debs+=("/tmp/debs/$(basename "$d")"); done
  in_root apt-get install -y -qq --no-install-recommends "${APT_INSTALL[@]}" "${in_debs[@]}" \
    > "$WORK/apt.log" 2>&1 || { tail -20 "$WORK/apt.log"; exit 1; }
  in_root dpkg-query -W -f '${Package}=${Version}\n' |
    grep -v -E '^(gdrstored|libgdrclient1|python3-gdrstore)=' | LC_ALL=C sort > "$WORK/packages"
  if [[ ${GDR_IMAGE_RECORD:-} == 1 ]]; then
    { echo "# Debian packages in the image and their versions, checked by scripts/build-image.sh."
      echo "# Recorded from $MIRROR; GDR_IMAGE_RECORD=1 writes it anew."
      cat "$WORK/packages"; } > "$PACKAGES"
    echo "build-image: recorded $(wc -l < "$WORK/packages") package versions in $PACKAGES"
    [[ $base == "$(cache_base)" ]] || mv "$base" "$(cache_base)"
  elif ! diff <(grep -v '^#' "$PACKAGES") "$WORK/packages" > "$WORK/packages.diff"; then
    echo "build-image: Debian's packages differ from $PACKAGES (< pinned, > found):" >&2
    grep '^[<>]' "$WORK/packages.diff" >&2
    echo "build-image: the archive moved or the .debs' dependencies changed; review them, then" \
      "record with GDR_IMAGE_RECORD=1" >&2
    exit 1
  fi
  in_root /usr/sbin/groupadd -g 10001 gdrstore
  in_root /usr/sbin/useradd -u 10001 -g 10001 -d /var/lib/gdrstored -M -s /usr/sbin/nologin \
    gdrstore
  umount "$R/var/cache/apt/archives" "$R/proc"
  # The last password change (days, third field) is the day of whichever build made the
  # account: the cached base may be older than SOURCE_DATE_EPOCH, a fresh one younger. Set
  # every such date to SOURCE_DATE_EPOCH's day.
  for f in "$R/etc/shadow" "$R/etc/shadow-"; do
    [[ -f $f ]] || continue
    awk -F: -v OFS=: -v d=$((EPOCH / 86400)) '$3 != "" { $3 = d } 1' "$f" \
      > "$WORK/shadow"
    cat "$WORK/shadow" > "$f"
  done
  rm -f "$WORK/shadow"
  # What differs from run to run without changing what runs: caches, logs, apt's lists.
  rm -rf "$R/tmp/debs" "$R/tmp/libfaketime.so.1" "$R"/var/cache/apt/* "$R"/var/lib/apt/lists/* \
    "$R"/var/log/* "$R"/var/cache/debconf/*-old "$R/var/cache/ldconfig/aux-cache" \
    "$R"/usr/lib/python3*/__pycache__
  find "$R" -name __pycache__ -prune -exec rm -rf {} +
  : > "$R/etc/machine-id"
  mkdir -p "$R/var/lib/gdrstored" "$R/run/gdragent" "$R/run/gdrstored"
  chown 10001:10001 "$R/var/lib/gdrstored" "$R/run/gdragent" "$R/run/gdrstored"
  ROOTFS_TAR=$WORK/rootfs.tar
  tar -C "$R" --sort=name --numeric-owner --mtime="@$EPOCH" --format=gnu \
    --exclude=./proc/* --exclude=./sys/* --exclude=./dev/* -cf "$ROOTFS_TAR" .
  echo "build-image: root file system $ROOTFS_TAR"
fi

cp "$ROOTFS_TAR" "$WORK/context-rootfs.tar"
cat > "$WORK/Containerfile" <<CONTAINERFILE
FROM scratch
ADD context-rootfs.tar /
USER 10001:10001
WORKDIR $WORKDIR
ENTRYPOINT $ENTRYPOINT
CMD $CMD
LABEL org.opencontainers.image.title="$TITLE" \\
      org.opencontainers.image.version="$VERSION" \\
      org.opencontainers.image.description="$DESCRIPTION"
CONTAINERFILE
podman build -q --no-cache --timestamp "$EPOCH" -f "$WORK/Containerfile" -t "$TAG" "$WORK" > "$WORK/id"
rm -f "$WORK/context-rootfs.tar"
echo "build-image: $TAG"
echo "image id: sha256:$(podman image inspect --format '{{.Id}}' "$TAG")"
size=$(podman image inspect --format '{{.Size}}' "$TAG")
echo "image size: $((size / 1048576)) MiB ($size bytes, uncompressed)"

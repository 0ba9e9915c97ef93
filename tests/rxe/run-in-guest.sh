#!/usr/bin/env bash
# Runs one command as root inside a throw-away QEMU guest (Debian 12's own kernel, TCG) that has
# SoftRoCE devices (rxe0, rxe1) on two veth pairs: the place where the verbs code runs for real on a
# machine without an RDMA NIC. The exit status is the command's; 125 means the guest itself
# failed (no boot, timeout). Output of the command appears on this script's stdout.
#
#   tests/rxe/run-in-guest.sh [--] CMD [ARGS...]
#
# The guest sees this machine's / read-only over 9p with a RAM overlay on top (writes succeed
# and vanish), starts in the current directory with the caller's exported environment, and has
# two rails: rxe0 on veth0 = 10.11.0.1/24 (peer veth1 = 10.11.0.2/24) and rxe1 on veth2 =
# 10.12.0.1/24 (peer veth3 = 10.12.0.2/24), no device on the peers; a test takes a rail's link
# down with `ip link set veth2 down`. Only this guest's private veth addresses carry traffic.
#
# Environment:
#   GDR_RXE_CACHE    kernel + initramfs cache (default /var/tmp/gdrstored-rxe); built once
#   GDR_RXE_MEM      guest memory, MiB (default 3072)
#   GDR_RXE_CPUS     guest vCPUs (default: this machine's CPU count)
#   GDR_RXE_TIMEOUT  seconds before the guest is killed (default 1500)
#   GDR_RXE_ACCEL    tcg (default) or kvm (Debian's kernel hangs under a PVM host's KVM)
set -euo pipefail

[[ ${1:-} == -- ]] && shift
if (($# == 0)); then
  echo "usage: $0 [--] CMD [ARGS...]" >&2
  exit 2
fi

CACHE=$(realpath -m "${GDR_RXE_CACHE:-/var/tmp/gdrstored-rxe}")
MEM=${GDR_RXE_MEM:-3072}
CPUS=${GDR_RXE_CPUS:-$(nproc)}
TIMEOUT=${GDR_RXE_TIMEOUT:-1500}
ACCEL=${GDR_RXE_ACCEL:-tcg}
# Host tools to build the guest, and the userspace the guest runs from the shared root.
PKGS=(qemu-system-x86 busybox-static kmod cpio iproute2 rdma-core ibverbs-providers
      ibverbs-utils perftest)

log() { echo "[rxe-guest] $*" >&2; }

install_packages() {
  local missing=() p
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  log "installing ${missing[*]}"
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Debian's kernel package, unpacked (not installed) into $CACHE/kernel, and a busybox initramfs
# that mounts the host's root over 9p and switches to it. Built once; reused while present.
build_image() {
  [[ -s $CACHE/initramfs.gz && -d $CACHE/kernel/lib/modules ]] && return 0
  log "building the guest image in $CACHE (one time)"
  mkdir -p "$CACHE"
  local pkg
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  [[ -n $pkg ]] || { log "cannot find Debian's kernel package"; return 1; }
  rm -rf "$CACHE/kernel" "$CACHE/dl" && mkdir -p "$CACHE/kernel" "$CACHE/dl"
  (cd "$CACHE/dl" && apt-get download -qq -o APT::Sandbox::User=root "$pkg" >/dev/null)
  dpkg-deb -x "$CACHE"/dl/*.deb "$CACHE/kernel"
  rm -rf "$CACHE/dl"
  local kv
  kv=$(ls "$CACHE/kernel/lib/modules")
  # Drivers the guest never loads; keeps the 9p-shared module tree small.
  rm -rf "$CACHE/kernel/lib/modules/$kv/kernel/sound" \
    "$CACHE/kernel/lib/modules/$kv/kernel/drivers/"{gpu,media,staging,iio,net/wireless}
  depmod -b "$CACHE/kernel" "$kv"

  local root="$CACHE/initramfs.d"
  rm -rf "$root" && mkdir -p "$root"/{bin,dev,proc,sys,host,overlay,newroot,modules}
  cp /bin/busybox "$root/bin/busybox"
  local n=10 m
  # Modules needed before the root exists (virtio transport, 9p, overlayfs), in load order.
  for m in $(modprobe -d "$CACHE/kernel" -S "$kv" --show-depends -a virtio_pci 9pnet_virtio 9p overlay |
             awk '$1 == "insmod" && !seen[$2]++ {print $2}'); do
    cp "$m" "$root/modules/$n.ko"
    n=$((n + 1))
  done
  cat > "$root/init" <<'EOF'
#!/bin/busybox sh
# Guest PID 1: shared host root (read-only) + tmpfs overlay, then the run's script.
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sysfs /sys
$B mount -t devtmpfs dev /dev
for m in /modules/*.ko; do $B insmod "$m"; done
O=trans=virtio,version=9p2000.L,msize=512000
$B mount -t 9p -o ro,$O,cache=loose hostroot /host || { echo "9p mount failed"; $B poweroff -f; }
$B mount -t tmpfs -o size=75% overlay /overlay
$B mkdir -p /overlay/upper /overlay/work
$B mount -t overlay overlay -o lowerdir=/host,upperdir=/overlay/upper,workdir=/overlay/work /newroot
RUN=$($B sed -n 's/.*gdr_run=\([^ ]*\).*/\1/p' /proc/cmdline)
$B mkdir -p "/newroot$RUN"
$B mount -t 9p -o $O run "/newroot$RUN"
for d in proc sys dev; do $B mount --move /$d /newroot/$d; done
exec $B switch_root /newroot /bin/bash "$RUN/guest.sh"
EOF
  chmod +x "$root/init"
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1 > "$CACHE/initramfs.gz.tmp")
  mv "$CACHE/initramfs.gz.tmp" "$CACHE/initramfs.gz"
  rm -rf "$root"
}

install_packages
build_image
KV=$(ls "$CACHE/kernel/lib/modules")
RUN=$(mktemp -d "$CACHE/run.XXXXXX")
trap 'rm -rf "$RUN"' EXIT

# The script the guest runs after switch_root: devices, modules, the veth pair with rxe0, then
# the command in the caller's directory and environment; its status goes to $RUN/status.
{
  echo "set +e"
  # Fresh /run and /tmp would hide a caller working under them (a clone in /tmp): the caller's
  # directory is bound aside first and put back on top afterwards.
  echo "mkdir -p /mnt/gdr-caller && mount --bind $(printf %q "$PWD") /mnt/gdr-caller"
  echo "mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp; mkdir -p /dev/pts /dev/shm"
  echo "mkdir -p $(printf %q "$PWD") && mount --bind /mnt/gdr-caller $(printf %q "$PWD")"
  echo "mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm"
  echo "mkdir -p /lib/modules/$KV && mount --bind $CACHE/kernel/lib/modules/$KV /lib/modules/$KV"
  export -p | grep -v -E '^declare -x (PWD|OLDPWD|SHLVL|_|HOME|PATH|TERM|TMPDIR)='
  echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root"
  echo "modprobe -a veth rdma_rxe ib_uverbs rdma_ucm || echo '[rxe-guest] modprobe failed' >&2"
  echo "ip link set lo up"
  echo "ip link add veth0 type veth peer name veth1"
  echo "ip addr add 10.11.0.1/24 dev veth0; ip addr add 10.11.0.2/24 dev veth1"
  echo "ip link set veth0 up; ip link set veth1 up"
  echo "rdma link add rxe0 type rxe netdev veth0 || echo '[rxe-guest] rxe setup failed' >&2"
  echo "ip link add veth2 type veth peer name veth3"
  echo "ip addr add 10.12.0.1/24 dev veth2; ip addr add 10.12.0.2/24 dev veth3"
  echo "ip link set veth2 up; ip link set veth3 up"
  echo "rdma link add rxe1 type rxe netdev veth2 || echo '[rxe-guest] rxe1 setup failed' >&2"
  echo "ulimit -l unlimited; ulimit -n 65536"
  echo "cd $(printf %q "$PWD") || exit 1"
  echo "$(printf '%q ' "$@")"
  echo "rc=\$?; echo \$rc > $RUN/status; sync"
  echo "/bin/busybox poweroff -f"
} > "$RUN/guest.sh"

CPU=max
[[ $ACCEL == kvm ]] && CPU=host
log "booting $KV ($ACCEL, $CPUS vCPU, $MEM MiB)"
start=$(date +%s)
timeout "$TIMEOUT" qemu-system-x86_64 -accel "$ACCEL" -cpu "$CPU" -m "$MEM" -smp "$CPUS" \
  -display none -vga none -nic none -no-reboot -monitor none -serial stdio \
  -kernel "$CACHE/kernel/boot/vmlinuz-$KV" -initrd "$CACHE/initramfs.gz" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 gdr_run=$RUN" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$RUN",mount_tag=run,security_model=none,multidevs=remap </dev/null || true
status=$(cat "$RUN/status" 2>/dev/null || echo 125)
log "command exited $status after $(($(date +%s) - start)) s in the guest"
exit "$status"

#!/bin/bash
# run-unit-in-vm.sh DEB
# Boots a throw-away QEMU VM (Debian 12 kernel, TCG) whose root is this host's / (read-only 9p
# with a RAM overlay) and whose PID 1 is the real systemd, installs DEB there with dpkg -i (so
# its postinst enables and starts gdrstored.service), and runs guest-check.sh as a oneshot unit:
# systemctl start/status/reload/stop, a frozen daemon killed by the watchdog and restarted,
# journald priorities. The transcript is printed; exit status = guest-check.sh's (125: VM
# failure). Slow (a few minutes under TCG), so not part of ctest.
# Env: SDVM_DIR (cache+work dir; default /var/tmp/gdr-systemd-vm), SDVM_MEM (MiB, 2048),
#      SDVM_TIMEOUT (s, 900).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DEB" >&2; exit 2; }
DEB=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(realpath -m "${SDVM_DIR:-/var/tmp/gdr-systemd-vm}"); mkdir -p "$W"
PKGS="qemu-system-x86 busybox-static kmod cpio"
if ! dpkg -s $PKGS >/dev/null 2>&1; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PKGS >/dev/null
fi
if [ ! -e "$W/k/boot" ]; then  # one-time: Debian's kernel, unpacked (not installed)
  KPKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  rm -rf "$W/k" && mkdir -p "$W/k"
  (cd "$W" && apt-get download -q -o APT::Sandbox::User=root "$KPKG" >/dev/null &&
   dpkg-deb -x "$KPKG"_*.deb k && rm -f "$KPKG"_*.deb)
  KV=$(ls "$W/k/lib/modules"); depmod -b "$W/k" "$KV"
fi
KV=$(ls "$W/k/lib/modules")
R="$W/ir"; rm -rf "$R"; mkdir -p "$R"/{bin,dev,proc,sys,lower,rw,newroot,mods}
cp /bin/busybox "$R/bin/"; echo "$W" > "$R/wdir"
i=10; for m in $(modprobe -d "$W/k" -S "$KV" --show-depends -a virtio_pci 9pnet_virtio 9p overlay |
                 awk '!s[$2]++{print $2}'); do cp "$m" "$R/mods/$i.ko"; i=$((i+1)); done
cat > "$R/init" <<'INIT'
#!/bin/busybox sh
B=/bin/busybox; W=$($B cat /wdir); O=trans=virtio,version=9p2000.L,msize=512000
$B mount -t proc p /proc; $B mount -t sysfs s /sys; $B mount -t devtmpfs d /dev
for m in /mods/*.ko; do $B insmod $m; done
$B mount -t 9p -o ro,$O,cache=loose hostroot /lower && $B mount -t tmpfs t /rw && $B mkdir /rw/u /rw/w
$B mount -t overlay o -o lowerdir=/lower,upperdir=/rw/u,workdir=/rw/w /newroot
$B mount -t 9p -o $O work /newroot$W
# The check runs as a unit of the real systemd; the VM powers off when it ends.
S=/newroot/etc/systemd/system; $B mkdir -p $S
$B cp /newroot$W/gdr-check.target /newroot$W/gdr-check.service $S/
$B rm -f /newroot/etc/machine-id; $B touch /newroot/etc/machine-id
for d in proc sys dev; do $B mount --move /$d /newroot/$d; done
# The host root may carry container markers; this guest is a VM.
$B rm -f /newroot/.dockerenv /newroot/run/.containerenv
exec $B switch_root /newroot /lib/systemd/systemd --unit=gdr-check.target
INIT
chmod +x "$R/init"; (cd "$R" && find . | cpio -o -H newc --quiet | gzip -1 > "$W/initramfs.gz")
cp "$DEB" "$W/gdrstored.deb"
cp "$HERE/guest-check.sh" "$W/guest-check.sh"
cat > "$W/gdr-check.target" <<UNIT
[Unit]
Description=gdrstored VM check
Requires=gdr-check.service
Wants=systemd-journald.socket systemd-journald.service
AllowIsolate=yes
UNIT
cat > "$W/gdr-check.service" <<UNIT
[Unit]
Description=gdrstored VM check script
After=systemd-journald.service
SuccessAction=poweroff-force
FailureAction=poweroff-force
[Service]
Type=oneshot
Environment=W=$W
ExecStart=/bin/bash $W/guest-check.sh
StandardOutput=file:$W/guest.log
StandardError=inherit
TimeoutStartSec=900
UNIT
rm -f "$W/exit_code" "$W/guest.log"
timeout "${SDVM_TIMEOUT:-900}" qemu-system-x86_64 -accel tcg -cpu max -m "${SDVM_MEM:-2048}" \
  -smp 2 -display none -vga none -nic none -no-reboot -monitor none -serial file:"$W/console.log" \
  -kernel "$W/k/boot/vmlinuz-$KV" -initrd "$W/initramfs.gz" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 systemd.unit=gdr-check.target systemd.show_status=0" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$W",mount_tag=work,security_model=none,multidevs=remap </dev/null || true
cat "$W/guest.log" 2>/dev/null || { echo "no guest log; console:"; tail -50 "$W/console.log"; }
exit "$(cat "$W/exit_code" 2>/dev/null || echo 125)"

#!/bin/bash
# Runs inside the VM of run-unit-in-vm.sh, as a unit of the real systemd (PID 1). Installs the
# package and drives gdrstored.service the way an operator would; every command is echoed with
# its output. Writes the exit status to $W/exit_code.
set -uo pipefail
fail=0
run() { echo "\$ $*"; "$@"; local rc=$?; [[ $rc -eq 0 ]] || echo "[exit $rc]"; return $rc; }
must() { run "$@" || fail=1; }
finish() { echo "$fail" > "$W/exit_code"; sync; }
trap finish EXIT
echo "PID 1 is $(cat /proc/1/comm); $(systemctl --version | head -1)"

must dpkg -i "$W/gdrstored.deb"
must systemctl is-enabled gdrstored.service
must systemctl is-active gdrstored.service
must systemctl status gdrstored.service --no-pager -l
must systemctl show gdrstored.service -p Type -p WatchdogUSec -p NotifyAccess -p User -p LimitMEMLOCK -p StatusText
must ls -l /var/lib/gdrstored/
must gdrctl info
must gdrctl write --volume nvme0 -o 4097 -s 1MiB --verify
must gdrctl read --volume nvme0 -o 4097 -s 1MiB --salt 7 --verify
must gdrctl bench -t write -s 1MiB -n 200 --qd 4 -q
must gdrctl stats

# Reload: one live change, one that needs a restart.
must sed -i 's/^max-op-size = .*/max-op-size = "64MiB"/; s/^chunk-size = .*/chunk-size = "512KiB"/' \
  /etc/gdrstored/gdrstored.conf
must systemctl reload gdrstored.service
must systemctl is-active gdrstored.service
must journalctl -u gdrstored.service --no-pager -o cat -n 4
echo "--- warnings and worse only:"
must journalctl -u gdrstored.service --no-pager -p warning -o short-monotonic

# Watchdog: a frozen daemon stops pinging; systemd aborts it and Restart=on-failure starts anew.
pid=$(systemctl show -p MainPID --value gdrstored.service)
echo "freezing MainPID $pid with SIGSTOP"
kill -STOP "$pid"
restarted=0
for _ in $(seq 120); do
  n=$(systemctl show -p NRestarts --value gdrstored.service)
  now=$(systemctl show -p MainPID --value gdrstored.service)
  if [[ $n -ge 1 && $now != "$pid" && $now != 0 ]] && systemctl is-active -q gdrstored.service; then
    restarted=1; break
  fi
  sleep 1
done
[[ $restarted -eq 1 ]] || fail=1
must systemctl show gdrstored.service -p NRestarts -p MainPID -p ActiveState
must bash -c "journalctl -u gdrstored.service --no-pager -o short-monotonic | grep -iE 'watchdog|abort|Scheduled restart' | head"
must gdrctl read --volume nvme0 -o 0 -s 4KiB --verify   # the restarted daemon serves again

# Stop: STOPPING=1, drain, exit 0.
must systemctl stop gdrstored.service
must systemctl show gdrstored.service -p ActiveState -p Result -p ExecMainStatus
must journalctl -u gdrstored.service --no-pager -o cat -n 6
echo "RESULT: $([[ $fail -eq 0 ]] && echo PASS || echo FAIL)"

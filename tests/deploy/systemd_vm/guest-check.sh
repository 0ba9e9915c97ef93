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

# Tokens, the way operations.md says: the file handed to the unit's dynamic user as a systemd
# credential. From here every call needs the token, the watchdog's own Ping included.
must bash -c 'umask 077; head -c 32 /dev/urandom | base64 | tr -d "=+/" > /etc/gdrstored/tokens'
must mkdir -p /etc/systemd/system/gdrstored.service.d
must bash -c 'printf "[Service]\nLoadCredential=tokens:/etc/gdrstored/tokens\n" > /etc/systemd/system/gdrstored.service.d/tokens.conf'
must bash -c 'echo "token-file = \"/run/credentials/gdrstored.service/tokens\"" >> /etc/gdrstored/gdrstored.conf'
must systemctl daemon-reload
must systemctl restart gdrstored.service
must systemctl is-active gdrstored.service
if run gdrctl info; then echo "a call without a token was served"; fail=1; fi
export GDRSTORE_TOKEN_FILE=/etc/gdrstored/tokens
must gdrctl write --volume nvme0 -o 4097 -s 1MiB --salt 7 --verify   # the bytes read in above, kept in the file across the restart
must bash -c "journalctl -u gdrstored.service --no-pager -o cat | grep -E 'token authentication on|refused a call'"
pid0=$(systemctl show -p MainPID --value gdrstored.service)
echo "waiting 15 s (1.5 x WatchdogSec) with tokens on: the watchdog must not fire"
sleep 15
must test "$(systemctl show -p NRestarts --value gdrstored.service)" = 0
must test "$(systemctl show -p MainPID --value gdrstored.service)" = "$pid0"

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

#!/usr/bin/env bash
# Checks that includes point down the layers of the tree under ROOT (default: the repository):
#   daemon: main.cc -> ops -> service -> {sim, observe} -> transport (interface)
#           -> transport/{tcp,rc,dc,local} -> verbs_core -> store
#           sim (faults, media models, delay queue) and observe (stats, trace, metrics) sit side
#           by side: neither includes the other, the service or ops, nor a transport's own folder
#           (they see transfer_op.h and the interface only).
#   client: Client -> src/transport (interface, factory) -> src/transport/{tcp,rc,dc,local}; the
#           transports see the public types (gdrstore/types.h), never the façade (client.h)
#   common/ sees neither daemon/ nor client/, and its folders by kind point down too:
#           base (utilities) <- wire (formats both sides speak) <- grpc (gRPC glue);
#           base <- verbs <- cuda; base <- topo; base, grpc <- etcd; base, wire, cuda <- handoff
#           (the handoff protocol's ends, which daemon/, client/ and agent/ use); base <- process
#           (a service process's life: main, systemd, health, which gdrstored and gdragent
#           share); no file loose in common/.
#   public client headers see no private header.
#   agent/ (gdragent) stands on the public client API (gdrstore/...) and common/ only; nothing
#           else includes it.
# Prints one line per include that runs the wrong way and exits 1 if there is any.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$ROOT"

bad=0
# Every quoted include of the tree, read once: lines of "FILE<TAB>INCLUDE" (the rules below only
# filter this table, so a run takes well under a second however many rules there are).
table=$(find daemon client common agent -type f \( -name '*.h' -o -name '*.cc' \) -print0 | sort -z |
  xargs -0 grep -H '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' |
  sed 's/^\([^:]*\):[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1\t\2/' || true)
# forbid DIR REGEX WHY [ALLOW [EXEMPT_FILE]]: no file under DIR (or DIR itself, a file; but
# EXEMPT_FILE) may include a path matching REGEX (unless it also matches ALLOW).
# forbid_top DIR REGEX WHY [EXEMPT_FILE]: the same for the files directly in DIR only.
# Both only note the rule: one awk pass at the end runs them all over the table (a bash loop over
# the table per rule took most of a second a run).
rules=()
forbid() { rules+=("$1"$'\t'"$2"$'\t'"$3"$'\t'"${4:-}"$'\t'"${5:-}"$'\t'sub); }
forbid_top() { rules+=("$1"$'\t'"$2"$'\t'"$3"$'\t\t'"${4:-}"$'\t'top); }

forbid daemon/store '^daemon/(service|ops|sim|observe|transport|verbs_core)/' \
  "the store is the bottom layer"
forbid daemon/verbs_core '^daemon/(service|ops|sim|observe|transport)/' \
  "the verbs core sits below the transports and knows none of them"
forbid daemon/transport '^daemon/(service|ops|sim|observe)/' \
  "a transport never reaches up to sim, observe, the service or ops"
forbid daemon/sim '^daemon/(service|ops)/' "simulation never reaches up to the service or ops"
forbid daemon/observe '^daemon/(service|ops)/' "observation never reaches up to the service or ops"
forbid daemon/sim '^daemon/observe/' "sim and observe sit side by side and include each other not"
forbid daemon/observe '^daemon/sim/' "sim and observe sit side by side and include each other not"
forbid daemon/sim '^daemon/transport/(tcp|rc|dc|local)/' "sim sees the transport interface only"
forbid daemon/observe '^daemon/transport/(tcp|rc|dc|local)/' "observe sees the transport interface only"
forbid daemon/service '^daemon/ops/' "the service never reaches up to ops"
# ops sees a transport's settings (*_options.h) and the interface, never a transport's code;
# daemon_transports.cc, where the Daemon builds the transports, is the one place that names them.
forbid daemon/ops '^daemon/transport/(tcp|rc|dc|local)/' "ops may include a transport's *_options.h only" \
  '^daemon/transport/(tcp|rc|dc|local)/[a-z]+_options\.h$' daemon/ops/daemon_transports.cc
for t in tcp rc dc local; do
  siblings=$(echo tcp rc dc local | tr ' ' '\n' | grep -vx "$t" | paste -sd'|')
  forbid "daemon/transport/$t" "^daemon/transport/($siblings)/" "transports do not include each other"
  forbid "client/src/transport/$t" "^client/src/transport/($siblings)/" "transports do not include each other"
  forbid "client/src/transport/$t" '^client/src/[^/]*$' "a transport never reaches up to the Client"
done
# The interface layer of each side names no transport (the client's factory excepted).
forbid_top daemon/transport '^daemon/transport/(tcp|rc|dc|local)/' \
  "the transport interface names no transport"
for d in client/src client/src/transport; do
  forbid_top "$d" '^client/src/transport/(tcp|rc|dc|local)/' \
    "only open_client_transport.cc picks a transport" client/src/transport/open_client_transport.cc
done
forbid common '^(daemon|client)/' "common/ is shared by both sides and sees neither"
# common/'s rooms: each may include only the rooms listed for it (and itself).
common_room() {
  local room=$1 may=$2 why=$3
  forbid "common/$room" "^common/" "$why" "^common/($room|$may)/"
}
common_room base '-' "common/base is the bottom of common/ and includes no other room"
common_room wire 'base' "common/wire (formats) sees only common/base"
common_room grpc 'base|wire' "common/grpc sees only common/base and common/wire"
common_room verbs 'base' "common/verbs sees only common/base"
common_room cuda 'base|verbs' "common/cuda sees only common/base and common/verbs"
common_room topo 'base' "common/topo sees only common/base"
common_room etcd 'base|grpc' "common/etcd sees only common/base and common/grpc"
common_room handoff 'base|wire|cuda' "common/handoff sees only common/base, common/wire and common/cuda"
common_room process 'base' "common/process (a service's main, systemd, health) sees only common/base"
for f in common/*.h common/*.cc; do
  [[ -f $f ]] || continue
  echo "$f: common/ keeps every file in a room by kind (base, wire, grpc, verbs, cuda, topo, etcd," \
    "handoff, process)"
  bad=1
done
forbid client/include '^(client/src|common|daemon)/' "public headers include no private header"
forbid client/src/transport '^gdrstore/client\.h$' \
  "transports sit below the public façade: they include gdrstore/types.h, never gdrstore/client.h"
forbid client '^daemon/' "the client never includes the daemon"
forbid agent '^(daemon|client)/' \
  "the agent uses the public client API (gdrstore/...) and common/, never client/ or daemon/ code"
for side in daemon client common; do
  forbid "$side" '^agent/' "nothing but gdragent itself includes agent/"
done
forbid daemon '^client/' "the daemon never includes the client"

# main.cc parses the flags and runs the Daemon: it sees ops/ only.
forbid daemon/main.cc '^daemon/' "main runs the Daemon (daemon/ops/) and sees nothing else" \
  '^daemon/ops/'

# daemon/main.cc is the only file at the top of daemon/.
for f in daemon/*.h daemon/*.cc; do
  [[ -f $f && $f != daemon/main.cc ]] || continue
  echo "$f: only main.cc lives at the top of daemon/ (put it in ops/, service/, sim/," \
    "observe/, transport/, verbs_core/ or store/)"
  bad=1
done

# Fields of a rule: 1 DIR, 2 REGEX, 3 WHY, 4 ALLOW, 5 EXEMPT_FILE, 6 sub|top.
wrong=$(printf '%s\n' "${rules[@]}" | awk -F'\t' '
  FILENAME == "-" { rule[++n] = $0; next }
  { file[++m] = $1; inc[m] = $2 }
  END {
    for (r = 1; r <= n; r++) {
      split(rule[r], f, "\t")
      for (i = 1; i <= m; i++) {
        if (f[6] == "top") {
          if (index(file[i], f[1] "/") != 1 || substr(file[i], length(f[1]) + 2) ~ /\//) continue
        } else if (file[i] != f[1] && index(file[i], f[1] "/") != 1) {
          continue
        }
        if (file[i] == f[5] || inc[i] !~ f[2] || (f[4] != "" && inc[i] ~ f[4])) continue
        printf "%s includes \"%s\": %s\n", file[i], inc[i], f[3]
      }
    }
  }' - <(printf '%s\n' "$table"))
if [[ -n $wrong ]]; then
  echo "$wrong"
  bad=1
fi

if ((bad)); then exit 1; fi
echo "layers: every include points down ($(find daemon client common agent -name '*.h' -o -name '*.cc' | wc -l) files checked)"

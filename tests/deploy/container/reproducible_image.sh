#!/usr/bin/env bash
# The image built again "a day later" (the root file system's steps under libfaketime, +1 day)
# from the same .debs and the same cached Debian base must have the same ID as the first build:
# without SOURCE_DATE_EPOCH useradd's shadow dates follow the clock. Also checked: the image's
# created time is SOURCE_DATE_EPOCH, the size is reported, and the verbs providers are in it.
# usage: reproducible_image.sh BUILD_DIR FIRST_TAG DEBS_DIR FIRST_BUILD_LOG   (exit 1: failed)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
source "$SRC/scripts/podman-env.sh"
B=$1 TAG=$2 DEBS=$3 FIRST_LOG=$4
LATER=$TAG-later
T=$(mktemp -d)
# The build's working directory (its root file system tar) is made under $T.
trap 'podman rmi -f "$LATER" > /dev/null 2>&1 || true; rm -rf "$T"' EXIT

# The first build's time: a commit landing meanwhile must not move it.
epoch=$(sed -n 's/^build-image: SOURCE_DATE_EPOCH=//p' "$FIRST_LOG")
status=0
if ! SOURCE_DATE_EPOCH=$epoch GDR_IMAGE_DEBS=$DEBS GDR_IMAGE_WORK=$T GDR_IMAGE_FAKETIME=+1d \
     bash "$SRC/scripts/build-image.sh" "$B" "$LATER" > "$T/build.log" 2>&1; then
  echo "FAIL: the later build"; tail -20 "$T/build.log"; exit 1
fi
first=$(sed -n 's/^image id: //p' "$FIRST_LOG")
later=$(sed -n 's/^image id: //p' "$T/build.log")
if [[ -z $first || $first != "$later" ]]; then
  echo "FAIL: a build a day later gave another image: '$first' then '$later'"; status=1
fi
created=$(podman image inspect --format '{{.Created.Unix}}' "$LATER")
if [[ $created != "$epoch" ]]; then
  echo "FAIL: the image was created at $created, not SOURCE_DATE_EPOCH $epoch"; status=1
fi
if ! grep -q '^image size: [0-9]\+ MiB' "$T/build.log"; then
  echo "FAIL: build-image.sh did not report the image's size"; status=1
fi
# libibverbs finds devices only through a provider (rxe for SoftRoCE, mlx5 for ConnectX).
if ! podman run --rm --network none --entrypoint /usr/bin/python3 "$LATER" -c "
import glob, sys
found = [p.rsplit('/', 1)[1] for p in glob.glob('/usr/lib/*/libibverbs/lib*-rdmav*.so')]
print('verbs providers:', ' '.join(sorted(found)))
sys.exit(0 if {'librxe-rdmav34.so', 'libmlx5-rdmav34.so'} <= set(found) else 1)"; then
  echo "FAIL: the image lacks the rxe and mlx5 verbs providers"; status=1
fi
((status == 0)) && echo "reproducible: a day later the same $later; created at SOURCE_DATE_EPOCH;" \
  "$(grep '^image size:' "$T/build.log")"
exit $status

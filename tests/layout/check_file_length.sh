#!/usr/bin/env bash
# No source file over 600 lines without a stated reason: a file longer than that must say why in
# its first 30 lines, in a comment containing "Over 600 lines because". Long files hide more than
# one thing; the reason makes the exception a decision someone can review.
# usage: check_file_length.sh [ROOT]   (default: the repository). Exits 1 naming each offender.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$ROOT"
limit=600
bad=0
checked=0
while IFS= read -r f; do
  checked=$((checked + 1))
  n=$(wc -l <"$f")
  ((n > limit)) || continue
  if head -n 30 "$f" | grep -q "Over $limit lines because"; then continue; fi
  echo "$f: $n lines (over $limit) with no \"Over $limit lines because\" in its first 30 lines"
  bad=1
done < <(find daemon client common agent bench tests python scripts -type f \
           \( -name '*.h' -o -name '*.cc' -o -name '*.c' -o -name '*.py' -o -name '*.sh' \) \
           -not -path '*/corpus/*' | sort)
((bad == 0)) || exit 1
echo "file length: $checked files, none over $limit lines without a stated reason"

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
# One wc over every file (a wc per file was hundreds of processes a run; its "total" lines are
# dropped: every path has a slash); only the long ones are read for their reason.
dirs=()
for d in daemon client common agent bench tests python scripts; do [[ -d $d ]] && dirs+=("$d"); done
((${#dirs[@]} > 0)) || { echo "no source folder under $ROOT"; exit 1; }
files=$(find "${dirs[@]}" -type f \
          \( -name '*.h' -o -name '*.cc' -o -name '*.c' -o -name '*.py' -o -name '*.sh' \) \
          -not -path '*/corpus/*' -print0 | sort -z | xargs -0r wc -l | awk '$2 != "total"')
checked=$(grep -c . <<<"$files" || true)
while read -r n f; do
  [[ -n $f ]] || continue
  if head -n 30 "$f" | grep -q "Over $limit lines because"; then continue; fi
  echo "$f: $n lines (over $limit) with no \"Over $limit lines because\" in its first 30 lines"
  bad=1
done < <(awk -v limit="$limit" '$1 > limit' <<<"$files")
((bad == 0)) || exit 1
echo "file length: $checked files, none over $limit lines without a stated reason"

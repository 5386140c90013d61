#!/usr/bin/env bash
# Oracle: bash's regex match splits the name; everything else stays put.
set -euo pipefail
shopt -s nullglob
for f in /app/incoming/IMG_*.jpg; do
  name=${f##*/}
  if [[ $name =~ ^IMG_([0-9]{4})([0-9]{2})([0-9]{2})_([0-9]{6})\.jpg$ ]]; then
    dir=/app/photos/${BASH_REMATCH[1]}/${BASH_REMATCH[2]}
    mkdir -p "$dir"
    mv "$f" "$dir/${BASH_REMATCH[3]}_${BASH_REMATCH[4]}.jpg"
  fi
done

#!/usr/bin/env bash
# Oracle: tr splits on non-letters, grep -vxF drops stopwords, sort/uniq count.
set -euo pipefail
tr 'A-Z' 'a-z' < /app/book.txt | tr -cs 'a-z' '\n' | grep -v '^$' | grep -vxF -f /app/stopwords.txt \
  | LC_ALL=C sort | uniq -c | awk '{ print $1, $2 }' | LC_ALL=C sort -s -k1,1nr | head -n 10 > /app/top10.txt

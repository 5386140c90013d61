#!/usr/bin/env bash
# Oracle: awk converts the numeral, buffers each chapter and trims blank lines at both ends.
set -euo pipefail
mkdir -p /app/chapters
awk '
  function roman(s,   v, i, c, n, next_v) {
    v["I"] = 1; v["V"] = 5; v["X"] = 10; v["L"] = 50; v["C"] = 100; n = 0
    for (i = 1; i <= length(s); i++) {
      c = v[substr(s, i, 1)]; next_v = (i < length(s)) ? v[substr(s, i + 1, 1)] : 0
      n += (c < next_v) ? -c : c
    }
    return n
  }
  function flush(   first, last, i) {
    if (!out) return
    first = 1; last = count
    while (first <= last && buf[first] == "") first++
    while (last >= first && buf[last] == "") last--
    for (i = first; i <= last; i++) print buf[i] > out
    close(out)
  }
  /^CHAPTER [IVXLC]+$/ { flush(); out = sprintf("/app/chapters/chapter-%02d.txt", roman($2)); count = 0; next }
  out { buf[++count] = $0 }
  END { flush() }' /app/novel.txt

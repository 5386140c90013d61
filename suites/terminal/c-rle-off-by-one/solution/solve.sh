#!/usr/bin/env bash
# Oracle: the last run was never written, and an unsigned char count wrapped after 255.
set -euo pipefail
cd /app/rle
python3 - <<'PY'
src = open("rle.c").read()
src = src.replace("    unsigned char count = 1;\n", "    unsigned long count = 1;\n")
src = src.replace('            printf("%u%c", count, buf[i - 1]);', '            printf("%lu%c", count, buf[i - 1]);')
src = src.replace("            count = 1;\n        }\n    }\n    return 0;",
                  "            count = 1;\n        }\n    }\n    if (n > 0)\n        printf(\"%lu%c\", count, buf[n - 1]);\n    return 0;")
open("rle.c", "w").write(src)
PY
gcc -O2 -Wall -o rle rle.c

#!/usr/bin/env bash
# Oracle: recipes need a leading tab, and the link step needs count.o too.
set -euo pipefail
cd /app/wc
sed -i -e 's/^    /\t/' -e 's/^wordcount: main.o$/wordcount: main.o count.o/' \
  -e 's/-o wordcount main.o$/-o wordcount main.o count.o/' Makefile
make

#!/usr/bin/env bash
# Oracle: gcc -MMD writes each object's header dependencies; make includes them on the next run.
set -euo pipefail
cat > /app/calc/Makefile <<'MK'
CC = gcc
CFLAGS = -Wall -O2 -Iinclude
SRCS = $(wildcard src/*.c)
OBJS = $(patsubst src/%.c,build/%.o,$(SRCS))

bin/calc: $(OBJS)
	@mkdir -p bin
	$(CC) $(CFLAGS) -o $@ $(OBJS)

build/%.o: src/%.c
	@mkdir -p build
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

clean:
	rm -rf build bin

.PHONY: clean
-include $(OBJS:.o=.d)
MK
cd /app/calc && make

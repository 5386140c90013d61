#!/usr/bin/env bash
# Oracle: one pass over the string; each unit must come strictly after the previous one.
set -euo pipefail
cat > /app/duration/duration.c <<'C'
#include <string.h>
#include "duration.h"

long parse_duration(const char *text) {
    static const char units[] = "dhms";
    static const long seconds[] = {86400, 3600, 60, 1};
    long total = 0;
    int next_unit = 0; /* index in units of the first unit still allowed */
    const char *p = text;
    if (p == NULL || *p == '\0')
        return -1;
    while (*p) {
        long value = 0;
        const char *digits = p;
        while (*p >= '0' && *p <= '9') {
            value = value * 10 + (*p - '0');
            if (value > 2147483647L)
                return -1;
            p++;
        }
        if (p == digits || *p == '\0')
            return -1;
        const char *unit = strchr(units, *p);
        if (unit == NULL || unit - units < next_unit)
            return -1;
        total += value * seconds[unit - units];
        if (total > 2147483647L)
            return -1;
        next_unit = (int)(unit - units) + 1;
        p++;
    }
    return total;
}
C
cd /app/duration && make

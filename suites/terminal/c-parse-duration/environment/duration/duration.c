#include "duration.h"

long parse_duration(const char *text) {
    (void)text;
    return -1; /* TODO: implement as documented in duration.h */
}

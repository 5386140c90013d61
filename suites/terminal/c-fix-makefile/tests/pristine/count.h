#ifndef COUNT_H
#define COUNT_H
#include <stdio.h>

struct counts {
    long lines, words, bytes;
};

/* Counts lines, words (runs of non-whitespace) and bytes of a stream. */
struct counts count_stream(FILE *in);

#endif

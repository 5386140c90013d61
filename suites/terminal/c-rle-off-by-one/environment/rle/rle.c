/* rle: run-length encoding of standard input (see README). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int encode(void) {
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, stdin);
    unsigned char count = 1;
    for (size_t i = 1; i < n; i++) {
        if (buf[i] == buf[i - 1]) {
            count++;
        } else {
            printf("%u%c", count, buf[i - 1]);
            count = 1;
        }
    }
    return 0;
}

static int decode(void) {
    unsigned long count;
    int ch;
    while (scanf("%lu", &count) == 1) {
        if ((ch = getchar()) == EOF) {
            fprintf(stderr, "rle: truncated input\n");
            return 1;
        }
        for (unsigned long i = 0; i < count; i++)
            putchar(ch);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "-d") == 0)
        return decode();
    if (argc == 1)
        return encode();
    fprintf(stderr, "usage: rle [-d] < input\n");
    return 2;
}

#include <stdio.h>
#include "duration.h"

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        printf("%s -> %ld\n", argv[i], parse_duration(argv[i]));
    return 0;
}

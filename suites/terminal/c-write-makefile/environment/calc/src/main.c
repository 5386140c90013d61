#include <stdio.h>
#include <string.h>
#include "parser.h"

int main(void) {
    char line[4096];
    int status = 0;
    while (fgets(line, sizeof line, stdin)) {
        long v;
        line[strcspn(line, "\n")] = '\0';
        if (evaluate(line, &v) == 0) {
            printf("%ld\n", v);
        } else {
            printf("error\n");
            status = 1;
        }
    }
    return status;
}

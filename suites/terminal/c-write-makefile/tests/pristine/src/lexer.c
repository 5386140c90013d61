#include <ctype.h>
#include "lexer.h"

struct token next_token(const char **text) {
    struct token t = {TOK_END, 0};
    while (isspace((unsigned char)**text))
        (*text)++;
    char c = **text;
    if (c == '\0')
        return t;
    (*text)++;
    switch (c) {
    case '+': t.kind = TOK_PLUS; break;
    case '-': t.kind = TOK_MINUS; break;
    case '*': t.kind = TOK_STAR; break;
    case '/': t.kind = TOK_SLASH; break;
    case '(': t.kind = TOK_LPAREN; break;
    case ')': t.kind = TOK_RPAREN; break;
    default:
        if (isdigit((unsigned char)c)) {
            t.kind = TOK_NUM;
            t.value = c - '0';
            while (isdigit((unsigned char)**text))
                t.value = t.value * 10 + (*(*text)++ - '0');
        } else {
            t.kind = TOK_BAD;
        }
    }
    return t;
}

#include "lexer.h"
#include "parser.h"

struct state {
    const char *text;
    struct token tok;
    int error;
};

static void advance(struct state *s) { s->tok = next_token(&s->text); }

static long expr(struct state *s);

static long primary(struct state *s) {
    if (s->tok.kind == TOK_NUM) {
        long v = s->tok.value;
        advance(s);
        return v;
    }
    if (s->tok.kind == TOK_MINUS) {
        advance(s);
        return -primary(s);
    }
    if (s->tok.kind == TOK_LPAREN) {
        advance(s);
        long v = expr(s);
        if (s->tok.kind != TOK_RPAREN)
            s->error = 1;
        advance(s);
        return v;
    }
    s->error = 1;
    return 0;
}

static long term(struct state *s) {
    long v = primary(s);
    while (s->tok.kind == TOK_STAR || s->tok.kind == TOK_SLASH) {
        enum token_kind op = s->tok.kind;
        advance(s);
        long r = primary(s);
        if (op == TOK_SLASH && r == 0) {
            s->error = 1;
            return 0;
        }
        v = op == TOK_STAR ? v * r : v / r;
    }
    return v;
}

static long expr(struct state *s) {
    long v = term(s);
    while (s->tok.kind == TOK_PLUS || s->tok.kind == TOK_MINUS) {
        enum token_kind op = s->tok.kind;
        advance(s);
        long r = term(s);
        v = op == TOK_PLUS ? v + r : v - r;
    }
    return v;
}

int evaluate(const char *text, long *result) {
    struct state s = {text, {TOK_END, 0}, 0};
    advance(&s);
    long v = expr(&s);
    if (s.error || s.tok.kind != TOK_END)
        return -1;
    *result = v;
    return 0;
}

#ifndef LEXER_H
#define LEXER_H

enum token_kind { TOK_NUM, TOK_PLUS, TOK_MINUS, TOK_STAR, TOK_SLASH, TOK_LPAREN, TOK_RPAREN, TOK_END, TOK_BAD };

struct token {
    enum token_kind kind;
    long value;
};

/* The next token of *text, advancing it. */
struct token next_token(const char **text);

#endif

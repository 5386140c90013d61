#ifndef PARSER_H
#define PARSER_H

/* Evaluates an integer expression with + - * / and parentheses; returns 0 and sets *result, or -1. */
int evaluate(const char *text, long *result);

#endif

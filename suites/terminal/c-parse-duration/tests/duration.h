#ifndef DURATION_H
#define DURATION_H

/*
 * parse_duration("1h30m") == 5400.
 *
 * A duration is one or more parts "<digits><unit>", with the units d (86400 s), h (3600 s),
 * m (60 s) and s (1 s), each used at most once and in that order (d before h before m before s).
 * Returns the total number of seconds, or -1 when the string is not a valid duration: NULL or empty
 * string, a part without digits or without a unit, an unknown unit, a repeated or out-of-order
 * unit, any other character (spaces, signs, upper case), or a total above 2147483647.
 */
long parse_duration(const char *text);

#endif

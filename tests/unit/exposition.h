/*
 * Test support: a checker for pages in the Prometheus text format (0.0.4),
 * as strict as Prometheus's parser and a little stricter, and lookups of
 * sample values.
 */
#ifndef KCM_TEST_EXPOSITION_H
#define KCM_TEST_EXPOSITION_H

#include <stddef.h>

/* NULL if text is a valid page, else what is wrong and the line (a static
 * buffer). Every line ends with a newline and is "# HELP name text",
 * "# TYPE name type" or `name{labels} value`: valid metric and label
 * names, label values with only \\, \" and \n escapes, no label twice, a
 * number, NaN, +Inf or -Inf as value. Every family has exactly one TYPE
 * line and at most one HELP line, both before its samples; its lines stand
 * together; a sample belongs to a family by name (histograms by their
 * _bucket, _sum and _count series); no series comes twice; a histogram's
 * buckets rise in le and count, end at le="+Inf", and that count is its
 * _count. */
const char *expo_check(const char *text);

/* The value of a series written exactly as `series` (name and labels, e.g.
 * `workqueue_depth{name="x"}`), or NAN when the page has none. */
double expo_value(const char *text, const char *series);

/* How many lines start with prefix. */
size_t expo_lines(const char *text, const char *prefix);

#endif

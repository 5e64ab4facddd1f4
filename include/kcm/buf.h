/*
 * buf — a growable byte buffer with a size limit.
 *
 * Every kcm buffer that holds input from outside (HTTP bodies, watch
 * frames, files) has a limit, so hostile input cannot exhaust memory.
 * Invariants: len <= limit; when data is non-NULL, data[len] == '\0', so
 * the content can be read as a C string. A failed append leaves the buffer
 * unchanged.
 */
#ifndef KCM_BUF_H
#define KCM_BUF_H

#include <stddef.h>

#include "kcm/error.h"

struct kcm_buf {
  char *data; /* owned; NULL until the first append */
  size_t len;
  size_t cap;
  size_t limit; /* the most bytes the buffer may hold */
};

#define KCM_BUF_INIT(lim) {NULL, 0, 0, (lim)}

/* Set up an empty buffer; allocates nothing. */
void kcm_buf_init(struct kcm_buf *b, size_t limit);

/* Append n bytes. Returns 0, KCM_ETOOBIG past the limit, or KCM_ENOMEM. */
int kcm_buf_append(struct kcm_buf *b, const void *p, size_t n);
int kcm_buf_append_str(struct kcm_buf *b, const char *s);
int kcm_buf_appendf(struct kcm_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));


/* Empty the buffer and keep its memory for reuse. */
void kcm_buf_reset(struct kcm_buf *b);

/* Free the memory; the buffer is empty and usable again afterwards. */
void kcm_buf_release(struct kcm_buf *b);

/* Hand the content to the caller, who frees it with free(), in memory cut
 * to its size; never NULL on success (an empty buffer gives ""). Returns
 * NULL only when out of memory. The buffer is left empty. */
char *kcm_buf_take(struct kcm_buf *b);

/* Room for item n (0-based) of an array of `size`-byte items that only this
 * function grows: its capacity is implied by its length (0, then the next
 * power of two from 4), so appending n items costs about log2(n) reallocs.
 * Returns the array to use from now on (items itself when it has room), or
 * NULL when out of memory, items then still valid and owned by the caller. */
void *kcm_buf_grow_items(void *items, size_t n, size_t size);
/* Append item to the array `arr` of `n` items grown only this way (both
 * lvalues, updated): 0, or KCM_ENOMEM with the array as it was. */
#define KCM_BUF_PUSH(arr, n, item)                                                        \
  __extension__({                                                                         \
    __typeof__(arr) grown_ = kcm_buf_grow_items((arr), (n), sizeof(*grown_));             \
    int err_ = grown_ ? 0 : KCM_ENOMEM;                                                   \
    if (grown_) {                                                                         \
      (arr) = grown_;                                                                     \
      (arr)[(n)++] = (item);                                                              \
    }                                                                                     \
    err_;                                                                                 \
  })

#endif

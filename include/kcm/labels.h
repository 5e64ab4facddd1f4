/*
 * labels — label sets and label selectors.
 *
 * A struct kcm_labels is an array of key/value pairs sorted by key; its
 * strings come from a struct kcm_intern pool and the set holds one
 * reference to each. A struct kcm_selector is a metav1.LabelSelector
 * compiled into requirements (matchLabels become `In` with one value); it
 * owns plain heap strings. An empty selector matches every label set; a
 * selector that was null in the object matches none.
 */
#ifndef KCM_LABELS_H
#define KCM_LABELS_H

#include <stdbool.h>
#include <stdint.h>

#include "kcm/buf.h"
#include "kcm/intern.h"

struct kcm_label {
  const char *key;   /* pooled */
  const char *value; /* pooled */
};

struct kcm_labels {
  struct kcm_label *items; /* owned array, sorted by key */
  uint32_t n;
};

enum kcm_labels_op {
  KCM_LABELS_IN,
  KCM_LABELS_NOT_IN,
  KCM_LABELS_EXISTS,
  KCM_LABELS_DOES_NOT_EXIST,
};

struct kcm_requirement {
  char *key;
  enum kcm_labels_op op;
  char **values; /* sorted */
  uint32_t nvalues;
};

struct kcm_selector {
  struct kcm_requirement *reqs; /* sorted by key */
  uint32_t n;
  bool nothing; /* the selector was null: matches nothing */
};

/* Make a set of `items` (n pairs of pooled strings, one reference each),
 * taking over the array and its references: sorted by key, and of a key
 * given twice the last pair kept, as a JSON object decodes; n log n
 * comparisons. Returns 0 or KCM_ENOMEM (the items released, *out empty). */
int kcm_labels_adopt(struct kcm_labels *out, struct kcm_intern *pool, struct kcm_label *items,
                     uint32_t n);
/* Sort the *n items of `size` bytes at *items (a heap array, replaced) by
 * the string key() gives, with n log n comparisons; of a key given twice
 * only the last item stays, the others go to drop(item, ctx). Returns 0
 * (*items and *n the sorted set, NULL when empty) or KCM_ENOMEM (nothing
 * changed). Label sets and annotation maps are both made with it. */
int kcm_labels_sort_unique(void **items, uint32_t *n, size_t size,
                           const char *(*key)(const void *item),
                           void (*drop)(void *item, void *ctx), void *ctx);
void kcm_labels_release(struct kcm_labels *l, struct kcm_intern *pool);
/* The value for key, or NULL. */
const char *kcm_labels_get(const struct kcm_labels *l, const char *key);
bool kcm_labels_equal(const struct kcm_labels *a, const struct kcm_labels *b);

/* Building a selector (zeroed to start): add each requirement, with room
 * for its nvalues values, then its values with _add_value (to the last
 * requirement added), then seal it, which sorts the requirements and
 * their values. 0 or KCM_ENOMEM (what was added stays, for _release). */
int kcm_labels_selector_add(struct kcm_selector *s, const char *key, enum kcm_labels_op op,
                            size_t nvalues);
int kcm_labels_selector_add_value(struct kcm_selector *s, const char *v);
void kcm_labels_selector_seal(struct kcm_selector *s);
void kcm_labels_selector_release(struct kcm_selector *s);
bool kcm_labels_matches(const struct kcm_selector *s, const struct kcm_labels *l);
/* True for a selector with no requirements (it would select everything). */
bool kcm_labels_selector_empty(const struct kcm_selector *s);

#endif

/* ptdsim — one binary min-heap, instantiated per element type.
 *
 * PTD_HEAP_DEFINE(name, Type, before) defines, for a strict order
 * `gboolean before(const Type *, const Type *)`:
 *   name_push_at(Type *a, guint *n, Type x)  on a caller-sized array
 *   name_pop_at(Type *a, guint *n) -> Type   (the least; *n > 0)
 *   name_push(GArray *h, Type x) / name_pop(GArray *h) -> Type
 * A macro rather than a comparator pointer: the engine's event queue and the
 * flow solver's heaps are hot loops, and each instance inlines its order. */
#pragma once

#include <glib.h>

#define PTD_HEAP_DEFINE(name, Type, before)                                                                    \
  G_GNUC_UNUSED static inline void name##_push_at(Type *a, guint *n, Type x) {                                 \
    guint i = (*n)++;                                                                                          \
    while (i > 0) {                                                                                            \
      guint p = (i - 1) / 2;                                                                                   \
      if (!before(&x, &a[p]))                                                                                  \
        break;                                                                                                 \
      a[i] = a[p];                                                                                             \
      i = p;                                                                                                   \
    }                                                                                                          \
    a[i] = x;                                                                                                  \
  }                                                                                                            \
  G_GNUC_UNUSED static inline Type name##_pop_at(Type *a, guint *n) {                                          \
    Type top = a[0], last = a[--(*n)];                                                                         \
    guint i = 0, m = *n;                                                                                       \
    if (m == 0)                                                                                                \
      return top;                                                                                              \
    /* bottom-up: the hole down the path of lesser children to a leaf, then                                  \
     * `last` up from there (it belongs near the bottom: few steps), one                                      \
     * comparison a level instead of two */                                                                   \
    for (guint c; (c = 2 * i + 1) < m; i = c) {                                                               \
      if (c + 1 < m)                                                                                           \
        c += (guint)before(&a[c + 1], &a[c]);                                                                  \
      a[i] = a[c];                                                                                             \
    }                                                                                                          \
    while (i > 0) {                                                                                            \
      guint p = (i - 1) / 2;                                                                                   \
      if (!before(&last, &a[p]))                                                                               \
        break;                                                                                                 \
      a[i] = a[p];                                                                                             \
      i = p;                                                                                                   \
    }                                                                                                          \
    a[i] = last;                                                                                               \
    return top;                                                                                                \
  }                                                                                                            \
  G_GNUC_UNUSED static inline void name##_push(GArray *h, Type x) {                                            \
    guint n = h->len;                                                                                          \
    g_array_set_size(h, n + 1);                                                                                \
    name##_push_at((Type *)(void *)h->data, &n, x);                                                            \
  }                                                                                                            \
  G_GNUC_UNUSED static inline Type name##_pop(GArray *h) {                                                     \
    guint n = h->len;                                                                                          \
    Type top = name##_pop_at((Type *)(void *)h->data, &n);                                                     \
    g_array_set_size(h, n);                                                                                    \
    return top;                                                                                                \
  }

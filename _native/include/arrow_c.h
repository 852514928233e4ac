/* Decoded columns handed to pyarrow through the Arrow C data interface: the ArrowArray tree of
 * one record batch, pointing at buffers the decoder already filled (no copy), imported with the
 * batch's schema in one call. pyarrow's Python constructors (a py_buffer per buffer, an array
 * per column, the batch) cost ~20 us a batch, more than decoding a producer's 16 KiB batch.
 *
 * One allocation holds the whole tree: the arrays, their buffer and child pointer lists and the
 * variadic buffer sizes of binary_view columns. It keeps `owner` (the Python object whose
 * buffers the arrays point into) referenced until the consumer releases the top array. Child
 * arrays live in the same block and are released with it: the only consumer is pyarrow's
 * importer, which keeps children in place and releases the top array once every buffer it
 * imported is gone (possibly on a thread of its own, hence the GIL is taken to drop `owner`). */
#ifndef SEGLOG_ARROW_C_H
#define SEGLOG_ARROW_C_H

#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif

/* Room for the widest batch decode_columns makes: the top struct array; offset, timestamp,
 * timestampType, leaderEpoch, key, value and headers; the headers' struct entries and their
 * key and value arrays. */
#define SEGLOG_AC_ARRAYS 12
#define SEGLOG_AC_BUFFERS 40
#define SEGLOG_AC_SIZES 8

typedef struct {
    struct ArrowArray arrays[SEGLOG_AC_ARRAYS];
    struct ArrowArray *children[SEGLOG_AC_ARRAYS];
    const void *buffers[SEGLOG_AC_BUFFERS];
    int64_t sizes[SEGLOG_AC_SIZES];
    int n_arrays, n_children, n_buffers, n_sizes;
    PyObject *owner;
} seglog_ac_block;

static void seglog_ac_release_child(struct ArrowArray *a) {
    /* Freed with the block when the top array is released. */
    a->release = NULL;
}

static void seglog_ac_release(struct ArrowArray *a) {
    seglog_ac_block *b = (seglog_ac_block *)a->private_data;
    PyObject *owner = b->owner;
    a->release = NULL;
    free(b);
    if (owner != NULL && Py_IsInitialized()) {
        PyGILState_STATE g = PyGILState_Ensure();
        Py_DECREF(owner);
        PyGILState_Release(g);
    }
}

/* A new array in the block: `n_buffers` buffer slots (filled by the caller) and room for
 * `n_children` children (attached with seglog_ac_child). NULL when the block is full. */
static struct ArrowArray *seglog_ac_array(seglog_ac_block *b, int64_t length, int64_t null_count,
                                          int n_buffers, int n_children) {
    struct ArrowArray *a;
    if (b->n_arrays >= SEGLOG_AC_ARRAYS || b->n_buffers + n_buffers > SEGLOG_AC_BUFFERS ||
        b->n_children + n_children > SEGLOG_AC_ARRAYS)
        return NULL;
    a = &b->arrays[b->n_arrays++];
    a->length = length;
    a->null_count = null_count;
    a->offset = 0;
    a->n_buffers = n_buffers;
    a->buffers = &b->buffers[b->n_buffers];
    b->n_buffers += n_buffers;
    a->n_children = 0;
    a->children = n_children ? &b->children[b->n_children] : NULL;
    b->n_children += n_children;
    a->dictionary = NULL;
    a->release = seglog_ac_release_child;
    a->private_data = NULL;
    return a;
}

static void seglog_ac_child(struct ArrowArray *parent, struct ArrowArray *child) {
    parent->children[parent->n_children++] = child;
}

#endif

/* The common case of encode_batch, in two passes over the columns and no Python calls:
 * values and keys are the item arrays of exact lists/tuples whose items are exact bytes or
 * None (keys may be absent), timestamps an int64 array or one value, no headers. Anything else
 * (a bytearray, another type, a size over Kafka's limits) makes the sizing pass answer
 * SEGLOG_SEQ_FALLBACK and the caller runs the general encoder, which raises the right error.
 *
 * The caller holds the GIL from the sizing pass to the end of the writing pass and runs no
 * code in between that could execute Python code (allocating a bytes object cannot: bytes are
 * not tracked by the cycle collector), so the items stay what the sizing pass saw. */
#ifndef SEGLOG_ENCODE_SEQ_H
#define SEGLOG_ENCODE_SEQ_H
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "kbytes.h"

#define SEGLOG_SEQ_OK 0
#define SEGLOG_SEQ_FALLBACK 1

/* Item i's length (-1 for None) and data, or -2 if it is not exact bytes or None. */
static inline Py_ssize_t seglog_seq_item(PyObject *const *items, Py_ssize_t i, const uint8_t **p) {
    PyObject *o = items[i];
    if (o == Py_None) return -1;
    if (!PyBytes_CheckExact(o)) return -2;
    *p = (const uint8_t *)PyBytes_AS_STRING(o);
    return PyBytes_GET_SIZE(o);
}

/* The value of an int as a C long, for the timestamp column: on CPython before
 * 3.12 an int of up to two 30-bit digits (every millisecond timestamp) is read from its digits
 * directly, as PyLong_AsLong would but without its general loop; anything else goes to
 * PyLong_AsLong (which sets OverflowError and returns -1 when the int is too large). */
static inline long seglog_seq_long(PyObject *o) {
#if PY_VERSION_HEX < 0x030C0000 && PyLong_SHIFT == 30 && LONG_MAX == INT64_MAX
    if (!PyLong_CheckExact(o)) return PyLong_AsLong(o);
    const digit *d = ((PyLongObject *)o)->ob_digit;
    switch (Py_SIZE(o)) {
    case 0: return 0;
    case 1: return (long)d[0];
    case -1: return -(long)d[0];
    case 2: return (long)(((uint64_t)d[1] << PyLong_SHIFT) | d[0]);
    case -2: return -(long)(((uint64_t)d[1] << PyLong_SHIFT) | d[0]);
    default: break;
    }
#endif
    return PyLong_AsLong(o);
}

static inline int64_t seglog_seq_ts(const int64_t *ts, int64_t scalar, Py_ssize_t i) {
    return ts != NULL ? ts[i] : scalar;
}

/* Pass 1: each record's body size into sizes[i], the records' total size and the largest
 * timestamp. limit bounds the total (INT32_MAX less the batch header). */
static int seglog_seq_size(PyObject *const *vals, PyObject *const *keys, const int64_t *ts,
                           int64_t ts_scalar, Py_ssize_t n, int32_t *sizes, int64_t limit,
                           int64_t *records_size, int64_t *max_ts) {
    const uint8_t *unused;
    int64_t base_ts = seglog_seq_ts(ts, ts_scalar, 0), mx = base_ts, total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t t = seglog_seq_ts(ts, ts_scalar, i);
        if (t > mx) mx = t;
        Py_ssize_t vlen = seglog_seq_item(vals, i, &unused);
        Py_ssize_t klen = keys != NULL ? seglog_seq_item(keys, i, &unused) : -1;
        if (vlen < -1 || klen < -1 || vlen > INT32_MAX || klen > INT32_MAX) return SEGLOG_SEQ_FALLBACK;
        int64_t body = 2 + kb_varlong_size(kb_wrap_sub(t, base_ts)) + kb_varint_size((int32_t)i)
                       + kb_varint_size((int32_t)klen) + (klen > 0 ? klen : 0)
                       + kb_varint_size((int32_t)vlen) + (vlen > 0 ? vlen : 0);
        if (body > INT32_MAX) return SEGLOG_SEQ_FALLBACK;
        sizes[i] = (int32_t)body;
        total += kb_varint_size((int32_t)body) + body;
        if (total > limit) return SEGLOG_SEQ_FALLBACK;
    }
    *records_size = total;
    *max_ts = mx;
    return SEGLOG_SEQ_OK;
}

/* Pass 2: the records, from the sizes of pass 1, at p; returns the end. */
static uint8_t *seglog_seq_write(PyObject *const *vals, PyObject *const *keys, const int64_t *ts,
                                 int64_t ts_scalar, Py_ssize_t n, const int32_t *sizes, uint8_t *p) {
    int64_t base_ts = seglog_seq_ts(ts, ts_scalar, 0);
    const uint8_t *kp = NULL, *vp = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t vlen = seglog_seq_item(vals, i, &vp);
        Py_ssize_t klen = keys != NULL ? seglog_seq_item(keys, i, &kp) : -1;
        p = kb_write_varint(p, sizes[i]);
        *p++ = 0;  /* attributes */
        p = kb_write_varlong(p, kb_wrap_sub(seglog_seq_ts(ts, ts_scalar, i), base_ts));
        p = kb_write_varint(p, (int32_t)i);
        p = kb_write_varint(p, (int32_t)klen);
        if (klen > 0) { memcpy(p, kp, (size_t)klen); p += klen; }
        p = kb_write_varint(p, (int32_t)vlen);
        if (vlen > 0) { memcpy(p, vp, (size_t)vlen); p += vlen; }
        *p++ = 0;  /* header count */
    }
    return p;
}
#endif

/* The common case of encode_batch, in one pass over the columns and no Python calls:
 * values and keys are the item arrays of exact lists/tuples whose items are exact bytes or
 * None (keys may be absent), timestamps an int64 array or one value, no headers. Anything else
 * (a bytearray, another type, a size over Kafka's limits) makes it answer SEGLOG_SEQ_FALLBACK
 * and the caller runs the general encoder, which raises the right error.
 *
 * Nothing in the pass can execute Python code (allocating or resizing a bytes object cannot:
 * bytes are not tracked by the cycle collector), so the items stay what they were when the
 * caller took the item arrays. */
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

/* The output of an encode: a bytes object made here, or the caller's bytearray (`into`), which
 * keeps its allocation from one batch to the next. Resizing either cannot run Python code:
 * neither is tracked by the cycle collector. */
static inline uint8_t *seglog_seq_data(PyObject *buf) {
    return (uint8_t *)(PyByteArray_CheckExact(buf) ? PyByteArray_AS_STRING(buf) : PyBytes_AS_STRING(buf));
}

/* Resize *buf to n bytes: 0, or -1 with MemoryError set and *buf released (NULL). */
static inline int seglog_seq_resize(PyObject **buf, Py_ssize_t n) {
    if (!PyByteArray_CheckExact(*buf))
        return _PyBytes_Resize(buf, n);                /* frees and clears *buf on failure */
    if (PyByteArray_Resize(*buf, n) == 0)
        return 0;
    Py_CLEAR(*buf);
    return -1;
}

/* One pass over the columns: each item is checked, then its record is written at once into
 * *out, which holds `head` bytes for the batch header in front and grows as needed (from a
 * guess that every record is like the first, at most 16 MiB) and is cut to size at the end.
 * *out is a new bytes object, or `into` (a bytearray, resized to fit; NULL for bytes), with a
 * new reference either way. Returns SEGLOG_SEQ_OK; SEGLOG_SEQ_FALLBACK (and no *out) for an
 * item that is not exact bytes or None or records over `limit` bytes in all; -1 with
 * MemoryError set when memory runs out. */
static int seglog_seq_encode(PyObject *const *vals, PyObject *const *keys, const int64_t *ts,
                             int64_t ts_scalar, Py_ssize_t n, Py_ssize_t head, int64_t limit,
                             PyObject *into, PyObject **out, int64_t *max_ts) {
    const uint8_t *kp = NULL, *vp = NULL;
    int64_t base_ts = seglog_seq_ts(ts, ts_scalar, 0), mx = base_ts;
    Py_ssize_t v0 = seglog_seq_item(vals, 0, &vp);
    Py_ssize_t k0 = keys != NULL ? seglog_seq_item(keys, 0, &kp) : -1;
    if (v0 < -1 || k0 < -1) return SEGLOG_SEQ_FALLBACK;
    int64_t guess = (int64_t)n * ((v0 > 0 ? v0 : 0) + (k0 > 0 ? k0 : 0) + 24);
    if (guess > ((int64_t)16 << 20)) guess = (int64_t)16 << 20;
    Py_ssize_t cap = head + (Py_ssize_t)guess, used = head;
    PyObject *buf;
    if (into != NULL) {
        buf = into;
        Py_INCREF(buf);
        if (seglog_seq_resize(&buf, cap) < 0) return -1;
    } else {
        buf = PyBytes_FromStringAndSize(NULL, cap);
        if (buf == NULL) return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t t = seglog_seq_ts(ts, ts_scalar, i);
        if (t > mx) mx = t;
        Py_ssize_t vlen = seglog_seq_item(vals, i, &vp);
        Py_ssize_t klen = keys != NULL ? seglog_seq_item(keys, i, &kp) : -1;
        if (vlen < -1 || klen < -1 || vlen > INT32_MAX || klen > INT32_MAX) goto fallback;
        int64_t delta = kb_wrap_sub(t, base_ts);
        int64_t body = 2 + kb_varlong_size(delta) + kb_varint_size((int32_t)i)
                       + kb_varint_size((int32_t)klen) + (klen > 0 ? klen : 0)
                       + kb_varint_size((int32_t)vlen) + (vlen > 0 ? vlen : 0);
        if (body > INT32_MAX) goto fallback;
        int64_t need = kb_varint_size((int32_t)body) + body;
        if ((int64_t)(used - head) + need > limit) goto fallback;
        if (used + need > cap) {
            int64_t grown = (int64_t)cap + cap / 2;
            if (grown < used + need) grown = used + need;
            if (grown > head + limit) grown = head + limit;
            if (seglog_seq_resize(&buf, (Py_ssize_t)grown) < 0) return -1;   /* buf released */
            cap = (Py_ssize_t)grown;
        }
        uint8_t *p = seglog_seq_data(buf) + used;
        p = kb_write_varint(p, (int32_t)body);
        *p++ = 0;  /* attributes */
        p = kb_write_varlong(p, delta);
        p = kb_write_varint(p, (int32_t)i);
        p = kb_write_varint(p, (int32_t)klen);
        if (klen > 0) { memcpy(p, kp, (size_t)klen); p += klen; }
        p = kb_write_varint(p, (int32_t)vlen);
        if (vlen > 0) { memcpy(p, vp, (size_t)vlen); p += vlen; }
        *p = 0;  /* header count */
        used += (Py_ssize_t)need;
    }
    if (used != cap && seglog_seq_resize(&buf, used) < 0) return -1;
    *out = buf;
    *max_ts = mx;
    return SEGLOG_SEQ_OK;
fallback:
    Py_DECREF(buf);
    return SEGLOG_SEQ_FALLBACK;
}
#endif

/* ragpulse.collector._native: the per-span loop of ragpulse.collector.split in C.
 *
 * split.py is the reference and the fallback (RAGPULSE_PURE_PYTHON=1, or no compiler at install);
 * this module computes exactly what its per-scope loop computes, on the same bytes:
 *
 *   scan_spans(buf, start, end, ri, si, latest_ns, oldest_ns, check_rag, traces, rag, rejected, head)
 *
 * walks the frames of one ScopeSpans body buf[start:end]: each span (tag 0x12) is checked as
 * split._check_span checks it, grouped into ``traces`` (trace id -> [span count, [ri, si, frame
 * start, frame end], ...], a run extended when the span follows the trace's previous one), its
 * trace added to ``rag`` when it holds a RAG marker (split._is_rag_span, searched from the
 * attributes on for spans laid out as SDKs write them); a rejected span adds 1 to
 * ``rejected[reason]``; any other field is appended, as bytes, to head[0] (scope) or head[1]
 * (schema_url and later). Returns the number of spans. Broken framing raises the
 * MalformedRequest given to configure(), with split.py's messages. Every read is bounded by the
 * buffer's length (the Python code's IndexError is "truncated message" here).
 *
 *   partitions_for_keys(keys, partitions)   common.kafka.partitions_for_keys: FNV-1a 32, as Go's
 *                                           int32, truncated remainder, absolute value.
 *   configure(needles, malformed)           split._NEEDLES and the exception class, once.
 *
 * References: opentelemetry-proto trace/v1/trace.proto; https://protobuf.dev/programming-guides/encoding/
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const unsigned char *bytes;
    Py_ssize_t len;
    Py_ssize_t offset; /* of the needle in the marker */
    int whole;         /* the marker is the needle */
} Marker;

typedef struct {
    const unsigned char *bytes;
    Py_ssize_t len;
    Marker *markers;
    Py_ssize_t n_markers;
} Needle;

static PyObject *g_config = NULL; /* the needles tuple: keeps the marker bytes alive */
static PyObject *g_malformed = NULL;
static Needle *g_needles = NULL;
static Py_ssize_t g_n_needles = 0;

/* Error codes of the walk; E_NONE is success. */
enum {
    E_NONE = 0,
    E_TRUNCATED,      /* the Python code's IndexError */
    E_VARINT_LONG,
    E_WIRE,
    E_FIELD_OVERRUN,
    E_SPAN_OVERRUN,
    E_SPAN_FIELD_OVERRUN,
    E_PYTHON,         /* a Python exception is set already */
};

typedef struct {
    const unsigned char *buf;
    Py_ssize_t len;
    int err;
    uint64_t wire; /* for E_WIRE */
} Walk;

static void raise_walk(const Walk *w)
{
    switch (w->err) {
    case E_TRUNCATED:
        PyErr_SetString(g_malformed, "truncated message");
        break;
    case E_VARINT_LONG:
        PyErr_SetString(g_malformed, "varint too long");
        break;
    case E_WIRE:
        PyErr_Format(g_malformed, "unsupported wire type %d", (int)w->wire);
        break;
    case E_FIELD_OVERRUN:
        PyErr_SetString(g_malformed, "field overruns its message");
        break;
    case E_SPAN_OVERRUN:
        PyErr_SetString(g_malformed, "span overruns its scope");
        break;
    case E_SPAN_FIELD_OVERRUN:
        PyErr_SetString(g_malformed, "span field overruns the span");
        break;
    default:
        break;
    }
}

/* wire.read_varint: up to 10 bytes. *value holds the low 64 bits (exact wire type bits); a value
 * past 64 bits (a 10th byte above 1) sets *overflow: as a length it exceeds any remainder, as a
 * tag its field number is past any real one, as the Python int is. */
static int read_varint_x(Walk *w, Py_ssize_t pos, uint64_t *value, Py_ssize_t *after, int *overflow)
{
    *overflow = 0;
    if (pos < 0 || pos >= w->len) {
        w->err = E_TRUNCATED;
        return -1;
    }
    unsigned b = w->buf[pos];
    if (b < 0x80) {
        *value = b;
        *after = pos + 1;
        return 0;
    }
    uint64_t result = b & 0x7F;
    int shift = 7;
    pos += 1;
    for (;;) {
        if (pos >= w->len) {
            w->err = E_TRUNCATED;
            return -1;
        }
        b = w->buf[pos++];
        uint64_t part = b & 0x7F;
        if (shift == 63 && part > 1)
            *overflow = 1;
        result |= part << shift;
        if (b < 0x80) {
            *value = result;
            *after = pos;
            return 0;
        }
        shift += 7;
        if (shift > 63) {
            w->err = E_VARINT_LONG;
            return -1;
        }
    }
}

/* A varint used as a length or a number compared with bounds: saturated past 64 bits. */
static int read_varint(Walk *w, Py_ssize_t pos, uint64_t *value, Py_ssize_t *after)
{
    int overflow;
    if (read_varint_x(w, pos, value, after, &overflow) < 0)
        return -1;
    if (overflow)
        *value = UINT64_MAX;
    return 0;
}

/* One field, as split._fields yields it. */
typedef struct {
    uint64_t number; /* UINT64_MAX past 64 bits */
    unsigned wire;
    Py_ssize_t vstart, vend; /* the value's bytes (a length-delimited value's, after its length) */
} Field;

/* One step of split._fields at pos (< end). */
static int next_field(Walk *w, Py_ssize_t pos, Py_ssize_t end, Field *f)
{
    uint64_t tag, value;
    int overflow;
    if (read_varint_x(w, pos, &tag, &pos, &overflow) < 0)
        return -1;
    unsigned wire = (unsigned)(tag & 7);
    Py_ssize_t stop;
    if (wire == 2) {
        if (read_varint(w, pos, &value, &pos) < 0)
            return -1;
        if (value > (uint64_t)(end - pos) || pos > end) {
            w->err = E_FIELD_OVERRUN;
            return -1;
        }
        stop = pos + (Py_ssize_t)value;
    } else if (wire == 0) {
        if (read_varint(w, pos, &value, &stop) < 0)
            return -1;
    } else if (wire == 1) {
        stop = pos + 8;
    } else if (wire == 5) {
        stop = pos + 4;
    } else {
        w->err = E_WIRE;
        w->wire = wire;
        return -1;
    }
    if (stop > end) {
        w->err = E_FIELD_OVERRUN;
        return -1;
    }
    f->number = overflow ? UINT64_MAX : tag >> 3;
    f->wire = wire;
    f->vstart = pos;
    f->vend = stop;
    return 0;
}

static inline uint64_t le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* split._check_span: 0 if the span's ids and times are acceptable, else the reason's index; -1
 * on broken framing (w->err). *stop is where the walk stopped: with ``ordered``, the first
 * field numbered 9 or more (the attributes), where the RAG markers are looked for from. */
static int check_span(Walk *w, Py_ssize_t pos, Py_ssize_t end, uint64_t lo, uint64_t hi,
                      int ordered, uint64_t oldest, Py_ssize_t *stop)
{
    const unsigned char *buf = w->buf;
    const unsigned char *span_id = NULL;
    Py_ssize_t span_id_len = 0, parent_len = 0;
    uint64_t start = 0, finish = 0;
    if (ordered && pos + 10 <= end && buf[pos] == 0x12 && buf[pos + 1] == 0x08) {
        span_id = buf + pos + 2;
        span_id_len = 8;
        pos += 10;
    }
    while (pos < end) {
        unsigned tag = buf[pos];
        if (ordered && tag >= 0x48)
            break;
        if (tag == 0x39 || tag == 0x41) { /* start_time_unix_nano, end_time_unix_nano: fixed64 */
            if (pos + 9 > end) {
                w->err = E_SPAN_FIELD_OVERRUN;
                return -1;
            }
            if (tag == 0x39)
                start = le64(buf + pos + 1);
            else
                finish = le64(buf + pos + 1);
            pos += 9;
            continue;
        }
        if (tag == 0x30) { /* kind, as a one-byte varint */
            if (pos + 1 >= w->len) {
                w->err = E_TRUNCATED;
                return -1;
            }
            if (buf[pos + 1] < 0x80) {
                pos += 2;
                continue;
            }
        }
        if (tag == 0x12 || tag == 0x22 || tag == 0x2A || tag == 0x1A || tag == 0x0A) {
            uint64_t n;
            Py_ssize_t vstart;
            if (read_varint(w, pos + 1, &n, &vstart) < 0)
                return -1;
            if (vstart > end || n > (uint64_t)(end - vstart)) {
                w->err = E_SPAN_FIELD_OVERRUN;
                return -1;
            }
            pos = vstart + (Py_ssize_t)n;
            if (tag == 0x12) {
                span_id = buf + vstart;
                span_id_len = (Py_ssize_t)n;
            } else if (tag == 0x22) {
                parent_len = (Py_ssize_t)n;
            }
            continue;
        }
        Field f;
        if (next_field(w, pos, end, &f) < 0)
            return -1;
        pos = f.vend;
    }
    if (pos > end) {
        w->err = E_SPAN_FIELD_OVERRUN;
        return -1;
    }
    *stop = pos;
    if (span_id == NULL || span_id_len != 8 || le64(span_id) == 0)
        return 2;
    if (parent_len != 0 && parent_len != 8)
        return 3;
    if (start < lo || start > hi)
        return 4;
    if (finish < lo || finish > hi)
        return 5;
    if (start < oldest)
        return 6;
    return 0;
}

/* buf[i] with Python's negative indexing (split._is_rag_span may look a few bytes before a
 * span's start; never before the request's start in practice, but the same bytes either way). */
static inline unsigned at(const Walk *w, Py_ssize_t i)
{
    return w->buf[i < 0 ? i + w->len : i];
}

/* split._is_rag_span over buf[start:end]. */
static int is_rag_span(const Walk *w, Py_ssize_t start, Py_ssize_t end)
{
    const unsigned char *buf = w->buf;
    for (Py_ssize_t g = 0; g < g_n_needles; g++) {
        const Needle *nd = &g_needles[g];
        Py_ssize_t from = start;
        for (;;) {
            if (from >= end || end - from < nd->len)
                break;
            const unsigned char *hit = memmem(buf + from, (size_t)(end - from), nd->bytes, (size_t)nd->len);
            if (hit == NULL)
                break;
            Py_ssize_t i = hit - buf;
            for (Py_ssize_t m = 0; m < nd->n_markers; m++) {
                const Marker *mk = &nd->markers[m];
                Py_ssize_t k = i - mk->offset;
                if (!mk->whole && (k < start || k + mk->len > w->len || memcmp(buf + k, mk->bytes, (size_t)mk->len) != 0))
                    continue;
                unsigned length = at(w, k - 1);
                if ((Py_ssize_t)length >= mk->len && length < 0x80 && k + (Py_ssize_t)length <= end) {
                    unsigned tag = at(w, k - 2);
                    if (tag == 0x12)
                        return 1;
                    if (tag == 0x0A) {
                        Py_ssize_t j = k - 4; /* skip the KeyValue length varint backwards */
                        if (at(w, k - 3) < 0x80) {
                            Py_ssize_t limit = j - 4;
                            while (j > limit && at(w, j) >= 0x80)
                                j -= 1;
                            unsigned t = at(w, j);
                            if (t == 0x4A || t == 0x1A)
                                return 1;
                        }
                    }
                }
            }
            from = i + 1;
        }
    }
    return 0;
}

/* traces[trace_id]: count + 1 and the span's run (split._split's grouping). */
static int add_span(PyObject *traces, PyObject *key, Py_ssize_t ri, Py_ssize_t si, Py_ssize_t frame,
                    Py_ssize_t sp_end)
{
    PyObject *entry = PyDict_GetItemWithError(traces, key); /* borrowed */
    if (entry == NULL) {
        if (PyErr_Occurred())
            return -1;
        PyObject *new_entry = Py_BuildValue("[i[nnnn]]", 1, ri, si, frame, sp_end);
        if (new_entry == NULL)
            return -1;
        int rc = PyDict_SetItem(traces, key, new_entry);
        Py_DECREF(new_entry);
        return rc;
    }
    if (!PyList_Check(entry) || PyList_GET_SIZE(entry) < 2) {
        PyErr_SetString(PyExc_TypeError, "traces entries must be [count, run, ...] lists");
        return -1;
    }
    Py_ssize_t count = PyLong_AsSsize_t(PyList_GET_ITEM(entry, 0));
    if (count == -1 && PyErr_Occurred())
        return -1;
    PyObject *new_count = PyLong_FromSsize_t(count + 1);
    if (new_count == NULL)
        return -1;
    PyList_SetItem(entry, 0, new_count); /* steals */
    PyObject *run = PyList_GET_ITEM(entry, PyList_GET_SIZE(entry) - 1);
    if (!PyList_Check(run) || PyList_GET_SIZE(run) != 4) {
        PyErr_SetString(PyExc_TypeError, "runs must be [ri, si, start, end] lists");
        return -1;
    }
    Py_ssize_t last_end = PyLong_AsSsize_t(PyList_GET_ITEM(run, 3));
    if (last_end == -1 && PyErr_Occurred())
        return -1;
    if (last_end == frame) { /* right after the trace's previous span */
        PyObject *new_end = PyLong_FromSsize_t(sp_end);
        if (new_end == NULL)
            return -1;
        PyList_SetItem(run, 3, new_end);
        return 0;
    }
    PyObject *new_run = Py_BuildValue("[nnnn]", ri, si, frame, sp_end);
    if (new_run == NULL)
        return -1;
    int rc = PyList_Append(entry, new_run);
    Py_DECREF(new_run);
    return rc;
}

#define N_REASONS 7

static PyObject *scan_spans(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end, ri, si;
    unsigned long long latest, oldest;
    int check_rag;
    PyObject *traces, *rag, *rejected, *head;
    if (!PyArg_ParseTuple(args, "y*nnnnKKpO!O!O!O!:scan_spans", &view, &start, &end, &ri, &si, &latest,
                          &oldest, &check_rag, &PyDict_Type, &traces, &PySet_Type, &rag, &PyList_Type,
                          &rejected, &PyTuple_Type, &head))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t counts[N_REASONS] = {0};
    Py_ssize_t total = 0;
    Walk w = {(const unsigned char *)view.buf, view.len, E_NONE, 0};
    const unsigned char *buf = w.buf;
    const uint64_t lo = 946684800ULL * 1000000000ULL; /* split.MIN_START_NS */

    if (g_malformed == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ragpulse.collector._native: configure() was not called");
        goto done;
    }
    if (PyList_GET_SIZE(rejected) != N_REASONS || PyTuple_GET_SIZE(head) != 2 ||
        !PyList_Check(PyTuple_GET_ITEM(head, 0)) || !PyList_Check(PyTuple_GET_ITEM(head, 1))) {
        PyErr_SetString(PyExc_TypeError, "rejected must be a list of 7 counts, head a tuple of two lists");
        goto done;
    }
    if (start < 0 || end > w.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "the scope's range is outside the buffer");
        goto done;
    }
    Py_ssize_t pos = start;
    while (pos < end) {
        if (buf[pos] != 0x12) { /* scope, schema_url or an unknown field: kept verbatim */
            Field f;
            if (next_field(&w, pos, end, &f) < 0)
                goto broken;
            PyObject *frame = PyBytes_FromStringAndSize((const char *)buf + pos, f.vend - pos);
            if (frame == NULL)
                goto done;
            int rc = PyList_Append(PyTuple_GET_ITEM(head, f.number > 2), frame);
            Py_DECREF(frame);
            if (rc < 0)
                goto done;
            pos = f.vend;
            continue;
        }
        Py_ssize_t sframe = pos;
        uint64_t length;
        Py_ssize_t sp_start;
        if (read_varint(&w, pos + 1, &length, &sp_start) < 0)
            goto broken;
        if (sp_start > end || length > (uint64_t)(end - sp_start)) {
            w.err = E_SPAN_OVERRUN;
            goto broken;
        }
        Py_ssize_t sp_end = sp_start + (Py_ssize_t)length;
        pos = sp_end;
        total += 1;
        const unsigned char *trace_id;
        int why;
        Py_ssize_t stop = sp_start, rag_from;
        if (length >= 18 && buf[sp_start] == 0x0A && buf[sp_start + 1] == 0x10) {
            trace_id = buf + sp_start + 2;
            why = check_span(&w, sp_start + 18, sp_end, lo, latest, 1, oldest, &stop);
            if (why < 0)
                goto broken;
            rag_from = stop;
        } else { /* another field first: the trace id is the last field 1 (protobuf merging) */
            trace_id = NULL;
            Py_ssize_t id_len = 0, p = sp_start;
            while (p < sp_end) {
                Field f;
                if (next_field(&w, p, sp_end, &f) < 0)
                    goto broken;
                if (f.number == 1 && f.wire == 2) {
                    trace_id = buf + f.vstart;
                    id_len = f.vend - f.vstart;
                }
                p = f.vend;
            }
            if (trace_id == NULL || id_len != 16) {
                counts[1] += 1;
                continue;
            }
            why = check_span(&w, sp_start, sp_end, lo, latest, 0, oldest, &stop);
            if (why < 0)
                goto broken;
            rag_from = sp_start;
        }
        if (le64(trace_id) == 0 && le64(trace_id + 8) == 0) {
            counts[1] += 1;
            continue;
        }
        if (why) {
            counts[why] += 1;
            continue;
        }
        PyObject *key = PyBytes_FromStringAndSize((const char *)trace_id, 16);
        if (key == NULL)
            goto done;
        if (add_span(traces, key, ri, si, sframe, sp_end) < 0) {
            Py_DECREF(key);
            goto done;
        }
        if (check_rag) {
            int known = PySet_Contains(rag, key);
            if (known < 0 || (!known && is_rag_span(&w, rag_from, sp_end) && PySet_Add(rag, key) < 0)) {
                Py_DECREF(key);
                goto done;
            }
        }
        Py_DECREF(key);
    }
    result = PyLong_FromSsize_t(total);
    goto done;
broken:
    raise_walk(&w);
done:
    /* Counted even when the walk broke off: the caller discards the whole request then. */
    for (int r = 1; r < N_REASONS; r++) {
        if (!counts[r])
            continue;
        PyObject *old = PyList_GET_ITEM(rejected, r);
        Py_ssize_t value = PyLong_AsSsize_t(old);
        PyObject *now = value == -1 && PyErr_Occurred() ? NULL : PyLong_FromSsize_t(value + counts[r]);
        if (now == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SetItem(rejected, r, now);
    }
    PyBuffer_Release(&view);
    return result;
}

static PyObject *partitions_for_keys(PyObject *self, PyObject *args)
{
    PyObject *keys;
    Py_ssize_t partitions;
    if (!PyArg_ParseTuple(args, "O!n:partitions_for_keys", &PyList_Type, &keys, &partitions))
        return NULL;
    if (partitions <= 0) {
        PyErr_SetString(PyExc_ValueError, "partitions must be positive");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        char *data;
        Py_ssize_t len;
        if (PyBytes_AsStringAndSize(key, &data, &len) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        uint32_t h = 0x811C9DC5u;
        for (Py_ssize_t j = 0; j < len; j++)
            h = (h ^ (unsigned char)data[j]) * 0x01000193u;
        int64_t signed_h = (int32_t)h;   /* Go's int32 */
        int64_t r = signed_h % partitions; /* Go's (and C's) truncated remainder */
        PyObject *p = PyLong_FromLongLong(r < 0 ? -r : r);
        if (p == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, p);
    }
    return out;
}

static void free_needles(void)
{
    if (g_needles != NULL) {
        for (Py_ssize_t g = 0; g < g_n_needles; g++)
            PyMem_Free(g_needles[g].markers);
        PyMem_Free(g_needles);
    }
    g_needles = NULL;
    g_n_needles = 0;
}

/* configure(needles, malformed): needles as split._NEEDLES, ((needle, ((marker, offset, whole),
 * ...)), ...); malformed the exception class for broken framing. */
static PyObject *configure(PyObject *self, PyObject *args)
{
    PyObject *needles, *malformed;
    if (!PyArg_ParseTuple(args, "O!O:configure", &PyTuple_Type, &needles, &malformed))
        return NULL;
    if (!PyExceptionClass_Check(malformed)) {
        PyErr_SetString(PyExc_TypeError, "malformed must be an exception class");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(needles);
    Needle *parsed = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Needle));
    if (parsed == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t g = 0; g < n; g++) {
        PyObject *item = PyTuple_GET_ITEM(needles, g);
        PyObject *needle, *markers;
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "SO!", &needle, &PyTuple_Type, &markers))
            goto bad;
        parsed[g].bytes = (const unsigned char *)PyBytes_AS_STRING(needle);
        parsed[g].len = PyBytes_GET_SIZE(needle);
        if (parsed[g].len == 0)
            goto bad;
        Py_ssize_t m = PyTuple_GET_SIZE(markers);
        parsed[g].markers = PyMem_Calloc((size_t)(m ? m : 1), sizeof(Marker));
        if (parsed[g].markers == NULL)
            goto bad;
        parsed[g].n_markers = m;
        for (Py_ssize_t k = 0; k < m; k++) {
            PyObject *marker;
            Py_ssize_t offset;
            int whole;
            PyObject *spec = PyTuple_GET_ITEM(markers, k);
            if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "Snp", &marker, &offset, &whole))
                goto bad;
            parsed[g].markers[k] = (Marker){(const unsigned char *)PyBytes_AS_STRING(marker),
                                            PyBytes_GET_SIZE(marker), offset, whole};
        }
    }
    free_needles();
    g_needles = parsed;
    g_n_needles = n;
    Py_INCREF(needles);
    Py_XSETREF(g_config, needles);
    Py_INCREF(malformed);
    Py_XSETREF(g_malformed, malformed);
    Py_RETURN_NONE;
bad:
    for (Py_ssize_t g = 0; g < n; g++)
        PyMem_Free(parsed[g].markers);
    PyMem_Free(parsed);
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "needles must be ((needle, ((marker, offset, whole), ...)), ...)");
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan_spans", scan_spans, METH_VARARGS, "The spans of one ScopeSpans body: see split.py."},
    {"partitions_for_keys", partitions_for_keys, METH_VARARGS,
     "common.kafka.partitions_for_keys: otelcol's partition of each key."},
    {"configure", configure, METH_VARARGS, "The RAG needles and the MalformedRequest class."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ragpulse.collector._native",
    "The collector's per-span loop in C; split.py is the reference and the fallback.", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    return PyModule_Create(&module);
}

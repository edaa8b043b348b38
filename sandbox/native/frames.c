/*
 * frames.c: the frame attributes that steer tracing become read-only in the sandbox.
 *
 * A frame's f_lineno (assignable from inside a trace callback: a jump), f_trace, f_trace_lines
 * and f_trace_opcodes let code that holds a frame change what the tracer sees: skip lines
 * without a line event, jump over statements while a __repr__ or __del__ runs inside the tracer.
 * The tracer needs none of them (it is a C trace function and writes f_trace_lines itself), so
 * harden_frames() removes their setters from the frame type's descriptor tables, for the zygote
 * and every process it forks. Writing them then raises AttributeError, whichever way traced code
 * tries (attribute, object.__setattr__, the descriptor's __set__).
 *
 * The tables are CPython's own (frameobject.c, non-const static arrays); each descriptor is
 * checked (its type, its name, the table entry's name and kind) before it is patched, and the
 * result is checked on a live frame, so an interpreter laid out differently fails loudly here
 * instead of being patched blindly.
 */
#include "native.h"
#include <string.h>

extern PyObject *PyExc_AttributeError;

Py_ssize_t frame_trace_lines_offset;

static int descr_kind(PyObject *d, const char *want) {
    PyObject *q = PyType_GetQualName(TYPE(d));
    if (!q) return 0;
    int ok = PyUnicode_CompareWithASCIIString(q, want) == 0;
    Py_DecRef(q);
    return ok;
}

/* Make frame attribute `name` read-only; returns the member's offset for a member, 0 for a getset,
 * -1 with an exception set when the descriptor is not what frameobject.c defines. */
static Py_ssize_t harden(const char *name) {
    PyObject *d = PyObject_GetAttrString((PyObject *)PyFrame_Type, name);
    if (!d) return -1;
    PyDescrCommon *c = (PyDescrCommon *)d;
    Py_ssize_t r = -1;
    if (c->d_type != (void *)PyFrame_Type || !c->d_name || !IS_TYPE(c->d_name, PyUnicode_Type) ||
        PyUnicode_CompareWithASCIIString(c->d_name, name) != 0 || !c->d_def) {
        PyErr_Format(PyExc_RuntimeError, "ndtrace: frame.%s: unexpected descriptor layout", name);
    } else if (descr_kind(d, "member_descriptor")) {
        PyMemberDef *m = (PyMemberDef *)c->d_def;
        if (m->name && strcmp(m->name, name) == 0 && m->type == Py_T_BOOL && m->offset > 0 && m->offset < 512) {
            m->flags |= Py_READONLY;
            r = m->offset;
        } else {
            PyErr_Format(PyExc_RuntimeError, "ndtrace: frame.%s: unexpected member entry", name);
        }
    } else if (descr_kind(d, "getset_descriptor")) {
        PyGetSetDef *g = (PyGetSetDef *)c->d_def;
        if (g->name && strcmp(g->name, name) == 0 && g->get) {
            g->set = NULL;
            r = 0;
        } else {
            PyErr_Format(PyExc_RuntimeError, "ndtrace: frame.%s: unexpected getset entry", name);
        }
    } else {
        PyErr_Format(PyExc_RuntimeError, "ndtrace: frame.%s: neither a member nor a getset", name);
    }
    Py_DecRef(d);
    return r;
}

/* Whether setting frame.name to v fails with AttributeError (it must, once hardened). */
static int refused(PyObject *frame, const char *name, PyObject *v) {
    if (PyObject_SetAttrString(frame, name, v) == 0) return 0;
    int ok = PyErr_ExceptionMatches(PyExc_AttributeError);
    PyErr_Clear();
    return ok;
}

/* harden_frames(): see above. Called by the zygote before it serves any item. */
PyObject *nd_harden_frames(PyObject *self, PyObject *unused) {
    if (refuse_sealed()) return NULL;
    static const char *names[] = {"f_trace_lines", "f_trace_opcodes", "f_trace", "f_lineno"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        Py_ssize_t off = harden(names[i]);
        if (off < 0) return NULL;
        if (i == 0) {
            if (off == 0) {
                PyErr_SetString(PyExc_RuntimeError, "ndtrace: frame.f_trace_lines is not a member");
                return NULL;
            }
            frame_trace_lines_offset = off;
        }
    }
    PyObject *frame = PyEval_GetFrame(); /* borrowed: the caller's */
    if (!frame) {
        PyErr_SetString(PyExc_RuntimeError, "ndtrace: harden_frames needs a Python caller");
        return NULL;
    }
    if (((unsigned char *)frame)[frame_trace_lines_offset] != 1) {
        PyErr_SetString(PyExc_RuntimeError, "ndtrace: frame.f_trace_lines is not where expected");
        return NULL;
    }
    PyObject *f = PyBool_FromLong(0), *one = PyLong_FromLong(1);
    int ok = refused(frame, "f_trace_lines", f) && refused(frame, "f_trace_opcodes", f) &&
             refused(frame, "f_trace", Py_None) && refused(frame, "f_lineno", one);
    Py_DecRef(f);
    Py_DecRef(one);
    if (!ok) {
        PyErr_SetString(PyExc_RuntimeError, "ndtrace: frame attributes stayed writable");
        return NULL;
    }
    return none();
}

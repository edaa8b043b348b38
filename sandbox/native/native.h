/*
 * native.h: what the native helper's parts (ndtrace_native.c: set-up and the audit hook;
 * tracer.c: the line tracer; frames.c: hardening of frame objects; spawn.c: an item's keeper and
 * init) share.
 */
#ifndef NDTRACE_NATIVE_H
#define NDTRACE_NATIVE_H

#include "abi.h"

/* The item's file descriptors (docs/tracer-protocol.md). */
#define EVENTS_FD 3

/* Exit codes of an item that could not finish normally (Go reads them from `done`). */
#define EXIT_TRACER_BUG 70
#define EXIT_PIPE 71
#define EXIT_TAMPERED 72
#define EXIT_NOMEM 99

/* A set of objects compared by identity (sorted pointers, each holding a reference). */
typedef struct {
    PyObject **v;
    Py_ssize_t n;
} codeset;

int codeset_fill(codeset *s, PyObject *seq);
int codeset_has(const codeset *s, PyObject *obj);

/* The tracer's own code (the tracer module, sandbox/tracer/): only it may call the tracer's control
 * functions. */
extern codeset trusted_codes;
/* Set by the audit hook on tampering; trusted callers are refused from then on. */
extern int tampered;
/* Set while the tracer itself switches tracing on or off (the audit hook lets it through). */
extern int native_settrace;

/* Refuse set-up functions after seal() (raises PermissionError, returns 1). */
int refuse_sealed(void);
PyObject *none(void);

/* tracer.c: report tampering: seals a `tampered` end record and exits when the tracer is set up
 * in this process (never returns then); otherwise returns. */
void tracer_tamper(const char *reason);
/* tracer.c: the tracer's module functions, added to the module's method table. */
extern PyMethodDef tracer_methods[];
int tracer_module_init(PyObject *module);

/* spawn.c: an item's keeper and init, in C */
PyObject *nd_spawn_item(PyObject *self, PyObject *args);

/* frames.c */
PyObject *nd_harden_frames(PyObject *self, PyObject *unused);
extern Py_ssize_t frame_trace_lines_offset; /* of PyFrameObject.f_trace_lines, 0 until hardened */

#endif

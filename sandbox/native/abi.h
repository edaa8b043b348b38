/*
 * abi.h: the subset of CPython's C API the native helper uses, declared by hand.
 *
 * No Python.h: every symbol below is an exported function or object of CPython 3.11, 3.12 and
 * 3.13 (default, GIL builds), and no macro or struct layout of the interpreter is relied on beyond
 * PyObject's two-word header and the public descriptor and member tables that frame.c (harden
 * frames) checks at run time before it touches them. Building needs only a C compiler and the
 * kernel headers.
 */
#ifndef NDTRACE_ABI_H
#define NDTRACE_ABI_H

#include <stddef.h>
#include <sys/types.h>

typedef ssize_t Py_ssize_t;
typedef Py_ssize_t Py_hash_t;
typedef struct _object {
    Py_ssize_t ob_refcnt; /* a union of the same size on 3.12+ */
    void *ob_type;
} PyObject;
typedef PyObject *(*PyCFunction)(PyObject *, PyObject *);
typedef struct {
    const char *ml_name;
    PyCFunction ml_meth;
    int ml_flags;
    const char *ml_doc;
} PyMethodDef;
typedef struct {
    PyObject ob_base;
    PyObject *(*m_init)(void);
    Py_ssize_t m_index;
    PyObject *m_copy;
} PyModuleDef_Base;
typedef struct {
    PyModuleDef_Base m_base;
    const char *m_name;
    const char *m_doc;
    Py_ssize_t m_size;
    PyMethodDef *m_methods;
    void *m_slots, *m_traverse, *m_clear, *m_free;
} PyModuleDef;
typedef struct {
    int slot;
    void *pfunc;
} PyType_Slot;
typedef struct {
    const char *name;
    int basicsize, itemsize;
    unsigned int flags;
    PyType_Slot *slots;
} PyType_Spec;
typedef int (*visitproc)(PyObject *, void *);
typedef int (*Py_tracefunc)(PyObject *, PyObject *, int, PyObject *);
typedef PyObject *(*reprfunc)(PyObject *);

/* The public layouts of member and getset tables (structmember.h, descrobject.h), unchanged
 * since 3.0, and of the descriptors that point at them (PyDescr_COMMON then the table entry). */
typedef struct {
    const char *name;
    int type;
    Py_ssize_t offset;
    int flags;
    const char *doc;
} PyMemberDef;
typedef struct {
    const char *name;
    void *get;
    void *set;
    const char *doc;
    void *closure;
} PyGetSetDef;
typedef struct {
    PyObject ob_base;
    void *d_type;
    PyObject *d_name;
    PyObject *d_qualname;
    void *d_def; /* PyMemberDef * or PyGetSetDef * */
} PyDescrCommon;

#define METH_VARARGS 0x0001
#define METH_KEYWORDS 0x0002
#define METH_NOARGS 0x0004
#define METH_O 0x0008
#define PYTHON_API_VERSION 1013
#define Py_tp_call 50
#define Py_tp_clear 51
#define Py_tp_dealloc 52
#define Py_tp_doc 56
#define Py_tp_iter 62
#define Py_tp_repr 66
#define Py_tp_str 70
#define Py_tp_traverse 71
#define Py_TPFLAGS_DISALLOW_INSTANTIATION (1UL << 7)
#define Py_TPFLAGS_IMMUTABLETYPE (1UL << 8)
#define Py_TPFLAGS_HEAPTYPE (1UL << 9)
#define Py_TPFLAGS_BASETYPE (1UL << 10)
#define Py_TPFLAGS_HAVE_GC (1UL << 14)
#define Py_TPFLAGS_HAVE_VERSION_TAG (1UL << 18)
#define Py_T_BOOL 14
#define Py_READONLY 1

#define PyTrace_CALL 0
#define PyTrace_EXCEPTION 1
#define PyTrace_LINE 2
#define PyTrace_RETURN 3

#define CO_GENERATOR 0x0020
#define CO_COROUTINE 0x0080
#define CO_ITERABLE_COROUTINE 0x0100
#define CO_ASYNC_GENERATOR 0x0200

/* Modules, arguments, values */
extern PyObject *PyModule_Create2(PyModuleDef *, int);
extern int PyModule_AddIntConstant(PyObject *, const char *, long);
extern int PyArg_ParseTuple(PyObject *, const char *, ...);
extern int PyArg_ParseTupleAndKeywords(PyObject *, PyObject *, const char *, char **, ...);
extern PyObject *Py_BuildValue(const char *, ...);
extern PyObject *PyBool_FromLong(long);
extern PyObject *PyLong_FromLong(long);
extern PyObject *PyLong_FromVoidPtr(void *);
extern long PyLong_AsLong(PyObject *);
extern long long PyLong_AsLongLongAndOverflow(PyObject *, int *);
extern double PyFloat_AsDouble(PyObject *);
extern PyObject *PyCFunction_NewEx(PyMethodDef *, PyObject *, PyObject *);
extern PyObject *PyImport_ImportModule(const char *);

/* Errors */
extern PyObject *PyErr_SetFromErrno(PyObject *);
extern void PyErr_SetString(PyObject *, const char *);
extern void PyErr_SetNone(PyObject *);
extern PyObject *PyErr_Format(PyObject *, const char *, ...);
extern PyObject *PyErr_Occurred(void);
extern void PyErr_Clear(void);
extern int PyErr_ExceptionMatches(PyObject *);
extern int PyErr_GivenExceptionMatches(PyObject *, PyObject *);
extern void PyErr_Fetch(PyObject **, PyObject **, PyObject **);
extern void PyErr_Restore(PyObject *, PyObject *, PyObject *);
extern void PyErr_NormalizeException(PyObject **, PyObject **, PyObject **);
extern PyObject *PyErr_NewException(const char *, PyObject *, PyObject *);
extern PyObject *PyErr_NoMemory(void);
extern int PyErr_CheckSignals(void);

/* Objects */
extern PyObject *PyObject_Call(PyObject *, PyObject *, PyObject *);
extern PyObject *PyObject_CallOneArg(PyObject *, PyObject *);
extern PyObject *PyObject_CallFunction(PyObject *, const char *, ...);
extern PyObject *PyObject_CallFunctionObjArgs(PyObject *, ...);
extern PyObject *PyObject_CallMethod(PyObject *, const char *, const char *, ...);
extern PyObject *PyObject_CallMethodObjArgs(PyObject *, PyObject *, ...);
extern PyObject *PyObject_GetAttrString(PyObject *, const char *);
extern int PyObject_SetAttrString(PyObject *, const char *, PyObject *);
extern PyObject *PyObject_Repr(PyObject *);
extern int PyObject_RichCompareBool(PyObject *, PyObject *, int);
extern int PyObject_IsTrue(PyObject *);
extern Py_ssize_t PyObject_Size(PyObject *);
extern PyObject *PyObject_GetIter(PyObject *);
extern PyObject *PyIter_Next(PyObject *);
extern int PyIter_Check(PyObject *);
extern int PyCallable_Check(PyObject *);
extern PyObject *PyOS_FSPath(PyObject *);
extern void PyOS_BeforeFork(void);
extern void PyOS_AfterFork_Parent(void);
extern void PyOS_AfterFork_Child(void);
extern void Py_IncRef(PyObject *);
extern void Py_DecRef(PyObject *);
extern int PyObject_GenericSetAttr(PyObject *, PyObject *, PyObject *);
extern void PyObject_GC_UnTrack(void *);
extern void PyObject_GC_Del(void *);

/* Types */
extern PyObject *PyType_FromSpec(PyType_Spec *);
extern PyObject *PyType_GenericAlloc(void *, Py_ssize_t);
extern PyObject *PyType_GetQualName(void *);
extern int PyType_IsSubtype(void *, void *);
extern void *PyType_GetSlot(void *, int);
extern unsigned long PyType_GetFlags(void *);
extern PyObject *PyObject_GenericGetDict(PyObject *, void *);

/* Containers and strings */
extern PyObject *PyTuple_New(Py_ssize_t);
extern PyObject *PyTuple_GetItem(PyObject *, Py_ssize_t);
extern int PyTuple_SetItem(PyObject *, Py_ssize_t, PyObject *);
extern Py_ssize_t PyTuple_Size(PyObject *);
extern PyObject *PyList_New(Py_ssize_t);
extern int PyList_Append(PyObject *, PyObject *);
extern Py_ssize_t PyList_Size(PyObject *);
extern PyObject *PyList_GetItem(PyObject *, Py_ssize_t);
extern PyObject *PyDict_New(void);
extern PyObject *PyDict_GetItemWithError(PyObject *, PyObject *);
extern int PyDict_SetItem(PyObject *, PyObject *, PyObject *);
extern int PyDict_Next(PyObject *, Py_ssize_t *, PyObject **, PyObject **);
extern Py_ssize_t PyDict_Size(PyObject *);
extern PyObject *PyDict_Copy(PyObject *);
extern PyObject *PySet_New(PyObject *);
extern PyObject *PyFrozenSet_New(PyObject *);
extern int PySet_Add(PyObject *, PyObject *);
extern int PySet_Contains(PyObject *, PyObject *);
extern Py_ssize_t PySequence_Size(PyObject *);
extern PyObject *PySequence_GetItem(PyObject *, Py_ssize_t);
extern PyObject *PySequence_GetSlice(PyObject *, Py_ssize_t, Py_ssize_t);
extern int PySequence_Contains(PyObject *, PyObject *);
extern PyObject *PyUnicode_FromString(const char *);
extern PyObject *PyUnicode_InternFromString(const char *);
extern PyObject *PyUnicode_FromStringAndSize(const char *, Py_ssize_t);
extern PyObject *PyUnicode_FromFormat(const char *, ...);
extern PyObject *PyUnicode_FromObject(PyObject *);
extern const char *PyUnicode_AsUTF8AndSize(PyObject *, Py_ssize_t *);
extern Py_ssize_t PyUnicode_GetLength(PyObject *);
extern PyObject *PyUnicode_Substring(PyObject *, Py_ssize_t, Py_ssize_t);
extern PyObject *PyUnicode_Concat(PyObject *, PyObject *);
extern PyObject *PyUnicode_Join(PyObject *, PyObject *);
extern int PyUnicode_CompareWithASCIIString(PyObject *, const char *);
extern PyObject *PyBytes_FromStringAndSize(const char *, Py_ssize_t);
extern int PyBytes_AsStringAndSize(PyObject *, char **, Py_ssize_t *);
extern PyObject *PyMemoryView_FromMemory(char *, Py_ssize_t, int);
#define PyBUF_READ 0x100

/* Frames, code, evaluation, threads */
extern PyObject *PyEval_GetFrame(void);
extern PyObject *PyFrame_GetBack(PyObject *);
extern PyObject *PyFrame_GetCode(PyObject *);
extern PyObject *PyFrame_GetLocals(PyObject *);
extern PyObject *PyFrame_GetGlobals(PyObject *);
extern int PyFrame_GetLineNumber(PyObject *);
extern int PyFrame_GetLasti(PyObject *);
extern PyObject *PyCode_GetCode(PyObject *);
extern void PyEval_SetTrace(Py_tracefunc, PyObject *);
extern PyObject *PyEval_EvalCode(PyObject *, PyObject *, PyObject *);
extern int Py_EnterRecursiveCall(const char *);
extern void Py_LeaveRecursiveCall(void);
extern int Py_GetRecursionLimit(void);
extern size_t _PyLong_NumBits(PyObject *);
extern void *PyUnicode_AsUCS4Copy(PyObject *);
extern int PyUnicode_Compare(PyObject *, PyObject *);
extern void PyMem_Free(void *);
extern void Py_SetRecursionLimit(int);
extern unsigned long PyThread_get_thread_ident(void);
extern int PySys_AddAuditHook(int (*)(const char *, PyObject *, void *), void *);

extern PyObject *PyExc_OSError, *PyExc_PermissionError, *PyExc_RuntimeError, *PyExc_ImportError,
    *PyExc_TypeError, *PyExc_ValueError, *PyExc_MemoryError, *PyExc_RecursionError,
    *PyExc_BaseException, *PyExc_Exception, *PyExc_StopIteration;
extern char PyFrame_Type[], PyCode_Type[], PyUnicode_Type[], PyBytes_Type[], PyByteArray_Type[],
    PyLong_Type[], PyBool_Type[], PyFloat_Type[], PyComplex_Type[], PyList_Type[], PyTuple_Type[],
    PyDict_Type[], PySet_Type[], PyBaseObject_Type[], PyFrozenSet_Type[], PyFunction_Type[], PyCoro_Type[], PyAsyncGen_Type[];
extern PyObject _Py_NoneStruct, _Py_TrueStruct;

#define TYPE(o) (((PyObject *)(o))->ob_type)
#define Py_None (&_Py_NoneStruct)
#define IS_TYPE(o, t) (TYPE(o) == (void *)(t))

#endif

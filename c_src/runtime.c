/* symgraph's native runtime: runs a compiled function's schedule in C.
 *
 * A Program holds one slot (a PyObject*) per variable of the graph and a list
 * of steps.  A native step calls a kernel through the ABI of sg_kernel.h; a
 * Python step calls back a callable for nodes without native code.  The
 * runtime checks the inputs, allocates outputs (reusing last call's buffer when
 * nothing else holds it, so large outputs do not fault in fresh pages on
 * every call) and wraps view outputs as NumPy views of their base.  A "view
 * or copy" step (SG_VIEW_OR_COPY) does either, per call, as its kernel's
 * view function decides from the input's strides.  A step may be guarded by
 * conditions (set_guards): the branches of a lazy ifelse run only when taken.
 *
 * This is the only C file that includes Python and NumPy headers; the kernels
 * stay plain C so that they compile fast.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include "sg_kernel.h"
#include "sg_allocator.h"
#include <time.h>

/* The module's name: "symgraph._runtime" when setup.py builds it into the
 * package at install time (-DSG_RUNTIME_PACKAGED), "symgraph_runtime" when
 * symgraph/backends/native/runtime.py builds it through the compile cache.
 * SG_RUNTIME_SOURCE_HASH (set by setup.py) lets the loader see that an
 * installed build is older than this file. */
#ifdef SG_RUNTIME_PACKAGED
#define SG_RUNTIME_NAME "symgraph._runtime"
#define SG_RUNTIME_INIT PyInit__runtime
#else
#define SG_RUNTIME_NAME "symgraph_runtime"
#define SG_RUNTIME_INIT PyInit_symgraph_runtime
#endif
#ifndef SG_RUNTIME_SOURCE_HASH
#define SG_RUNTIME_SOURCE_HASH ""
#endif

typedef int (*sg_run_fn)(const sg_array *, sg_array *, sg_error *);
typedef int (*sg_shape_fn)(const sg_array *, int64_t *, sg_error *);
typedef int (*sg_view_fn)(const sg_array *, const int64_t *, sg_array *, sg_error *);

/* STEP_SELECT: an ifelse's choice (inputs cond, then-values, else-values):
 * each output is the chosen branch's value, copied unless as_view. */
enum { STEP_NATIVE = 0, STEP_PYTHON = 1, STEP_SELECT = 2 };

typedef struct {
    int type;
    int kind;               /* SG_COMPUTE, SG_INPLACE, SG_VIEW, SG_VIEW_OR_COPY */
    sg_run_fn run;
    sg_shape_fn shape;
    sg_view_fn view;        /* SG_VIEW_OR_COPY */
    PyObject *callable;     /* Python steps */
    int n_in, n_out;
    int *in_slots, *out_slots;
    int *out_typenums, *out_ndims, *alias;
    sg_array *in_desc, *out_desc;
    int64_t *shapes;
    const sg_allocator *alloc;  /* makes and views its outputs (0: host memory) */
    const sg_allocator *context; /* its enter() selects the step's device; NULL: none */
    int as_view;            /* STEP_SELECT: the outputs alias the chosen inputs */
    int n_guards;           /* lazy ifelse: run only when every guard holds */
    int *guard_slots;       /* a condition's slot ... */
    char *guard_truth;      /* ... and the truth it must have */
} Step;

typedef struct {
    int slot, typenum, ndim;
    int64_t static_shape[SG_MAXDIMS];  /* -1: unknown */
} InputSpec;

typedef struct {
    PyObject_HEAD
    int n_slots;
    PyObject **slots;
    char *keep;             /* slots kept between calls (constants, reusable buffers) */
    char *reusable;
    int n_inputs;
    InputSpec *inputs;
    int n_steps;
    Step *steps;
    int n_outputs;
    int *output_slots;
    int failed_step;
    int profile;            /* when set, time every step */
    /* The call path (configure_call): what a Function does around run(). */
    int call_ready, n_explicit, unpack_single, check_inputs;
    PyObject *shared_cells;  /* tuple of one-element lists (shared containers) */
    char *copy_output;       /* per output: copy before returning (it aliases an input) */
    int n_updates;
    PyObject **update_cells; /* the shared container each update writes */
    int *update_outputs;     /* which program output holds the new value */
    char *update_copy;
    double *step_seconds;
    long *step_calls;
} Program;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static PyObject *InputMismatch;   /* raised with the input's position: Python explains */

static int *int_array(PyObject *tuple, int *n_out);

/* -- the host allocator (NumPy arrays), allocator 0 ------------------------- */

static int host_describe(void *ctx, PyObject *v, sg_array *d) {
    (void)ctx;
    if (!PyArray_Check(v)) return 0;
    PyArrayObject *a = (PyArrayObject *)v;
    d->data = PyArray_BYTES(a);
    d->ndim = PyArray_NDIM(a);
    for (int i = 0; i < d->ndim; i++) {
        d->shape[i] = PyArray_DIMS(a)[i];
        d->strides[i] = PyArray_STRIDES(a)[i];
    }
    return 1;
}

static PyObject *host_empty(void *ctx, int typenum, int ndim, const int64_t *shape) {
    (void)ctx;
    npy_intp dims[SG_MAXDIMS];
    for (int d = 0; d < ndim; d++) dims[d] = (npy_intp)shape[d];
    return PyArray_SimpleNew(ndim, dims, typenum);
}

static int host_fits(void *ctx, PyObject *old, int typenum, int ndim, const int64_t *shape) {
    (void)ctx;
    if (!PyArray_CheckExact(old)) return 0;
    PyArrayObject *a = (PyArrayObject *)old;
    if (PyArray_TYPE(a) != typenum || PyArray_NDIM(a) != ndim || PyArray_BASE(a) != NULL ||
        !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISWRITEABLE(a))
        return 0;
    for (int d = 0; d < ndim; d++)
        if (PyArray_DIMS(a)[d] != (npy_intp)shape[d]) return 0;
    return 1;
}

static PyObject *host_view(void *ctx, PyObject *base_obj, const sg_array *d, int typenum) {
    (void)ctx;
    if (!PyArray_Check(base_obj)) {
        PyErr_SetString(PyExc_TypeError, "a host view's base is not a NumPy array");
        return NULL;
    }
    PyArrayObject *base = (PyArrayObject *)base_obj;
    npy_intp dims[SG_MAXDIMS], strides[SG_MAXDIMS];
    for (int i = 0; i < d->ndim; i++) { dims[i] = d->shape[i]; strides[i] = d->strides[i]; }
    PyArray_Descr *descr = PyArray_DescrFromType(typenum);
    int flags = PyArray_ISWRITEABLE(base) ? NPY_ARRAY_WRITEABLE : 0;
    PyObject *view = PyArray_NewFromDescr(&PyArray_Type, descr, d->ndim, dims, strides,
                                          d->data, flags, NULL);
    if (view == NULL) return NULL;
    Py_INCREF(base);
    if (PyArray_SetBaseObject((PyArrayObject *)view, (PyObject *)base) < 0) {
        Py_DECREF(view);
        return NULL;
    }
    PyArray_UpdateFlags((PyArrayObject *)view, NPY_ARRAY_UPDATE_ALL);
    return view;
}

static const sg_allocator host_allocator = {
    SG_ALLOCATOR_ABI, "host", NULL, host_empty, host_describe, host_fits, host_view, NULL,
};

/* Allocators by number: 0 is the host's; backends add theirs (register_allocator).
 * Few backends exist, and a registered allocator lives as long as the process. */
#define SG_MAX_ALLOCATORS 40   /* the host, and up to 16 devices of each kind (GPU, emulated) */
static const sg_allocator *allocators[SG_MAX_ALLOCATORS] = {&host_allocator};
static PyObject *allocator_capsules[SG_MAX_ALLOCATORS];
static int n_allocators = 1;

/* Describe any buffer: NumPy arrays are the host's, anything else is asked of
 * the registered allocators in turn. */
static int describe(PyObject *v, sg_array *d, int position) {
    for (int i = 0; i < n_allocators; i++) {
        int rc = allocators[i]->describe(allocators[i]->ctx, v, d);
        if (rc != 0) return rc < 0 ? -1 : 0;
    }
    PyErr_Format(PyExc_TypeError, "native kernel input %d is a %.100s, which no allocator "
                 "knows", position, Py_TYPE(v)->tp_name);
    return -1;
}

/* A reusable slot keeps its buffer for the next call only when the runtime
 * allocated it: a view (a "view or copy" step's, on some calls) would keep
 * its base, perhaps the caller's input, alive, and is never reused anyway. */
static int keeps_buffer(PyObject *v) {
    return v != NULL && PyArray_Check(v) && PyArray_BASE((PyArrayObject *)v) == NULL;
}

static void clear_slots(Program *p, int keep_reusable) {
    for (int i = 0; i < p->n_slots; i++) {
        if (p->keep[i] || (keep_reusable && p->reusable[i] && keeps_buffer(p->slots[i])))
            continue;
        Py_CLEAR(p->slots[i]);
    }
}

static int raise_kernel_error(sg_error *err) {
    PyObject *type = PyExc_RuntimeError;
    switch (err->kind) {
        case SG_ERR_VALUE: type = PyExc_ValueError; break;
        case SG_ERR_INDEX: type = PyExc_IndexError; break;
        case SG_ERR_ASSERTION: type = PyExc_AssertionError; break;
        case SG_ERR_TYPE: type = PyExc_TypeError; break;
        case SG_ERR_MEMORY: type = PyExc_MemoryError; break;
        default: break;
    }
    PyErr_SetString(type, err->msg[0] ? err->msg : "native kernel failed");
    return -1;
}

/* An output buffer: last call's when it fits and nobody else holds it. */
static PyObject *output_buffer(Program *p, const sg_allocator *alloc, int slot, int typenum,
                               int ndim, const int64_t *shape) {
    PyObject *old = p->slots[slot];
    if (old != NULL && Py_REFCNT(old) == 1 && alloc->fits(alloc->ctx, old, typenum, ndim, shape))
        return old;
    PyObject *fresh = alloc->empty(alloc->ctx, typenum, ndim, shape);
    if (fresh == NULL) return NULL;
    Py_XSETREF(p->slots[slot], fresh);
    return fresh;
}

/* The step's outputs in buffers of the shapes in s->shapes (compute steps). */
static int allocate_outputs(Program *p, Step *s) {
    for (int k = 0; k < s->n_out; k++) {
        PyObject *out = output_buffer(p, s->alloc, s->out_slots[k], s->out_typenums[k],
                                      s->out_ndims[k], s->shapes + k * SG_MAXDIMS);
        if (out == NULL || describe(out, &s->out_desc[k], k) < 0) return -1;
    }
    return 0;
}

/* The step's outputs as views of their base inputs, as the kernel described. */
static int wrap_outputs(Program *p, Step *s) {
    for (int k = 0; k < s->n_out; k++) {
        PyObject *base = p->slots[s->in_slots[s->alias[k]]];
        PyObject *view = s->alloc->view(s->alloc->ctx, base, &s->out_desc[k],
                                        s->out_typenums[k]);
        if (view == NULL) return -1;
        Py_XSETREF(p->slots[s->out_slots[k]], view);
    }
    return 0;
}

/* 1 when the outputs are views (wrapped), 0 when they need a copy, -1 on error. */
static int try_view(Program *p, Step *s, sg_error *err) {
    if (s->shape(s->in_desc, s->shapes, err)) return raise_kernel_error(err);
    int rc = s->view(s->in_desc, s->shapes, s->out_desc, err);
    if (rc == SG_NO_VIEW) return 0;
    if (rc) return raise_kernel_error(err);
    return wrap_outputs(p, s) < 0 ? -1 : 1;
}

/* An in-place kernel's shape function (optional) checks its inputs before
 * anything is written; each output must then have its target's shape, or
 * the kernel would write past the array it overwrites. */
static int check_inplace_shapes(Step *s, sg_error *err) {
    if (s->shape == NULL) return 0;
    if (s->shape(s->in_desc, s->shapes, err)) return raise_kernel_error(err);
    for (int k = 0; k < s->n_out; k++) {
        const sg_array *target = &s->in_desc[s->alias[k]];
        const int64_t *shape = s->shapes + k * SG_MAXDIMS;
        int same = target->ndim == s->out_ndims[k];
        for (int d = 0; same && d < target->ndim; d++) same = target->shape[d] == shape[d];
        if (!same) {
            PyErr_Format(PyExc_ValueError, "an in-place kernel's output %d does not have the "
                         "shape of the input %d it overwrites", k, s->alias[k]);
            return -1;
        }
    }
    return 0;
}

/* Select the step's device (its context allocator's enter) before anything of
 * the step touches memory: a process may drive several devices. */
static int enter_step(const Step *s) {
    if (s->context == NULL || s->context->enter == NULL) return 0;
    return s->context->enter(s->context->ctx);
}

static int run_native(Program *p, Step *s) {
    sg_error err = {0, {0}};
    if (enter_step(s) < 0) return -1;
    for (int i = 0; i < s->n_in; i++) {
        PyObject *v = p->slots[s->in_slots[i]];
        if (v == NULL) {
            PyErr_Format(PyExc_TypeError, "native kernel input %d has no value", i);
            return -1;
        }
        if (describe(v, &s->in_desc[i], i) < 0) return -1;
    }
    if (s->kind == SG_COMPUTE) {
        if (s->shape(s->in_desc, s->shapes, &err)) return raise_kernel_error(&err);
        if (allocate_outputs(p, s) < 0) return -1;
    } else if (s->kind == SG_VIEW_OR_COPY) {
        int viewed = try_view(p, s, &err);
        if (viewed != 0) return viewed < 0 ? -1 : 0;
        if (allocate_outputs(p, s) < 0) return -1;
    } else if (s->kind == SG_INPLACE) {
        if (check_inplace_shapes(s, &err) < 0) return -1;
        for (int k = 0; k < s->n_out; k++) {
            PyObject *target = p->slots[s->in_slots[s->alias[k]]];
            Py_INCREF(target);
            Py_XSETREF(p->slots[s->out_slots[k]], target);
            if (describe(target, &s->out_desc[k], s->alias[k]) < 0) return -1;
        }
    }
    if (s->run(s->in_desc, s->out_desc, &err)) return raise_kernel_error(&err);
    if (s->kind == SG_VIEW) return wrap_outputs(p, s);
    return 0;
}

static int run_python(Program *p, Step *s) {
    PyObject *args = PyTuple_New(s->n_in);
    if (args == NULL) return -1;
    for (int i = 0; i < s->n_in; i++) {
        PyObject *v = p->slots[s->in_slots[i]];
        if (v == NULL) v = Py_None;
        Py_INCREF(v);
        PyTuple_SET_ITEM(args, i, v);
    }
    PyObject *result = PyObject_Call(s->callable, args, NULL);
    Py_DECREF(args);
    if (result == NULL) return -1;
    PyObject *seq = PySequence_Fast(result, "a Python step must return a sequence");
    Py_DECREF(result);
    if (seq == NULL) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != s->n_out) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_RuntimeError, "a Python step returned the wrong number of outputs");
        return -1;
    }
    for (int k = 0; k < s->n_out; k++) {
        PyObject *v = PySequence_Fast_GET_ITEM(seq, k);
        Py_INCREF(v);
        Py_XSETREF(p->slots[s->out_slots[k]], v);
    }
    Py_DECREF(seq);
    return 0;
}

static int run_select(Program *p, Step *s) {
    PyObject *cond = p->slots[s->in_slots[0]];
    if (cond == NULL) {
        PyErr_SetString(PyExc_TypeError, "an ifelse's condition has no value");
        return -1;
    }
    int truth = PyObject_IsTrue(cond);
    if (truth < 0) return -1;
    for (int k = 0; k < s->n_out; k++) {
        PyObject *v = p->slots[s->in_slots[1 + k + (truth ? 0 : s->n_out)]];
        if (v == NULL) {
            PyErr_Format(PyExc_TypeError, "the %s-value %d of an ifelse has no value",
                         truth ? "then" : "else", k);
            return -1;
        }
        if (!s->as_view && PyArray_Check(v)) {
            v = PyArray_NewCopy((PyArrayObject *)v, NPY_CORDER);
            if (v == NULL) return -1;
        } else {
            Py_INCREF(v);
        }
        Py_XSETREF(p->slots[s->out_slots[k]], v);
    }
    return 0;
}

static int check_input(InputSpec *spec, PyObject *v) {
    if (spec->typenum < 0) return 1;   /* not an array type: Python checked it once */
    if (!PyArray_CheckExact(v)) return 0;
    PyArrayObject *a = (PyArrayObject *)v;
    if (PyArray_TYPE(a) != spec->typenum || PyArray_NDIM(a) != spec->ndim) return 0;
    if (!PyArray_ISALIGNED(a) || PyArray_ISBYTESWAPPED(a)) return 0;
    for (int d = 0; d < spec->ndim; d++)
        if (spec->static_shape[d] >= 0 && PyArray_DIMS(a)[d] != spec->static_shape[d]) return 0;
    return 1;
}

static PyObject *run_values(Program *p, PyObject *values, int check);

/* 1 when step s runs: each of its conditions (scalars computed earlier in
 * the schedule) has the truth its guard asks for; 0 when it is skipped (the
 * branch of an ifelse not taken); -1 on error.  A condition that was not
 * computed belongs to a branch not taken: its step is skipped too. */
static int guards_hold(Program *p, Step *s) {
    for (int g = 0; g < s->n_guards; g++) {
        PyObject *v = p->slots[s->guard_slots[g]];
        if (v == NULL) return 0;
        int truth = PyObject_IsTrue(v);
        if (truth < 0) return -1;
        if (truth != s->guard_truth[g]) return 0;
    }
    return 1;
}

static PyObject *Program_run(Program *p, PyObject *args) {
    PyObject *values;
    int check = 1;
    if (!PyArg_ParseTuple(args, "O!|p", &PyTuple_Type, &values, &check)) return NULL;
    return run_values(p, values, check);
}

static PyObject *run_values(Program *p, PyObject *values, int check) {
    if (PyTuple_GET_SIZE(values) != p->n_inputs) {
        PyErr_Format(PyExc_TypeError, "expected %d inputs, got %zd", p->n_inputs,
                     PyTuple_GET_SIZE(values));
        return NULL;
    }
    p->failed_step = -1;
    for (int i = 0; i < p->n_inputs; i++) {
        PyObject *v = PyTuple_GET_ITEM(values, i);
        if (check && !check_input(&p->inputs[i], v)) {
            PyObject *pos = PyLong_FromLong(i);
            PyErr_SetObject(InputMismatch, pos);
            Py_XDECREF(pos);
            clear_slots(p, 1);
            return NULL;
        }
        Py_INCREF(v);
        Py_XSETREF(p->slots[p->inputs[i].slot], v);
    }
    p->failed_step = -1;
    for (int i = 0; i < p->n_steps; i++) {
        Step *s = &p->steps[i];
        if (s->n_guards) {
            int run = guards_hold(p, s);
            if (run < 0) { p->failed_step = i; return NULL; }
            if (run == 0) continue;
        }
        double start = p->profile ? now_seconds() : 0.0;
        int rc = s->type == STEP_NATIVE ? run_native(p, s) :
                 s->type == STEP_SELECT ? run_select(p, s) : run_python(p, s);
        if (p->profile) {
            p->step_seconds[i] += now_seconds() - start;
            p->step_calls[i] += 1;
        }
        if (rc < 0) {
            p->failed_step = i;   /* slots stay filled so Python can explain */
            return NULL;
        }
    }
    PyObject *out = PyTuple_New(p->n_outputs);
    if (out == NULL) return NULL;
    for (int k = 0; k < p->n_outputs; k++) {
        PyObject *v = p->slots[p->output_slots[k]];
        if (v == NULL) v = Py_None;
        Py_INCREF(v);
        PyTuple_SET_ITEM(out, k, v);
    }
    clear_slots(p, 1);
    return out;
}

/* call(args): a Function's whole call for positional arguments, in C.
 * Shared values are appended, outputs that alias an input are copied, updates
 * are written to their shared containers after every output is computed.
 * Raises InputMismatch when the arguments need Python's conversion or
 * explanation (wrong count, lists, other dtypes). */
static PyObject *Program_call(Program *p, PyObject *args) {
    if (!p->call_ready) {
        PyErr_SetString(PyExc_RuntimeError, "configure_call() was not called");
        return NULL;
    }
    Py_ssize_t n_args = PyTuple_GET_SIZE(args);
    if (n_args != p->n_explicit) {
        PyObject *pos = PyLong_FromLong(-1);
        PyErr_SetObject(InputMismatch, pos);
        Py_XDECREF(pos);
        return NULL;
    }
    Py_ssize_t n_shared = PyTuple_GET_SIZE(p->shared_cells);
    PyObject *values = PyTuple_New(n_args + n_shared);
    if (values == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n_args; i++) {
        PyObject *v = PyTuple_GET_ITEM(args, i);
        Py_INCREF(v);
        PyTuple_SET_ITEM(values, i, v);
    }
    for (Py_ssize_t i = 0; i < n_shared; i++) {
        PyObject *v = PyList_GET_ITEM(PyTuple_GET_ITEM(p->shared_cells, i), 0);
        Py_INCREF(v);
        PyTuple_SET_ITEM(values, n_args + i, v);
    }
    PyObject *outs = run_values(p, values, p->check_inputs);
    Py_DECREF(values);
    if (outs == NULL) return NULL;
    int n_user = p->n_outputs - p->n_updates;
    PyObject *result = p->unpack_single ? NULL : PyList_New(n_user);
    if (!p->unpack_single && result == NULL) { Py_DECREF(outs); return NULL; }
    for (int k = 0; k < n_user; k++) {
        PyObject *v = PyTuple_GET_ITEM(outs, k);
        if (p->copy_output[k] && PyArray_Check(v)) {
            v = PyArray_NewCopy((PyArrayObject *)v, NPY_KEEPORDER);
            if (v == NULL) { Py_DECREF(outs); Py_XDECREF(result); return NULL; }
        } else {
            Py_INCREF(v);
        }
        if (p->unpack_single) result = v;
        else PyList_SET_ITEM(result, k, v);
    }
    for (int u = 0; u < p->n_updates; u++) {
        PyObject *v = PyTuple_GET_ITEM(outs, p->update_outputs[u]);
        if (p->update_copy[u] && PyArray_Check(v)) {
            v = PyArray_NewCopy((PyArrayObject *)v, NPY_KEEPORDER);
            if (v == NULL) { Py_DECREF(outs); Py_XDECREF(result); return NULL; }
        } else {
            Py_INCREF(v);
        }
        if (PyList_SetItem(p->update_cells[u], 0, v) < 0) {  /* steals v */
            Py_DECREF(outs); Py_XDECREF(result); return NULL;
        }
    }
    Py_DECREF(outs);
    return result;
}

static PyObject *Program_configure_call(Program *p, PyObject *args) {
    PyObject *shared_cells, *copy_output, *updates;
    if (!PyArg_ParseTuple(args, "iO!OO!pp", &p->n_explicit, &PyTuple_Type, &shared_cells,
                          &copy_output, &PyTuple_Type, &updates, &p->unpack_single,
                          &p->check_inputs))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shared_cells); i++) {
        PyObject *cell = PyTuple_GET_ITEM(shared_cells, i);
        if (!PyList_Check(cell) || PyList_GET_SIZE(cell) != 1) {
            PyErr_SetString(PyExc_TypeError, "shared cells must be one-element lists");
            return NULL;
        }
    }
    Py_INCREF(shared_cells);
    Py_XSETREF(p->shared_cells, shared_cells);
    int n_copy = 0;
    int *copies = int_array(copy_output, &n_copy);
    if (copies == NULL) return NULL;
    PyMem_Free(p->copy_output);
    p->copy_output = PyMem_Calloc(n_copy > 0 ? n_copy : 1, 1);
    for (int k = 0; k < n_copy; k++) p->copy_output[k] = (char)copies[k];
    PyMem_Free(copies);
    p->n_updates = (int)PyTuple_GET_SIZE(updates);
    if (p->n_outputs - p->n_updates != n_copy) {
        PyErr_SetString(PyExc_ValueError, "outputs, copies and updates do not add up");
        return NULL;
    }
    p->update_cells = PyMem_Calloc(p->n_updates > 0 ? p->n_updates : 1, sizeof(PyObject *));
    p->update_outputs = PyMem_Calloc(p->n_updates > 0 ? p->n_updates : 1, sizeof(int));
    p->update_copy = PyMem_Calloc(p->n_updates > 0 ? p->n_updates : 1, 1);
    for (int u = 0; u < p->n_updates; u++) {
        PyObject *cell;
        int out_index, copy;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(updates, u), "O!ip", &PyList_Type, &cell,
                              &out_index, &copy))
            return NULL;
        Py_INCREF(cell);
        p->update_cells[u] = cell;
        p->update_outputs[u] = out_index;
        p->update_copy[u] = (char)copy;
    }
    p->call_ready = 1;
    Py_RETURN_NONE;
}

static PyObject *Program_slot(Program *p, PyObject *args) {
    int slot;
    if (!PyArg_ParseTuple(args, "i", &slot)) return NULL;
    if (slot < 0 || slot >= p->n_slots) {
        PyErr_SetString(PyExc_IndexError, "no such slot");
        return NULL;
    }
    PyObject *v = p->slots[slot] ? p->slots[slot] : Py_None;
    Py_INCREF(v);
    return v;
}

static PyObject *Program_set_constant(Program *p, PyObject *args) {
    int slot;
    PyObject *value;
    if (!PyArg_ParseTuple(args, "iO", &slot, &value)) return NULL;
    if (slot < 0 || slot >= p->n_slots) {
        PyErr_SetString(PyExc_IndexError, "no such slot");
        return NULL;
    }
    Py_INCREF(value);
    Py_XSETREF(p->slots[slot], value);
    p->keep[slot] = 1;
    Py_RETURN_NONE;
}

/* set_guards(step, ((slot, truth), ...)): step runs only when each slot's
 * value has that truth (the branches of a lazy ifelse). */
static PyObject *Program_set_guards(Program *p, PyObject *args) {
    int index;
    PyObject *guards;
    if (!PyArg_ParseTuple(args, "iO!", &index, &PyTuple_Type, &guards)) return NULL;
    if (index < 0 || index >= p->n_steps) {
        PyErr_SetString(PyExc_IndexError, "no such step");
        return NULL;
    }
    Step *s = &p->steps[index];
    int n = (int)PyTuple_GET_SIZE(guards);
    int *slots = PyMem_Calloc(n > 0 ? n : 1, sizeof(int));
    char *truth = PyMem_Calloc(n > 0 ? n : 1, 1);
    if (slots == NULL || truth == NULL) {
        PyMem_Free(slots); PyMem_Free(truth);
        return PyErr_NoMemory();
    }
    for (int g = 0; g < n; g++) {
        int wanted;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(guards, g), "ip", &slots[g], &wanted) ||
            slots[g] < 0 || slots[g] >= p->n_slots) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "no such slot");
            PyMem_Free(slots); PyMem_Free(truth);
            return NULL;
        }
        truth[g] = (char)wanted;
    }
    PyMem_Free(s->guard_slots); PyMem_Free(s->guard_truth);
    s->guard_slots = slots;
    s->guard_truth = truth;
    s->n_guards = n;
    Py_RETURN_NONE;
}

static PyObject *Program_clear(Program *p, PyObject *unused) {
    clear_slots(p, 0);
    Py_RETURN_NONE;
}

static PyObject *Program_set_profile(Program *p, PyObject *args) {
    int on;
    if (!PyArg_ParseTuple(args, "p", &on)) return NULL;
    p->profile = on;
    Py_RETURN_NONE;
}

static PyObject *Program_step_times(Program *p, PyObject *unused) {
    PyObject *out = PyTuple_New(p->n_steps);
    if (out == NULL) return NULL;
    for (int i = 0; i < p->n_steps; i++) {
        PyObject *item = Py_BuildValue("(dl)", p->step_seconds[i], p->step_calls[i]);
        if (item == NULL) { Py_DECREF(out); return NULL; }
        PyTuple_SET_ITEM(out, i, item);
    }
    return out;
}

static PyObject *Program_failed_step(Program *p, void *closure) {
    return PyLong_FromLong(p->failed_step);
}

static void free_steps(Program *p) {
    for (int i = 0; i < p->n_steps; i++) {
        Step *s = &p->steps[i];
        Py_XDECREF(s->callable);
        PyMem_Free(s->in_slots); PyMem_Free(s->out_slots);
        PyMem_Free(s->out_typenums); PyMem_Free(s->out_ndims); PyMem_Free(s->alias);
        PyMem_Free(s->in_desc); PyMem_Free(s->out_desc); PyMem_Free(s->shapes);
        PyMem_Free(s->guard_slots); PyMem_Free(s->guard_truth);
    }
    PyMem_Free(p->steps);
}

static void Program_dealloc(Program *p) {
    if (p->slots) {
        for (int i = 0; i < p->n_slots; i++) Py_XDECREF(p->slots[i]);
        PyMem_Free(p->slots);
    }
    PyMem_Free(p->keep);
    PyMem_Free(p->reusable);
    PyMem_Free(p->inputs);
    if (p->steps) free_steps(p);
    PyMem_Free(p->output_slots);
    PyMem_Free(p->step_seconds);
    PyMem_Free(p->step_calls);
    Py_XDECREF(p->shared_cells);
    PyMem_Free(p->copy_output);
    for (int u = 0; u < p->n_updates; u++) Py_XDECREF(p->update_cells[u]);
    PyMem_Free(p->update_cells);
    PyMem_Free(p->update_outputs);
    PyMem_Free(p->update_copy);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

/* Read a tuple of ints into a freshly allocated int array. */
static int *int_array(PyObject *tuple, int *n_out) {
    PyObject *seq = PySequence_Fast(tuple, "expected a sequence of ints");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int *arr = PyMem_Calloc(n > 0 ? n : 1, sizeof(int));
    for (Py_ssize_t i = 0; i < n; i++) {
        arr[i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
    }
    Py_DECREF(seq);
    if (PyErr_Occurred()) { PyMem_Free(arr); return NULL; }
    if (n_out) *n_out = (int)n;
    return arr;
}

static int parse_step(Program *p, PyObject *spec, Step *s) {
    int n;
    long type = PyLong_AsLong(PyTuple_GetItem(spec, 0));
    s->type = (int)type;
    if (s->type == STEP_SELECT) {
        PyObject *ins, *outs, *typenums;
        if (!PyArg_ParseTuple(spec, "ipOOO", &n, &s->as_view, &ins, &outs, &typenums))
            return -1;
        if (!(s->in_slots = int_array(ins, &s->n_in))) return -1;
        if (!(s->out_slots = int_array(outs, &s->n_out))) return -1;
        if (!(s->out_typenums = int_array(typenums, NULL))) return -1;
        if (s->n_in != 1 + 2 * s->n_out) {
            PyErr_SetString(PyExc_ValueError, "a select step takes a condition and two "
                            "values per output");
            return -1;
        }
        return 0;
    }
    if (s->type == STEP_PYTHON) {
        PyObject *callable;
        PyObject *ins, *outs;
        if (!PyArg_ParseTuple(spec, "iOOO", &n, &callable, &ins, &outs)) return -1;
        Py_INCREF(callable);
        s->callable = callable;
        if (!(s->in_slots = int_array(ins, &s->n_in))) return -1;
        if (!(s->out_slots = int_array(outs, &s->n_out))) return -1;
        return 0;
    }
    unsigned long long run_ptr, shape_ptr, view_ptr = 0;
    int alloc = 0, context = 0;
    PyObject *ins, *outs, *typenums, *ndims, *alias;
    if (!PyArg_ParseTuple(spec, "iKKiOOOOO|Kii", &n, &run_ptr, &shape_ptr, &s->kind, &ins,
                          &outs, &typenums, &ndims, &alias, &view_ptr, &alloc, &context))
        return -1;
    if (alloc < 0 || alloc >= n_allocators || context < 0 || context >= n_allocators) {
        PyErr_Format(PyExc_ValueError, "no allocator number %d (register_allocator)",
                     alloc < 0 || alloc >= n_allocators ? alloc : context);
        return -1;
    }
    s->alloc = allocators[alloc];
    /* 0, the host's, has nothing to enter */
    s->context = context > 0 ? allocators[context] : NULL;
    s->run = (sg_run_fn)(uintptr_t)run_ptr;
    s->shape = (sg_shape_fn)(uintptr_t)shape_ptr;
    s->view = (sg_view_fn)(uintptr_t)view_ptr;
    if (s->kind < SG_COMPUTE || s->kind > SG_VIEW_OR_COPY) {
        PyErr_Format(PyExc_ValueError, "unknown kernel kind %d", s->kind);
        return -1;
    }
    if ((s->kind == SG_COMPUTE || s->kind == SG_VIEW_OR_COPY) && s->shape == NULL) {
        PyErr_SetString(PyExc_ValueError, "a compute kernel needs a shape function");
        return -1;
    }
    if (s->kind == SG_VIEW_OR_COPY && s->view == NULL) {
        PyErr_SetString(PyExc_ValueError, "a view-or-copy kernel needs a view function");
        return -1;
    }
    if (!(s->in_slots = int_array(ins, &s->n_in))) return -1;
    if (!(s->out_slots = int_array(outs, &s->n_out))) return -1;
    if (!(s->out_typenums = int_array(typenums, NULL))) return -1;
    if (!(s->out_ndims = int_array(ndims, NULL))) return -1;
    if (!(s->alias = int_array(alias, NULL))) return -1;
    s->in_desc = PyMem_Calloc(s->n_in > 0 ? s->n_in : 1, sizeof(sg_array));
    s->out_desc = PyMem_Calloc(s->n_out > 0 ? s->n_out : 1, sizeof(sg_array));
    s->shapes = PyMem_Calloc((s->n_out > 0 ? s->n_out : 1) * SG_MAXDIMS, sizeof(int64_t));
    if (!s->in_desc || !s->out_desc || !s->shapes) { PyErr_NoMemory(); return -1; }
    /* A view-or-copy slot is reusable too: clear_slots keeps only its copies. */
    if (s->kind == SG_COMPUTE || s->kind == SG_VIEW_OR_COPY)
        for (int k = 0; k < s->n_out; k++) p->reusable[s->out_slots[k]] = 1;
    return 0;
}

/* Program(n_slots, inputs, steps, outputs)
 *   inputs:  ((slot, typenum, ndim, static_shape), ...)
 *   steps:   native (0, run_ptr, shape_ptr, kind, in_slots, out_slots, typenums, ndims, alias
 *                    [, view_ptr[, allocator[, context]]])   (view_ptr: SG_VIEW_OR_COPY
 *                    kernels; allocator: of the outputs, a register_allocator number,
 *                    0: host; context: the allocator whose enter() selects the step's
 *                    device before it runs, 0: none)
 *            python (1, callable, in_slots, out_slots)
 *            select (2, as_view, in_slots, out_slots, typenums): an ifelse
 *   outputs: (slot, ...)
 */
static int Program_init(Program *p, PyObject *args, PyObject *kwds) {
    PyObject *inputs, *steps, *outputs;
    if (!PyArg_ParseTuple(args, "iO!O!O", &p->n_slots, &PyTuple_Type, &inputs,
                          &PyTuple_Type, &steps, &outputs))
        return -1;
    p->slots = PyMem_Calloc(p->n_slots > 0 ? p->n_slots : 1, sizeof(PyObject *));
    p->keep = PyMem_Calloc(p->n_slots > 0 ? p->n_slots : 1, 1);
    p->reusable = PyMem_Calloc(p->n_slots > 0 ? p->n_slots : 1, 1);
    p->n_inputs = (int)PyTuple_GET_SIZE(inputs);
    p->inputs = PyMem_Calloc(p->n_inputs > 0 ? p->n_inputs : 1, sizeof(InputSpec));
    p->n_steps = (int)PyTuple_GET_SIZE(steps);
    p->steps = PyMem_Calloc(p->n_steps > 0 ? p->n_steps : 1, sizeof(Step));
    p->step_seconds = PyMem_Calloc(p->n_steps > 0 ? p->n_steps : 1, sizeof(double));
    p->step_calls = PyMem_Calloc(p->n_steps > 0 ? p->n_steps : 1, sizeof(long));
    if (!p->step_seconds || !p->step_calls || !p->slots || !p->keep || !p->reusable || !p->inputs || !p->steps) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < p->n_inputs; i++) {
        PyObject *shape;
        InputSpec *spec = &p->inputs[i];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(inputs, i), "iiiO", &spec->slot, &spec->typenum,
                              &spec->ndim, &shape))
            return -1;
        int n = 0;
        int *dims = int_array(shape, &n);
        if (dims == NULL) return -1;
        for (int d = 0; d < SG_MAXDIMS; d++) spec->static_shape[d] = d < n ? dims[d] : -1;
        PyMem_Free(dims);
    }
    for (int i = 0; i < p->n_steps; i++) {
        if (parse_step(p, PyTuple_GET_ITEM(steps, i), &p->steps[i]) < 0) return -1;
    }
    for (int i = 0; i < p->n_inputs; i++) p->reusable[p->inputs[i].slot] = 0;
    if (!(p->output_slots = int_array(outputs, &p->n_outputs))) return -1;
    p->failed_step = -1;
    return 0;
}

static PyMethodDef Program_methods[] = {
    {"run", (PyCFunction)Program_run, METH_VARARGS,
     "run(values, check=True) -> outputs: run the schedule on a tuple of input values."},
    {"slot", (PyCFunction)Program_slot, METH_VARARGS, "slot(i): the value in slot i."},
    {"call", (PyCFunction)Program_call, METH_VARARGS,
     "call(*args): a Function's call (see configure_call)."},
    {"configure_call", (PyCFunction)Program_configure_call, METH_VARARGS,
     "configure_call(n_explicit, shared_cells, copy_output, updates, unpack_single, check)."},
    {"set_constant", (PyCFunction)Program_set_constant, METH_VARARGS,
     "set_constant(i, value): a value kept in slot i across calls."},
    {"clear", (PyCFunction)Program_clear, METH_NOARGS, "Release every non-constant slot."},
    {"set_guards", (PyCFunction)Program_set_guards, METH_VARARGS,
     "set_guards(step, ((slot, truth), ...)): run the step only when the guards hold."},
    {"set_profile", (PyCFunction)Program_set_profile, METH_VARARGS,
     "set_profile(on): time every step from now on."},
    {"step_times", (PyCFunction)Program_step_times, METH_NOARGS,
     "((seconds, calls), ...) per step, while profiling."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Program_getset[] = {
    {"failed_step", (getter)Program_failed_step, NULL, "index of the step that failed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = SG_RUNTIME_NAME ".Program",
    .tp_basicsize = sizeof(Program),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A compiled function's schedule of native and Python steps.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Program_init,
    .tp_dealloc = (destructor)Program_dealloc,
    .tp_methods = Program_methods,
    .tp_getset = Program_getset,
};

/* -- Loop: a scan's steps, all native, run in C ------------------------------
 *
 * A Loop runs an inner Program (a scan's compiled step function whose every
 * step is native) once per step of the loop without Python in between.  Each
 * variable of the step has one descriptor: the step's inputs point into the
 * outer arrays (a sequence's entry t, a recurrent output's tap, a
 * non-sequence), intermediate values live in buffers the Loop allocates once
 * and keeps across calls, and a compute kernel that makes one of the step's
 * outputs writes it straight to its place in the result (a recurrent
 * output's history or ring, a mapped output's array).  Outputs that are views,
 * inputs or constants are copied there.  A ring holds at least lag + 1
 * entries (Python sizes it), so the entry a step writes is never a tap it
 * reads.  The kernels' shape functions run at every step, except for steps
 * whose inputs and outputs have static shapes (nothing can change).
 */
enum { LOOP_SEQ = 0, LOOP_TAP = 1, LOOP_NONSEQ = 2 };

/* A loop compiled whole (symgraph/backends/cpu/scan/scalar_loop.py): one
 * operand per step input, then per stored step output; operand k's entry at
 * step t is base[k] + pos * stride[k], pos starting at start[k], growing by
 * one per step and back to 0 at ring[k] (0: no ring). */
typedef int (*sg_loop_fn)(int64_t n, char *const *base, const int64_t *stride,
                          const int64_t *start, const int64_t *ring, int64_t *done,
                          sg_error *err);
enum { LOOP_REC = 0, LOOP_MAPPED = 1, LOOP_COND = 2 };

typedef struct {
    int kind, index;
    int64_t offset;            /* a tap: lag + tap, the entry read at step 0 */
    char *base;                /* per call: the array's data and first stride */
    int64_t stride, size;      /* size: a ring's entries (0: whole history) */
    int64_t pos;               /* the entry the current step reads */
} LoopInput;

typedef struct {
    int kind, index, slot, typenum, itemsize;
    int direct;                /* its kernel writes it at its place in the result */
    /* per call: where step t's entry goes */
    PyObject *array;           /* the result array (mapped: made at the first step) */
    char *base;
    int64_t stride, size, offset, entries;
    int64_t pos;               /* the entry the current step writes */
    int reverse, ndim;
    int64_t shape[SG_MAXDIMS], strides[SG_MAXDIMS];   /* one entry's */
} LoopOutput;

typedef struct {
    PyObject_HEAD
    Program *inner;
    int n_in, n_out, cond;     /* cond: the output holding the stop condition, -1 */
    LoopInput *ins;
    LoopOutput *outs;
    sg_array *desc;            /* per inner slot */
    char **temp;               /* per inner slot: the Loop's buffer */
    size_t *temp_bytes;
    int *dest_of;              /* per inner slot: the output written there directly, -1 */
    int *itemsize;             /* per inner slot that a kernel computes */
    int *typenum;              /* per inner slot (-1: unknown) */
    char *static_shapes;       /* per inner step */
    int failed_step;
    int64_t failed_t;
    sg_error err;              /* the kernels' (not cleared per step: 512 bytes) */
    sg_loop_fn compiled;       /* the whole loop as one C function (set_compiled), or NULL */
    PyObject *compiled_owner;  /* keeps its library loaded */
} Loop;

static PyObject *LoopShapeError;  /* Python words the message */

static inline void desc_copy(sg_array *d, const sg_array *s) {
    d->data = s->data;
    d->ndim = s->ndim;
    for (int i = 0; i < s->ndim; i++) { d->shape[i] = s->shape[i]; d->strides[i] = s->strides[i]; }
}

/* Entry positions move by one per step and wrap around in a ring (no
 * division in the loop). */
static inline int64_t next_pos(int64_t pos, int64_t step, int64_t size) {
    pos += step;
    return size && pos == size ? 0 : pos;
}

static inline char *output_entry(const LoopOutput *o, int64_t t, int64_t n) {
    (void)t; (void)n;
    return o->base + o->pos * o->stride;
}

static int itemsize_of(int typenum) {
    PyArray_Descr *d = PyArray_DescrFromType(typenum);
    if (d == NULL) return -1;
    PyObject *a = PyArray_Zeros(0, NULL, d, 0);   /* steals d */
    if (a == NULL) return -1;
    int size = (int)PyArray_ITEMSIZE((PyArrayObject *)a);
    Py_DECREF(a);
    return size;
}

static PyObject *shape_tuple(int ndim, const int64_t *shape) {
    PyObject *dims = PyTuple_New(ndim);
    if (dims == NULL) return NULL;
    for (int d = 0; d < ndim; d++) PyTuple_SET_ITEM(dims, d, PyLong_FromLongLong(shape[d]));
    return dims;
}

/* LoopShapeError(t, output, shape, expected shape) */
static int shape_error(int64_t t, int out, int ndim, const int64_t *shape,
                       const LoopOutput *expected) {
    PyObject *args = Py_BuildValue("(LiNN)", (long long)t, out, shape_tuple(ndim, shape),
                                   shape_tuple(expected->ndim, expected->shape));
    if (args != NULL) PyErr_SetObject(LoopShapeError, args);
    Py_XDECREF(args);
    return -1;
}

/* Output o's entries, made when its first value's shape is known (mapped
 * outputs), or checked against the shape its array gives each entry. */
static int output_fits(Loop *L, int o, int64_t t, int ndim, const int64_t *shape) {
    LoopOutput *out = &L->outs[o];
    if (out->array == NULL) {
        npy_intp dims[SG_MAXDIMS + 1];
        dims[0] = (npy_intp)out->entries;
        for (int d = 0; d < ndim; d++) dims[d + 1] = (npy_intp)shape[d];
        out->array = PyArray_SimpleNew(ndim + 1, dims, out->typenum);
        if (out->array == NULL) return -1;
        PyArrayObject *a = (PyArrayObject *)out->array;
        out->base = PyArray_BYTES(a);
        out->stride = PyArray_STRIDES(a)[0];
        out->ndim = ndim;
        for (int d = 0; d < ndim; d++) {
            out->shape[d] = shape[d];
            out->strides[d] = PyArray_STRIDES(a)[d + 1];
        }
        return 0;
    }
    int same = out->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = out->shape[d] == shape[d];
    return same ? 0 : shape_error(t, o, ndim, shape, out);
}

/* The outputs of compute step s described: its buffers, or the outputs' places. */
static int loop_outputs(Loop *L, Step *s, int64_t t, int64_t n) {
    for (int k = 0; k < s->n_out; k++) {
        int slot = s->out_slots[k], ndim = s->out_ndims[k];
        const int64_t *shape = s->shapes + k * SG_MAXDIMS;
        sg_array *d = &s->out_desc[k];
        int o = L->dest_of[slot];
        d->ndim = ndim;
        if (o >= 0) {
            if (output_fits(L, o, t, ndim, shape) < 0) return -1;
            d->data = output_entry(&L->outs[o], t, n);
            for (int i = 0; i < ndim; i++) {
                d->shape[i] = shape[i];
                d->strides[i] = L->outs[o].strides[i];
            }
            continue;
        }
        size_t bytes = (size_t)L->itemsize[slot];
        for (int i = ndim - 1; i >= 0; i--) {
            d->shape[i] = shape[i];
            d->strides[i] = (int64_t)bytes;
            bytes *= (size_t)shape[i];
        }
        if (bytes > L->temp_bytes[slot] || L->temp[slot] == NULL) {
            void *mem = NULL;
            if (posix_memalign(&mem, 64, bytes ? bytes : 1) != 0) { PyErr_NoMemory(); return -1; }
            free(L->temp[slot]);
            L->temp[slot] = mem;
            L->temp_bytes[slot] = bytes;
        }
        d->data = L->temp[slot];
    }
    return 0;
}

static void copy_strided(char *dst, const int64_t *ds, const char *src, const int64_t *ss,
                         const int64_t *shape, int ndim, int itemsize) {
    if (ndim == 0) { memcpy(dst, src, itemsize); return; }
    if (ndim == 1 && ds[0] == itemsize && ss[0] == itemsize) {
        memcpy(dst, src, (size_t)shape[0] * itemsize);
        return;
    }
    for (int64_t i = 0; i < shape[0]; i++)
        copy_strided(dst + i * ds[0], ds + 1, src + i * ss[0], ss + 1, shape + 1, ndim - 1,
                     itemsize);
}

static int truth(const char *p, int typenum) {
    switch (typenum) {
        case NPY_FLOAT: return *(const float *)p != 0.0f;
        case NPY_DOUBLE: return *(const double *)p != 0.0;
        case NPY_BOOL: case NPY_BYTE: case NPY_UBYTE: return *p != 0;
        case NPY_SHORT: case NPY_USHORT: return *(const int16_t *)p != 0;
        case NPY_INT: case NPY_UINT: return *(const int32_t *)p != 0;
        default: return *(const int64_t *)p != 0;   /* NPY_LONG and wider ints */
    }
}

/* 1 when the guards of step s hold (lazy ifelse), 0 when it is skipped.  A
 * condition not computed at this step (its data cleared at the start of the
 * call, or left from an earlier step) belongs to a branch not taken, and then
 * another guard of s fails too. */
static int loop_guards_hold(Loop *L, Step *s) {
    for (int g = 0; g < s->n_guards; g++) {
        const sg_array *d = &L->desc[s->guard_slots[g]];
        if (d->data == NULL) return 0;
        if (truth(d->data, L->typenum[s->guard_slots[g]]) != s->guard_truth[g]) return 0;
    }
    return 1;
}

/* An ifelse's choice: the chosen branch's values copied into the Loop's buffers. */
static int loop_select(Loop *L, Step *s) {
    const sg_array *c = &L->desc[s->in_slots[0]];
    if (c->data == NULL) {
        PyErr_SetString(PyExc_TypeError, "an ifelse's condition has no value");
        return -1;
    }
    int taken = truth(c->data, L->typenum[s->in_slots[0]]);
    for (int k = 0; k < s->n_out; k++) {
        const sg_array *src = &L->desc[s->in_slots[1 + k + (taken ? 0 : s->n_out)]];
        int slot = s->out_slots[k];
        sg_array *d = &L->desc[slot];
        size_t bytes = (size_t)L->itemsize[slot];
        d->ndim = src->ndim;
        for (int i = src->ndim - 1; i >= 0; i--) {
            d->shape[i] = src->shape[i];
            d->strides[i] = (int64_t)bytes;
            bytes *= (size_t)src->shape[i];
        }
        if (bytes > L->temp_bytes[slot] || L->temp[slot] == NULL) {
            void *mem = NULL;
            if (posix_memalign(&mem, 64, bytes ? bytes : 1) != 0) { PyErr_NoMemory(); return -1; }
            free(L->temp[slot]);
            L->temp[slot] = mem;
            L->temp_bytes[slot] = bytes;
        }
        d->data = L->temp[slot];
        if (bytes)
            copy_strided(d->data, d->strides, src->data, src->strides, src->shape, src->ndim,
                         L->itemsize[slot]);
    }
    return 0;
}

/* One kernel of the step (the descriptors of its inputs already gathered). */
static int loop_kernel(Loop *L, Step *s, int k, int64_t t, int64_t n, sg_error *err) {
    if (enter_step(s) < 0) return -1;
    switch (s->kind) {
    case SG_COMPUTE:
        if (t > 0 && L->static_shapes[k]) {
            for (int j = 0; j < s->n_out; j++) {
                int o = L->dest_of[s->out_slots[j]];
                if (o >= 0) s->out_desc[j].data = output_entry(&L->outs[o], t, n);
            }
        } else {
            if (s->shape(s->in_desc, s->shapes, err)) return raise_kernel_error(err);
            if (loop_outputs(L, s, t, n) < 0) return -1;
        }
        break;
    case SG_VIEW_OR_COPY: {
        if (s->shape(s->in_desc, s->shapes, err)) return raise_kernel_error(err);
        int rc = s->view(s->in_desc, s->shapes, s->out_desc, err);
        if (rc == 0) return 0;
        if (rc != SG_NO_VIEW) return raise_kernel_error(err);
        if (loop_outputs(L, s, t, n) < 0) return -1;
        break;
    }
    case SG_INPLACE:
        if (check_inplace_shapes(s, err) < 0) return -1;
        for (int j = 0; j < s->n_out; j++) desc_copy(&s->out_desc[j], &s->in_desc[s->alias[j]]);
        break;
    default:
        break;
    }
    if (s->run(s->in_desc, s->out_desc, err)) return raise_kernel_error(err);
    return 0;
}

/* Step t of the loop: its inputs placed, its kernels run, its outputs stored.
 * 1 when the stop condition holds, 0 to go on, -1 on error. */
static int loop_step(Loop *L, int64_t t, int64_t n, double *kernel_seconds) {
    Program *p = L->inner;
    for (int i = 0; i < L->n_in; i++) {
        LoopInput *in = &L->ins[i];
        if (in->kind != LOOP_NONSEQ) {
            L->desc[p->inputs[i].slot].data = in->base + in->pos * in->stride;
            in->pos = next_pos(in->pos, 1, in->size);
        }
    }
    for (int k = 0; k < p->n_steps; k++) {
        Step *s = &p->steps[k];
        if (s->n_guards && !loop_guards_hold(L, s)) continue;
        double start = p->profile ? now_seconds() : 0.0;
        if (s->type == STEP_SELECT) {
            if (loop_select(L, s) < 0) {
                L->failed_step = k;
                L->failed_t = t;
                return -1;
            }
        } else {
            for (int i = 0; i < s->n_in; i++) desc_copy(&s->in_desc[i], &L->desc[s->in_slots[i]]);
            if (loop_kernel(L, s, k, t, n, &L->err) < 0) {
                L->failed_step = k;
                L->failed_t = t;
                return -1;
            }
            for (int j = 0; j < s->n_out; j++)
                desc_copy(&L->desc[s->out_slots[j]], &s->out_desc[j]);
        }
        if (p->profile) {
            double spent = now_seconds() - start;
            p->step_seconds[k] += spent;
            p->step_calls[k] += 1;
            *kernel_seconds += spent;
        }
    }
    for (int o = 0; o < L->n_out; o++) {
        LoopOutput *out = &L->outs[o];
        if (out->kind == LOOP_COND) continue;
        if (!out->direct) {
            const sg_array *src = &L->desc[out->slot];
            if (output_fits(L, o, t, src->ndim, src->shape) < 0) return -1;
            copy_strided(output_entry(out, t, n), out->strides, src->data, src->strides,
                         src->shape, src->ndim, out->itemsize);
        }
        out->pos = next_pos(out->pos, out->reverse ? -1 : 1, out->size);
    }
    if (L->cond >= 0) {
        LoopOutput *c = &L->outs[L->cond];
        return truth(L->desc[c->slot].data, c->typenum);
    }
    return 0;
}

/* The loop through its compiled function: the operands' places, as the
 * step-by-step loop would read and write them. */
static int run_compiled(Loop *L, int64_t n, long long *done) {
    int n_ops = L->n_in + L->n_out;
    char *base[n_ops > 0 ? n_ops : 1];
    int64_t stride[n_ops > 0 ? n_ops : 1], start[n_ops > 0 ? n_ops : 1];
    int64_t ring[n_ops > 0 ? n_ops : 1];
    for (int i = 0; i < L->n_in; i++) {
        LoopInput *in = &L->ins[i];
        base[i] = in->base; stride[i] = in->stride; start[i] = in->pos; ring[i] = in->size;
    }
    int k = L->n_in;
    for (int o = 0; o < L->n_out; o++) {
        LoopOutput *out = &L->outs[o];
        if (out->kind == LOOP_COND) continue;
        if (n > 0 && output_fits(L, o, 0, 0, NULL) < 0) return -1;
        base[k] = out->base; stride[k] = out->stride; start[k] = out->pos; ring[k] = out->size;
        if (out->reverse) {   /* walk it from its last entry */
            base[k] = out->base + (n - 1) * out->stride;
            stride[k] = -out->stride;
            start[k] = 0;
        }
        k++;
    }
    if (n == 0) { *done = 0; return 0; }
    int64_t ran = 0;
    if (L->compiled(n, base, stride, start, ring, &ran, &L->err)) return raise_kernel_error(&L->err);
    *done = ran;
    return 0;
}

/* set_compiled(address, owner): run the whole loop through the C function at
 * address (an sg_loop_fn) from now on; owner keeps its library loaded. */
static PyObject *Loop_set_compiled(Loop *L, PyObject *args) {
    unsigned long long address;
    PyObject *owner;
    if (!PyArg_ParseTuple(args, "KO", &address, &owner)) return NULL;
    Py_INCREF(owner);
    Py_XSETREF(L->compiled_owner, owner);
    L->compiled = (sg_loop_fn)(uintptr_t)address;
    Py_RETURN_NONE;
}

/* An outer array for inner input or output `what`: its dtype and rank checked. */
static PyArrayObject *loop_array(PyObject *v, int typenum, int ndim, const char *what, int i) {
    if (!PyArray_Check(v) || PyArray_TYPE((PyArrayObject *)v) != typenum ||
        PyArray_NDIM((PyArrayObject *)v) != ndim || !PyArray_ISALIGNED((PyArrayObject *)v) ||
        PyArray_ISBYTESWAPPED((PyArrayObject *)v)) {
        PyErr_Format(PyExc_TypeError, "Loop.run: %s %d is not an aligned array of type %d "
                     "and rank %d", what, i, typenum, ndim);
        return NULL;
    }
    return (PyArrayObject *)v;
}

static void describe_entry(sg_array *d, PyArrayObject *a, int skip) {
    d->data = PyArray_BYTES(a);
    d->ndim = PyArray_NDIM(a) - skip;
    for (int i = 0; i < d->ndim; i++) {
        d->shape[i] = PyArray_DIMS(a)[i + skip];
        d->strides[i] = PyArray_STRIDES(a)[i + skip];
    }
}

/* run(n_steps, sequences, recurrent, non_sequences, mapped)
 *   sequences: arrays whose entry t is step t's (reverse them first)
 *   recurrent: ((buffer, ring, lag), ...): a buffer whose first lag entries are
 *              the initial ones; ring: 0 for the whole history, else its size
 *   mapped:    ((reverse, ring), ...) per mapped output
 * -> (steps run, (mapped arrays or None, ...), seconds in kernels while profiling) */
static PyObject *Loop_run(Loop *L, PyObject *args) {
    long long n;
    PyObject *seqs, *recs, *nonseqs, *mapped;
    if (!PyArg_ParseTuple(args, "LO!O!O!O!", &n, &PyTuple_Type, &seqs, &PyTuple_Type, &recs,
                          &PyTuple_Type, &nonseqs, &PyTuple_Type, &mapped))
        return NULL;
    Program *p = L->inner;
    L->failed_step = -1;
    /* No value is computed yet (a lazy ifelse's guards see it), and none
     * points into the arrays of an earlier call. */
    for (int i = 0; i < p->n_slots; i++) L->desc[i].data = NULL;
    for (int i = 0; i < p->n_slots; i++) {   /* constants (and nothing else) have values */
        PyObject *v = p->keep[i] ? p->slots[i] : NULL;
        if (v != NULL && PyArray_Check(v)) describe_entry(&L->desc[i], (PyArrayObject *)v, 0);
    }
    for (int i = 0; i < L->n_in; i++) {
        LoopInput *in = &L->ins[i];
        InputSpec *spec = &p->inputs[i];
        PyObject *group = in->kind == LOOP_SEQ ? seqs : in->kind == LOOP_TAP ? recs : nonseqs;
        if (in->index >= PyTuple_GET_SIZE(group)) {
            PyErr_SetString(PyExc_ValueError, "Loop.run: fewer arrays than the step reads");
            return NULL;
        }
        PyObject *v = PyTuple_GET_ITEM(group, in->index);
        if (in->kind == LOOP_TAP) v = PyTuple_GetItem(v, 0);
        if (v == NULL) return NULL;
        PyArrayObject *a = loop_array(v, spec->typenum, spec->ndim + (in->kind != LOOP_NONSEQ),
                                      "input", i);
        if (a == NULL) return NULL;
        describe_entry(&L->desc[spec->slot], a, in->kind != LOOP_NONSEQ);
        in->base = PyArray_BYTES(a);
        in->stride = in->kind == LOOP_NONSEQ ? 0 : PyArray_STRIDES(a)[0];
        in->size = 0;
        long long lag;
        if (in->kind == LOOP_TAP &&
            !PyArg_ParseTuple(PyTuple_GET_ITEM(recs, in->index), "OLL", &v, &in->size, &lag))
            return NULL;
        in->pos = in->kind == LOOP_TAP ? (in->size ? in->offset % in->size : in->offset) : 0;
    }
    for (int o = 0; o < L->n_out; o++) {
        LoopOutput *out = &L->outs[o];
        Py_CLEAR(out->array);
        if (out->kind == LOOP_COND) continue;
        PyObject *group = out->kind == LOOP_REC ? recs : mapped;
        if (out->index >= PyTuple_GET_SIZE(group)) {
            PyErr_SetString(PyExc_ValueError, "Loop.run: fewer results than the step makes");
            return NULL;
        }
        PyObject *buf;
        long long ring, lag;
        if (out->kind == LOOP_REC) {
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(group, out->index), "OLL", &buf, &ring, &lag))
                return NULL;
            PyArrayObject *a = loop_array(buf, out->typenum, PyArray_Check(buf) ?
                                          PyArray_NDIM((PyArrayObject *)buf) : 1, "output", o);
            if (a == NULL) return NULL;
            Py_INCREF(buf);
            out->array = buf;
            out->base = PyArray_BYTES(a);
            out->stride = PyArray_STRIDES(a)[0];
            out->size = ring;
            out->reverse = 0;
            out->ndim = PyArray_NDIM(a) - 1;
            for (int d = 0; d < out->ndim; d++) {
                out->shape[d] = PyArray_DIMS(a)[d + 1];
                out->strides[d] = PyArray_STRIDES(a)[d + 1];
            }
            out->offset = lag;   /* step t writes entry lag + t */
            out->pos = ring ? lag % ring : lag;
            continue;
        }
        int reverse;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(group, out->index), "pL", &reverse, &ring))
            return NULL;
        out->reverse = reverse;
        out->size = ring ? (ring < n ? ring : n) : 0;
        out->entries = out->size ? out->size : n;
        out->offset = 0;
        out->pos = reverse ? n - 1 : 0;
    }
    double kernel_seconds = 0.0;
    long long done = n;
    if (L->compiled != NULL && !p->profile) {
        if (run_compiled(L, n, &done) < 0) return NULL;
        n = 0;   /* no step left for the loop below */
    }
    for (long long t = 0; t < n; t++) {
        int rc = loop_step(L, t, n, &kernel_seconds);
        if (rc < 0) return NULL;
        if (rc > 0) { done = t + 1; break; }
    }
    PyObject *arrays = PyTuple_New(L->n_out);
    if (arrays == NULL) return NULL;
    for (int o = 0; o < L->n_out; o++) {
        PyObject *a = L->outs[o].kind == LOOP_MAPPED && L->outs[o].array ? L->outs[o].array
                                                                          : Py_None;
        Py_INCREF(a);
        PyTuple_SET_ITEM(arrays, o, a);
        Py_CLEAR(L->outs[o].array);
    }
    return Py_BuildValue("(LNd)", done, arrays, kernel_seconds);
}

/* failed() -> (step of the loop, index of the inner step, its inputs' copies) */
static PyObject *Loop_failed(Loop *L, PyObject *unused) {
    if (L->failed_step < 0) Py_RETURN_NONE;
    Step *s = &L->inner->steps[L->failed_step];
    PyObject *values = PyTuple_New(s->n_in);
    if (values == NULL) return NULL;
    for (int i = 0; i < s->n_in; i++) {
        const sg_array *d = &L->desc[s->in_slots[i]];
        npy_intp dims[SG_MAXDIMS], strides[SG_MAXDIMS];
        for (int k = 0; k < d->ndim; k++) { dims[k] = d->shape[k]; strides[k] = d->strides[k]; }
        int typenum = NPY_DOUBLE;
        for (int j = 0; j < L->inner->n_steps; j++) {   /* who made the slot decides its type */
            Step *w = &L->inner->steps[j];
            for (int k = 0; k < w->n_out; k++)
                if (w->out_slots[k] == s->in_slots[i]) typenum = w->out_typenums[k];
        }
        for (int j = 0; j < L->inner->n_inputs; j++)
            if (L->inner->inputs[j].slot == s->in_slots[i]) typenum = L->inner->inputs[j].typenum;
        PyObject *c = L->inner->slots[s->in_slots[i]];
        if (c != NULL && PyArray_Check(c)) typenum = PyArray_TYPE((PyArrayObject *)c);
        PyObject *view = PyArray_New(&PyArray_Type, d->ndim, dims, typenum, strides, d->data,
                                     0, 0, NULL);
        PyObject *copy = view ? PyArray_NewCopy((PyArrayObject *)view, NPY_CORDER) : NULL;
        Py_XDECREF(view);
        if (copy == NULL) { Py_DECREF(values); return NULL; }
        PyTuple_SET_ITEM(values, i, copy);
    }
    return Py_BuildValue("(LiN)", (long long)L->failed_t, L->failed_step, values);
}

/* Loop(program, inputs, outputs, static_shapes)
 *   inputs:  per inner input (kind, index, offset): LOOP_SEQ i, LOOP_TAP of
 *            recurrent output i at entry offset + t, LOOP_NONSEQ i
 *   outputs: per inner output (kind, index): LOOP_REC, LOOP_MAPPED, LOOP_COND
 *   static_shapes: per inner step, whether its shapes are the same at every step */
static int Loop_init(Loop *L, PyObject *args, PyObject *kwds) {
    PyObject *program, *inputs, *outputs, *statics;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &ProgramType, &program, &PyTuple_Type, &inputs,
                          &PyTuple_Type, &outputs, &PyTuple_Type, &statics))
        return -1;
    Program *p = (Program *)program;
    Py_INCREF(program);
    Py_XSETREF(L->inner, p);
    L->n_in = (int)PyTuple_GET_SIZE(inputs);
    L->n_out = (int)PyTuple_GET_SIZE(outputs);
    if (L->n_in != p->n_inputs || L->n_out != p->n_outputs ||
        PyTuple_GET_SIZE(statics) != p->n_steps) {
        PyErr_SetString(PyExc_ValueError, "Loop: the roles do not match the step's program");
        return -1;
    }
    for (int k = 0; k < p->n_steps; k++)
        if (p->steps[k].type == STEP_PYTHON) {
            PyErr_SetString(PyExc_TypeError, "Loop: the step function has a Python step");
            return -1;
        }
    int n_slots = p->n_slots > 0 ? p->n_slots : 1;
    L->ins = PyMem_Calloc(L->n_in > 0 ? L->n_in : 1, sizeof(LoopInput));
    L->outs = PyMem_Calloc(L->n_out > 0 ? L->n_out : 1, sizeof(LoopOutput));
    L->desc = PyMem_Calloc(n_slots, sizeof(sg_array));
    L->temp = PyMem_Calloc(n_slots, sizeof(char *));
    L->temp_bytes = PyMem_Calloc(n_slots, sizeof(size_t));
    L->dest_of = PyMem_Calloc(n_slots, sizeof(int));
    L->itemsize = PyMem_Calloc(n_slots, sizeof(int));
    L->typenum = PyMem_Calloc(n_slots, sizeof(int));
    L->static_shapes = PyMem_Calloc(p->n_steps > 0 ? p->n_steps : 1, 1);
    if (!L->ins || !L->outs || !L->desc || !L->temp || !L->temp_bytes || !L->dest_of ||
        !L->itemsize || !L->typenum || !L->static_shapes) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < n_slots; i++) {
        L->dest_of[i] = -1;
        PyObject *c = i < p->n_slots ? p->slots[i] : NULL;
        L->typenum[i] = c != NULL && PyArray_Check(c) ? PyArray_TYPE((PyArrayObject *)c) : -1;
    }
    for (int i = 0; i < p->n_inputs; i++) L->typenum[p->inputs[i].slot] = p->inputs[i].typenum;
    for (int i = 0; i < L->n_in; i++) {
        LoopInput *in = &L->ins[i];
        long long offset;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(inputs, i), "iiL", &in->kind, &in->index, &offset))
            return -1;
        in->offset = offset;
        if (p->inputs[i].typenum < 0) {
            PyErr_SetString(PyExc_TypeError, "Loop: a step input is not an array");
            return -1;
        }
    }
    char *computed = PyMem_Calloc(n_slots, 1);   /* slots that compute kernels make */
    if (computed == NULL) { PyErr_NoMemory(); return -1; }
    for (int k = 0; k < p->n_steps; k++) {
        Step *s = &p->steps[k];
        L->static_shapes[k] = (char)PyObject_IsTrue(PyTuple_GET_ITEM(statics, k));
        for (int j = 0; j < s->n_out; j++) {
            int size = itemsize_of(s->out_typenums[j]);
            if (size < 0) { PyMem_Free(computed); return -1; }
            L->itemsize[s->out_slots[j]] = size;
            L->typenum[s->out_slots[j]] = s->out_typenums[j];
            if (s->type == STEP_NATIVE && s->kind == SG_COMPUTE) computed[s->out_slots[j]] = 1;
        }
    }
    L->cond = -1;
    for (int o = 0; o < L->n_out; o++) {
        LoopOutput *out = &L->outs[o];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(outputs, o), "ii", &out->kind, &out->index)) {
            PyMem_Free(computed);
            return -1;
        }
        out->slot = p->output_slots[o];
        if (out->kind == LOOP_COND) L->cond = o;
    }
    for (int o = 0; o < L->n_out; o++) {
        LoopOutput *out = &L->outs[o];
        /* The output's dtype: its kernel's, or its input's or constant's. */
        out->typenum = -1;
        for (int k = 0; k < p->n_steps; k++)
            for (int j = 0; j < p->steps[k].n_out; j++)
                if (p->steps[k].out_slots[j] == out->slot) out->typenum = p->steps[k].out_typenums[j];
        for (int i = 0; i < p->n_inputs; i++)
            if (p->inputs[i].slot == out->slot) out->typenum = p->inputs[i].typenum;
        PyObject *c = p->slots[out->slot];
        if (out->typenum < 0 && c != NULL && PyArray_Check(c))
            out->typenum = PyArray_TYPE((PyArrayObject *)c);
        if (out->typenum < 0) {
            PyMem_Free(computed);
            PyErr_SetString(PyExc_TypeError, "Loop: a step output is not an array");
            return -1;
        }
        out->itemsize = itemsize_of(out->typenum);
        if (out->itemsize < 0) { PyMem_Free(computed); return -1; }
        /* Written in place by its kernel: computed, and no other output is the same value. */
        int unique = 1;
        for (int q = 0; q < L->n_out; q++)
            if (q != o && L->outs[q].slot == out->slot) unique = 0;
        out->direct = out->kind != LOOP_COND && computed[out->slot] && unique;
        if (out->direct) L->dest_of[out->slot] = o;
    }
    PyMem_Free(computed);
    L->failed_step = -1;
    return 0;
}

static void Loop_dealloc(Loop *L) {
    if (L->inner != NULL && L->temp != NULL)
        for (int i = 0; i < L->inner->n_slots; i++) free(L->temp[i]);
    for (int o = 0; L->outs && o < L->n_out; o++) Py_XDECREF(L->outs[o].array);
    PyMem_Free(L->ins); PyMem_Free(L->outs); PyMem_Free(L->desc); PyMem_Free(L->temp);
    PyMem_Free(L->temp_bytes); PyMem_Free(L->dest_of); PyMem_Free(L->itemsize);
    PyMem_Free(L->typenum);
    PyMem_Free(L->static_shapes);
    Py_XDECREF(L->inner);
    Py_XDECREF(L->compiled_owner);
    Py_TYPE(L)->tp_free((PyObject *)L);
}

static PyMethodDef Loop_methods[] = {
    {"run", (PyCFunction)Loop_run, METH_VARARGS,
     "run(n_steps, sequences, recurrent, non_sequences, mapped) -> (steps run, mapped "
     "arrays, seconds in kernels)."},
    {"set_compiled", (PyCFunction)Loop_set_compiled, METH_VARARGS,
     "set_compiled(address, owner): run the loop through a compiled sg_loop_fn."},
    {"failed", (PyCFunction)Loop_failed, METH_NOARGS,
     "failed() -> (step, inner step, its input values) after an error, else None."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LoopType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = SG_RUNTIME_NAME ".Loop",
    .tp_basicsize = sizeof(Loop),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A scan's step program run n times in C.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Loop_init,
    .tp_dealloc = (destructor)Loop_dealloc,
    .tp_methods = Loop_methods,
};

/* register_allocator(capsule) -> number: the steps of a backend name it. */
static PyObject *register_allocator(PyObject *module, PyObject *capsule) {
    (void)module;
    const sg_allocator *alloc = PyCapsule_GetPointer(capsule, SG_ALLOCATOR_CAPSULE);
    if (alloc == NULL) return NULL;
    if (alloc->abi != SG_ALLOCATOR_ABI || !alloc->empty || !alloc->describe || !alloc->fits ||
        !alloc->view) {
        PyErr_Format(PyExc_ValueError, "allocator %.100s: ABI %d or a missing function (this "
                     "runtime takes ABI %d with every function)", alloc->name ? alloc->name : "?",
                     alloc->abi, SG_ALLOCATOR_ABI);
        return NULL;
    }
    for (int i = 0; i < n_allocators; i++)
        if (allocators[i] == alloc) return PyLong_FromLong(i);
    if (n_allocators == SG_MAX_ALLOCATORS) {
        PyErr_SetString(PyExc_RuntimeError, "too many allocators registered");
        return NULL;
    }
    Py_INCREF(capsule);   /* the capsule's owner keeps the struct alive: keep the owner */
    allocator_capsules[n_allocators] = capsule;
    allocators[n_allocators] = alloc;
    return PyLong_FromLong(n_allocators++);
}

static PyObject *host_allocator_capsule(PyObject *module, PyObject *unused) {
    (void)module; (void)unused;
    return PyCapsule_New((void *)&host_allocator, SG_ALLOCATOR_CAPSULE, NULL);
}

static PyMethodDef runtime_functions[] = {
    {"register_allocator", (PyCFunction)register_allocator, METH_O,
     "register_allocator(capsule) -> number: an allocator (sg_allocator.h) for steps."},
    {"host_allocator", (PyCFunction)host_allocator_capsule, METH_NOARGS,
     "host_allocator() -> capsule: the runtime's own allocator (NumPy arrays)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef runtime_module = {
    PyModuleDef_HEAD_INIT, SG_RUNTIME_NAME,
    "symgraph's native runtime (see c_src/runtime.c).", -1, runtime_functions,
};

PyMODINIT_FUNC SG_RUNTIME_INIT(void) {
    import_array();
    if (PyType_Ready(&ProgramType) < 0) return NULL;
    PyObject *m = PyModule_Create(&runtime_module);
    if (m == NULL) return NULL;
    Py_INCREF(&ProgramType);
    PyModule_AddObject(m, "Program", (PyObject *)&ProgramType);
    InputMismatch = PyErr_NewException(SG_RUNTIME_NAME ".InputMismatch", PyExc_TypeError, NULL);
    Py_INCREF(InputMismatch);
    PyModule_AddObject(m, "InputMismatch", InputMismatch);
    if (PyType_Ready(&LoopType) < 0) return NULL;
    Py_INCREF(&LoopType);
    PyModule_AddObject(m, "Loop", (PyObject *)&LoopType);
    LoopShapeError = PyErr_NewException(SG_RUNTIME_NAME ".LoopShapeError", PyExc_ValueError,
                                        NULL);
    Py_INCREF(LoopShapeError);
    PyModule_AddObject(m, "LoopShapeError", LoopShapeError);
    PyModule_AddStringConstant(m, "source_hash", SG_RUNTIME_SOURCE_HASH);
    return m;
}

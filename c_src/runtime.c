/* symgraph's native runtime: runs a compiled function's schedule in C.
 *
 * A Program holds one slot (a PyObject*) per variable of the graph and a list
 * of steps.  A native step calls a kernel through the ABI of sg_kernel.h; a
 * Python step calls back a callable for nodes without native code.  The
 * runtime checks the inputs, allocates outputs (reusing last call's buffer when
 * nothing else holds it, so large outputs do not fault in fresh pages on
 * every call) and wraps view outputs as NumPy views of their base.  A "view
 * or copy" step (SG_VIEW_OR_COPY) does either, per call, as its kernel's
 * view function decides from the input's strides.
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

enum { STEP_NATIVE = 0, STEP_PYTHON = 1 };

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
    SG_ALLOCATOR_ABI, "host", NULL, host_empty, host_describe, host_fits, host_view,
};

/* Allocators by number: 0 is the host's; backends add theirs (register_allocator).
 * Few backends exist, and a registered allocator lives as long as the process. */
#define SG_MAX_ALLOCATORS 16
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

static int run_native(Program *p, Step *s) {
    sg_error err = {0, {0}};
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
        double start = p->profile ? now_seconds() : 0.0;
        int rc = s->type == STEP_NATIVE ? run_native(p, s) : run_python(p, s);
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
    int alloc = 0;
    PyObject *ins, *outs, *typenums, *ndims, *alias;
    if (!PyArg_ParseTuple(spec, "iKKiOOOOO|Ki", &n, &run_ptr, &shape_ptr, &s->kind, &ins, &outs,
                          &typenums, &ndims, &alias, &view_ptr, &alloc))
        return -1;
    if (alloc < 0 || alloc >= n_allocators) {
        PyErr_Format(PyExc_ValueError, "no allocator number %d (register_allocator)", alloc);
        return -1;
    }
    s->alloc = allocators[alloc];
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
 *                    [, view_ptr[, allocator]])   (view_ptr: SG_VIEW_OR_COPY kernels;
 *                    allocator: of the outputs, a register_allocator number, 0: host)
 *            python (1, callable, in_slots, out_slots)
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
    PyModule_AddStringConstant(m, "source_hash", SG_RUNTIME_SOURCE_HASH);
    return m;
}

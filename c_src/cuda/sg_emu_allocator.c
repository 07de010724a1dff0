/* The emulated device's memory: host memory in arrays of a class of its own.
 *
 * With gpu.emulate, "device arrays" are instances of an ndarray subclass
 * (symgraph.backends.cuda.emulated_memory.EmulatedDeviceArray), so that they
 * can be told apart from host arrays (GpuArrayType.filter, the transfers) while
 * the emulated kernels read them directly.  This file is the runtime's
 * sg_allocator for them (c_src/sg_allocator.h): it makes, recognises, reuses
 * and views arrays of that class.  Loaded with ctypes (it is no extension
 * module): sg_emu_allocator_init hands it the class and imports NumPy's C API.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include "sg_kernel.h"
#include "sg_allocator.h"

static PyTypeObject *device_class;

static PyObject *emu_empty(void *ctx, int typenum, int ndim, const int64_t *shape) {
    (void)ctx;
    npy_intp dims[SG_MAXDIMS];
    for (int d = 0; d < ndim; d++) dims[d] = (npy_intp)shape[d];
    return PyArray_New(device_class, ndim, dims, typenum, NULL, NULL, 0, 0, NULL);
}

static int emu_describe(void *ctx, PyObject *v, sg_array *d) {
    (void)ctx;
    if (!PyObject_TypeCheck(v, device_class)) return 0;
    PyArrayObject *a = (PyArrayObject *)v;
    d->data = PyArray_BYTES(a);
    d->ndim = PyArray_NDIM(a);
    for (int i = 0; i < d->ndim; i++) {
        d->shape[i] = PyArray_DIMS(a)[i];
        d->strides[i] = PyArray_STRIDES(a)[i];
    }
    return 1;
}

static int emu_fits(void *ctx, PyObject *old, int typenum, int ndim, const int64_t *shape) {
    (void)ctx;
    if (Py_TYPE(old) != device_class) return 0;
    PyArrayObject *a = (PyArrayObject *)old;
    if (PyArray_TYPE(a) != typenum || PyArray_NDIM(a) != ndim || PyArray_BASE(a) != NULL ||
        !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISWRITEABLE(a))
        return 0;
    for (int d = 0; d < ndim; d++)
        if (PyArray_DIMS(a)[d] != (npy_intp)shape[d]) return 0;
    return 1;
}

static PyObject *emu_view(void *ctx, PyObject *base, const sg_array *d, int typenum) {
    (void)ctx;
    if (!PyObject_TypeCheck(base, device_class)) {
        PyErr_SetString(PyExc_TypeError, "an emulated device view's base is not a device array");
        return NULL;
    }
    npy_intp dims[SG_MAXDIMS], strides[SG_MAXDIMS];
    for (int i = 0; i < d->ndim; i++) { dims[i] = d->shape[i]; strides[i] = d->strides[i]; }
    PyObject *view = PyArray_NewFromDescr(device_class, PyArray_DescrFromType(typenum), d->ndim,
                                          dims, strides, d->data, NPY_ARRAY_WRITEABLE, NULL);
    if (view == NULL) return NULL;
    Py_INCREF(base);
    if (PyArray_SetBaseObject((PyArrayObject *)view, base) < 0) {
        Py_DECREF(view);
        return NULL;
    }
    return view;
}

__attribute__((visibility("default"))) sg_allocator sg_emu_allocator = {
    SG_ALLOCATOR_ABI, "emulated cuda", NULL, emu_empty, emu_describe, emu_fits, emu_view,
};

/* 0, or -1 with a Python error set. */
__attribute__((visibility("default"))) int sg_emu_allocator_init(PyObject *cls) {
    if (PyArray_API == NULL) import_array1(-1);
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "sg_emu_allocator_init wants the device array class");
        return -1;
    }
    Py_XDECREF((PyObject *)device_class);
    Py_INCREF(cls);
    device_class = (PyTypeObject *)cls;
    return 0;
}

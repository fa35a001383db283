/* What the native renderers' modules do alike when they load: their op codes as int constants (the Python
 * plans' copies are checked against them by the unit tests) and their RowsPlan type. */
#ifndef BINLAKE_MODULE_H
#define BINLAKE_MODULE_H

#include <Python.h>

typedef struct {
    const char *name;
    int value;
} NamedInt;

/* m with the constants and the type added, or NULL (m released) on a failure. */
static inline PyObject *module_with(PyObject *m, const NamedInt *names, size_t count, const char *type_name,
                                    PyTypeObject *type) {
    if (!m) return NULL;
    for (size_t i = 0; i < count; i++) {
        if (PyModule_AddIntConstant(m, names[i].name, names[i].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    Py_INCREF(type);
    if (PyModule_AddObject(m, type_name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

#endif

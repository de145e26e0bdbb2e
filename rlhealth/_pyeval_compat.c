/* PyEval_CallObject for durable-rules' C extension on Pythons that no longer export it (3.13+).
 *
 * durable-rules 2.0.28 (src/rulespy/rules.c) calls PyEval_CallObject(callable, args). Up to 3.12
 * that name is a header macro for PyEval_CallObjectWithKeywords(callable, args, NULL); 3.13 removed
 * the macro, so an extension compiled there references a function no interpreter exports and its
 * import fails with "undefined symbol: PyEval_CallObject". This module exports that function.
 * rlhealth.durable_loader loads it with global symbol visibility (RTLD_GLOBAL) before importing
 * durable_rules_engine, and only when that import fails for this symbol.
 *
 * Contract: same behaviour as CPython 3.12's PyEval_CallObject: args is a tuple or NULL (else
 * TypeError); returns a new reference, or NULL with an exception set. A caller compiled without a
 * declaration keeps only the low 32 bits of the result: durable-rules calls it only from callbacks
 * rlhealth never registers, so this module serves the dynamic linker, not those calls.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#undef PyEval_CallObject

Py_EXPORTED_SYMBOL PyObject *PyEval_CallObject(PyObject *callable, PyObject *args);

Py_EXPORTED_SYMBOL PyObject *
PyEval_CallObject(PyObject *callable, PyObject *args)
{
    return PyObject_CallObject(callable, args);
}

static struct PyModuleDef pyeval_compat_module = {
    PyModuleDef_HEAD_INIT,
    "rlhealth._pyeval_compat",
    "Exports the C function PyEval_CallObject for durable-rules on Python 3.13+ (no Python API).",
    0,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__pyeval_compat(void)
{
    return PyModule_Create(&pyeval_compat_module);
}

"""Negative controls for scripts/sanitize: its flags and environment make a test run fail on a bad read
or an overflow in an extension, and pass on a clean one.

A tiny extension module is built here with the script's own flags (``--cflags``) and tests calling
it are run through the script's environment (``--run``), as the sanitizer step runs tests/core.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "sanitize"

MODULE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdlib.h>

static PyObject *heap_read(PyObject *self, PyObject *arg) {
    char *volatile block = malloc(8);               /* volatile: out of UBSan's object-size sight */
    volatile char byte = block[8];                  /* one past the end */
    free(block);
    return PyLong_FromLong(byte);
}

static PyObject *bytes_read(PyObject *self, PyObject *arg) {
    /* Past the bytes object's own block (its data, then one NUL), as a parser reading beyond a
       reply would: only seen when Python objects come from malloc (PYTHONMALLOC=malloc). */
    volatile char byte = PyBytes_AS_STRING(arg)[PyBytes_GET_SIZE(arg) + 1];
    return PyLong_FromLong(byte);
}

static PyObject *overflow(PyObject *self, PyObject *arg) {
    volatile int big = INT_MAX;
    int sum = big + (int)PyLong_AsLong(arg);        /* signed overflow: undefined */
    return PyLong_FromLong(sum);
}

static PyObject *clean(PyObject *self, PyObject *arg) {
    char *block = malloc(8);
    block[7] = 7;
    long byte = block[7];
    free(block);
    return PyLong_FromLong(byte);
}

static PyMethodDef methods[] = {
    {"heap_read", heap_read, METH_NOARGS, NULL},
    {"bytes_read", bytes_read, METH_O, NULL},
    {"overflow", overflow, METH_O, NULL},
    {"clean", clean, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "sanitizer_control", NULL, -1, methods};
PyMODINIT_FUNC PyInit_sanitizer_control(void) { return PyModule_Create(&module); }
"""

TESTS = """
import sanitizer_control

def test_clean():
    assert sanitizer_control.clean() == 7

def test_heap_read():
    sanitizer_control.heap_read()

def test_bytes_read():
    sanitizer_control.bytes_read(b"reply")

def test_overflow():
    sanitizer_control.overflow(1)
"""


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the control extension, built with the sanitizer step's flags, and its tests."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("sanitizer_control")
    cflags = subprocess.run(["bash", str(SCRIPT), "--cflags"], check=True, capture_output=True,
                            text=True).stdout.split()
    (folder / "control.c").write_text(MODULE)
    target = folder / ("sanitizer_control" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", *cflags, f"-I{sysconfig.get_paths()['include']}",
                    str(folder / "control.c"), "-o", str(target)], check=True)
    (folder / "test_control.py").write_text(TESTS)
    return folder


def _run_under_sanitizers(folder: Path, test: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "--capture=sys", "-q", "-p", "no:cacheprovider",
               f"test_control.py::{test}"]
    env = {**os.environ, "PYTHONPATH": str(folder)}
    return subprocess.run(["bash", str(SCRIPT), "--run", *command], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_clean_extension_passes(control: Path) -> None:
    run = _run_under_sanitizers(control, "test_clean")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


@pytest.mark.parametrize(("test", "report"), [
    ("test_heap_read", "ERROR: AddressSanitizer: heap-buffer-overflow"),
    ("test_bytes_read", "ERROR: AddressSanitizer: heap-buffer-overflow"),
    ("test_overflow", "runtime error: signed integer overflow"),
])
def test_a_bad_extension_fails_the_run(control: Path, test: str, report: str) -> None:
    run = _run_under_sanitizers(control, test)
    assert run.returncode != 0
    assert report in run.stderr, run.stderr[-3000:]
    assert "passed" not in run.stdout  # halted inside the test, not reported after it

// gil.h - holding the GIL from any thread of the host.
//
// Every host thread takes the GIL through python::Gil, never through
// pybind11::gil_scoped_acquire, and keeps ONE Python thread state for its
// whole life instead of creating and deleting one per call.
//
// Why: a pybind11 module records the thread state of the thread that first
// imports it (pybind11's internals keep it in a thread-local slot and trust
// it later). torch 2.9 from PyPI carries its own pybind11 3.0; imported from
// a stage thread whose thread state was then deleted (PyGILState_Release or
// 2.10's gil_scoped_acquire do that when the outermost hold ends), the next
// tensor freed on that thread made torch re-acquire the GIL with the deleted
// state: SIGSEGV in PyEval_AcquireThread (issue 38, the FlashInfer evaluate
// stage with the PyPI environment). With a thread state that lives as long
// as its thread, the recorded one stays valid.
#pragma once

#include <Python.h>

namespace accelopt::python {

namespace detail {

/// Gives the calling thread a Python thread state that lives until the
/// thread exits. Threads Python already knows (the main thread, whose state
/// Py_Initialize made, and Python's own threads) keep theirs untouched.
class ThreadStateKeeper {
 public:
  ThreadStateKeeper() {
    if (PyGILState_GetThisThreadState() != nullptr) return;
    PyGILState_Ensure();  // creates the state, counter 1: it outlives every Gil below
    PyEval_SaveThread();  // and lets the GIL go again
    kept_ = true;
  }
  ~ThreadStateKeeper() {
    if (!kept_) return;
    // Thread exit: take the GIL back with this thread's state and let
    // PyGILState_Release delete it (its counter drops to 0).
    PyEval_RestoreThread(PyGILState_GetThisThreadState());
    PyGILState_Release(PyGILState_UNLOCKED);
  }
  ThreadStateKeeper(const ThreadStateKeeper&) = delete;
  ThreadStateKeeper& operator=(const ThreadStateKeeper&) = delete;

 private:
  bool kept_ = false;
};

inline void KeepThreadState() { thread_local ThreadStateKeeper keeper; }

}  // namespace detail

/// Holds the GIL for its lifetime; nests, and works on threads Python has
/// never seen (the first hold on such a thread gives it its lasting state).
class Gil {
 public:
  Gil() : state_((detail::KeepThreadState(), PyGILState_Ensure())) {}
  ~Gil() { PyGILState_Release(state_); }
  Gil(const Gil&) = delete;
  Gil& operator=(const Gil&) = delete;

 private:
  PyGILState_STATE state_;
};

}  // namespace accelopt::python

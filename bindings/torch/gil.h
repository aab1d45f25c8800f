// WithoutGil: lets go of Python's GIL for a scope where this thread holds it. What a call from
// Python does before it waits for other ranks or for a thread that may run Python callbacks
// (DDP's then(), completion hooks), so that those never wait for this thread.
#ifndef PLEXUS_BINDINGS_TORCH_GIL_H_
#define PLEXUS_BINDINGS_TORCH_GIL_H_

#include <Python.h>

namespace plexus::torch_backend {

class WithoutGil {
 public:
  WithoutGil() : state_(Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr) {}
  ~WithoutGil() {
    if (state_ != nullptr) PyEval_RestoreThread(state_);
  }
  WithoutGil(const WithoutGil&) = delete;
  WithoutGil& operator=(const WithoutGil&) = delete;

 private:
  PyThreadState* const state_;
};

}  // namespace plexus::torch_backend

#endif  // PLEXUS_BINDINGS_TORCH_GIL_H_

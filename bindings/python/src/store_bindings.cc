#include "bindings/python/src/store_bindings.h"

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/store/file_store.h"
#include "base/store/hash_store.h"
#include "base/store/prefix_store.h"
#include "base/store/tcp_store.h"
#include "bindings/python/src/durations.h"
#include "bindings/python/src/errors.h"
#include "bindings/python/src/py_ref.h"

namespace plexus::python {
namespace {

// Store values are bytes; callers may pass str (encoded as UTF-8) or any bytes-like object.
std::string ToBytes(py::handle value) {
  if (PyUnicode_Check(value.ptr())) return value.cast<std::string>();
  return py::bytes(py::reinterpret_borrow<py::object>(value)).cast<std::string>();
}

py::bytes Bytes(absl::string_view value) { return py::bytes(value.data(), value.size()); }
py::str Str(absl::string_view value) { return py::str(value.data(), value.size()); }

template <typename Fn>
auto Released(Fn&& fn) {
  py::gil_scoped_release release;
  return fn();
}

// A Store over a Python object with c10d's store methods.
class PythonStore : public Store {
 public:
  explicit PythonStore(py::handle object) : object_(object) {
    if (py::hasattr(object, "timeout")) {
      SetTimeout(ToDuration(object.attr("timeout"), kDefaultStoreTimeout, "store timeout"));
    }
  }

  absl::Status Set(absl::string_view key, absl::string_view value) override {
    return Call("set", [&](py::object store) { store.attr("set")(Str(key), Bytes(value)); });
  }
  absl::StatusOr<std::string> Get(absl::string_view key) override {
    std::string value;
    absl::Status status = Call("get", [&](py::object store) {
      value = py::bytes(store.attr("get")(Str(key))).cast<std::string>();
    });
    if (!status.ok()) return status;
    return value;
  }
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    int64_t value = 0;
    absl::Status status = Call("add", [&](py::object store) {
      value = store.attr("add")(Str(key), delta).cast<int64_t>();
    });
    if (!status.ok()) return status;
    return value;
  }
  absl::StatusOr<std::string> CompareSet(absl::string_view key, absl::string_view expected,
                                         absl::string_view desired) override {
    std::string value;
    absl::Status status = Call("compare_set", [&](py::object store) {
      value = py::bytes(store.attr("compare_set")(Str(key), Bytes(expected), Bytes(desired)))
                  .cast<std::string>();
    });
    if (!status.ok()) return status;
    return value;
  }
  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override {
    return Call("wait", [&](py::object store) {
      store.attr("wait")(std::vector<std::string>(keys.begin(), keys.end()), ToTimedelta(timeout));
    });
  }
  using Store::Wait;
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override {
    bool present = false;
    absl::Status status = Call("check", [&](py::object store) {
      std::vector<std::string> names(keys.begin(), keys.end());
      if (py::hasattr(store, "check")) {
        present = store.attr("check")(names).cast<bool>();
        return;
      }
      // torch's stores have no check(): a wait that gives up after a millisecond (zero would
      // mean "no timeout" to c10d).
      try {
        store.attr("wait")(names, ToTimedelta(absl::Milliseconds(1)));
        present = true;
      } catch (py::error_already_set& error) {
        if (StatusFromPython(error, "wait", absl::StatusCode::kUnavailable).code() !=
            absl::StatusCode::kDeadlineExceeded) {
          throw;
        }
      }
    });
    if (!status.ok()) return status;
    return present;
  }
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override {
    bool existed = false;
    absl::Status status = Call("delete_key", [&](py::object store) {
      existed = store.attr("delete_key")(Str(key)).cast<bool>();
    });
    if (!status.ok()) return status;
    return existed;
  }
  absl::StatusOr<int64_t> NumKeys() override {
    int64_t count = 0;
    absl::Status status = Call(
        "num_keys", [&](py::object store) { count = store.attr("num_keys")().cast<int64_t>(); });
    if (!status.ok()) return status;
    return count;
  }
  absl::StatusOr<std::vector<std::string>> MultiGet(absl::Span<const std::string> keys) override {
    return MultiGetEach(*this, keys);
  }
  // Not atomic across keys: the Python store's own methods are all there is.
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override {
    return MultiSetEach(*this, keys, values);
  }
  // torch's stores have no append: a compare_set loop does it atomically.
  absl::Status Append(absl::string_view key, absl::string_view value) override {
    return AppendByCompareSet(*this, key, value);
  }

 private:
  template <typename Fn>
  absl::Status Call(absl::string_view method, Fn&& fn) {
    absl::Status status = absl::AbortedError(
        absl::StrCat("python store ", method, ": the interpreter is shutting down"));
    WithGil([&] {
      try {
        fn(object_.get());
        status = absl::OkStatus();
      } catch (py::error_already_set& error) {
        status = StatusFromPython(error, absl::StrCat("python store ", method),
                                  absl::StatusCode::kUnavailable);
      }
    });
    return status;
  }

  PyRef object_;
};

}  // namespace

std::shared_ptr<Store> StoreFromPython(py::handle object) {
  if (py::isinstance<Store>(object)) return object.cast<std::shared_ptr<Store>>();
  for (const char* method : {"set", "get", "add", "wait"}) {
    if (!py::hasattr(object, method)) {
      throw StatusError(absl::InvalidArgumentError(
          absl::StrCat("store: a ", Py_TYPE(object.ptr())->tp_name, " has no ", method,
                       "() method; pass a plexus store or one with c10d's store methods")));
    }
  }
  return std::make_shared<PythonStore>(object);
}

namespace {

using StoreClass = py::class_<Store, std::shared_ptr<Store>>;

// Store's calls on one key: set, get, add, compare_set, append, delete_key.
void DefineKeyCalls(StoreClass& store_class) {
  store_class
      .def(
          "set",
          [](Store& store, const std::string& key, py::handle value) {
            std::string bytes = ToBytes(value);
            ThrowIfError(Released([&] { return store.Set(key, bytes); }));
          },
          py::arg("key"), py::arg("value"))
      .def(
          "get",
          [](Store& store, const std::string& key) {
            return py::bytes(ValueOrThrow(Released([&] { return store.Get(key); })));
          },
          py::arg("key"), "Waits up to the store's timeout for `key`, then returns its value.")
      .def(
          "add",
          [](Store& store, const std::string& key, int64_t delta) {
            return ValueOrThrow(Released([&] { return store.Add(key, delta); }));
          },
          py::arg("key"), py::arg("amount"))
      .def(
          "compare_set",
          [](Store& store, const std::string& key, py::handle expected, py::handle desired) {
            std::string want = ToBytes(expected), put = ToBytes(desired);
            return py::bytes(
                ValueOrThrow(Released([&] { return store.CompareSet(key, want, put); })));
          },
          py::arg("key"), py::arg("expected_value"), py::arg("desired_value"))
      .def(
          "append",
          [](Store& store, const std::string& key, py::handle value) {
            std::string bytes = ToBytes(value);
            ThrowIfError(Released([&] { return store.Append(key, bytes); }));
          },
          py::arg("key"), py::arg("value"))
      .def(
          "delete_key",
          [](Store& store, const std::string& key) {
            return ValueOrThrow(Released([&] { return store.DeleteKey(key); }));
          },
          py::arg("key"));
}

// Store's calls on several keys, and its timeout.
void DefineKeySetCalls(StoreClass& store_class) {
  store_class
      .def(
          "wait",
          [](Store& store, const std::vector<std::string>& keys, py::handle timeout) {
            absl::Duration limit = ToDuration(timeout, store.timeout(), "Store.wait timeout");
            ThrowIfError(Released([&] { return store.Wait(keys, limit); }));
          },
          py::arg("keys"), py::arg("timeout") = py::none())
      .def(
          "check",
          [](Store& store, const std::vector<std::string>& keys) {
            return ValueOrThrow(Released([&] { return store.Check(keys); }));
          },
          py::arg("keys"))
      .def("num_keys",
           [](Store& store) { return ValueOrThrow(Released([&] { return store.NumKeys(); })); })
      .def(
          "multi_get",
          [](Store& store, const std::vector<std::string>& keys) {
            std::vector<std::string> values =
                ValueOrThrow(Released([&] { return store.MultiGet(keys); }));
            py::list out;
            for (const std::string& value : values) out.append(Bytes(value));
            return out;
          },
          py::arg("keys"))
      .def(
          "multi_set",
          [](Store& store, const std::vector<std::string>& keys, py::sequence values) {
            std::vector<std::string> bytes;
            for (py::handle value : values) bytes.push_back(ToBytes(value));
            ThrowIfError(Released([&] { return store.MultiSet(keys, bytes); }));
          },
          py::arg("keys"), py::arg("values"))
      .def(
          "set_timeout",
          [](Store& store, py::handle timeout) {
            store.SetTimeout(ToDuration(timeout, kDefaultStoreTimeout, "Store.set_timeout"));
          },
          py::arg("timeout"))
      .def_property_readonly("timeout", [](Store& store) { return ToTimedelta(store.timeout()); });
}

// Store, the interface every kind shares (c10d's API).
void DefineStore(py::module_& module) {
  StoreClass store_class(module, "Store", "Key-value store ranks meet through (c10d's API).");
  DefineKeyCalls(store_class);
  DefineKeySetCalls(store_class);
}

// HashStore, FileStore, TCPStore, PrefixStore.
void DefineStoreKinds(py::module_& module) {
  py::class_<HashStore, Store, std::shared_ptr<HashStore>>(module, "HashStore",
                                                           "A store in this process's memory.")
      .def(py::init([]() { return std::make_shared<HashStore>(); }));

  py::class_<FileStore, Store, std::shared_ptr<FileStore>>(
      module, "FileStore", "A store shared through a file (processes on one file system).")
      .def(py::init([](const std::string& file_name, int world_size, py::handle timeout) {
             (void)world_size;  // Accepted for torch compatibility; the file is not deleted.
             absl::Duration limit = ToDuration(timeout, kDefaultStoreTimeout, "FileStore timeout");
             std::shared_ptr<FileStore> store =
                 ValueOrThrow(Released([&] { return FileStore::Open(file_name, limit); }));
             return store;
           }),
           py::arg("file_name"), py::arg("world_size") = -1, py::arg("timeout") = py::none())
      .def_property_readonly("path", &FileStore::path);

  py::class_<TCPStore, Store, std::shared_ptr<TCPStore>>(
      module, "TCPStore",
      "A store served over TCP: the process with is_master=True hosts it (port 0 picks one).")
      .def(py::init([](const std::string& host_name, int port, py::handle world_size,
                       bool is_master, py::handle timeout, bool wait_for_workers,
                       std::optional<std::string> secret) {
             TCPStoreOptions options;
             options.secret = std::move(secret);
             options.host = host_name;
             options.port = port;
             options.is_server = is_master;
             options.world_size = world_size.is_none() ? 0 : world_size.cast<int>();
             options.wait_for_workers = wait_for_workers;
             options.timeout = ToDuration(timeout, kDefaultStoreTimeout, "TCPStore timeout");
             std::shared_ptr<TCPStore> store =
                 ValueOrThrow(Released([&] { return TCPStore::Create(options); }));
             return store;
           }),
           py::arg("host_name"), py::arg("port"), py::arg("world_size") = py::none(),
           py::arg("is_master") = false, py::arg("timeout") = py::none(),
           py::arg("wait_for_workers") = true, py::arg("secret") = py::none())
      .def_property_readonly("host", &TCPStore::host)
      .def_property_readonly("port", &TCPStore::port);

  py::class_<PrefixStore, Store, std::shared_ptr<PrefixStore>>(
      module, "PrefixStore", "A namespace in another store: keys become '<prefix>/<key>'.")
      .def(py::init([](const std::string& prefix, py::handle store) {
             return std::make_shared<PrefixStore>(prefix, StoreFromPython(store));
           }),
           py::arg("prefix"), py::arg("store"))
      .def_property_readonly("prefix", &PrefixStore::prefix)
      .def_property_readonly("underlying_store", &PrefixStore::base);
}

}  // namespace

void RegisterStores(py::module_& module) {
  DefineStore(module);
  DefineStoreKinds(module);
}

}  // namespace plexus::python

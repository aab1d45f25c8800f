"""Repositories for the Debian system libraries plexus builds against (nothing is downloaded).

Headers under /usr/include are on the compiler's built-in search path, so those libraries need
only link options; the rest are exposed as local repositories with their headers declared.
"""

def _python_headers_impl(rctx):
    python = rctx.attr.interpreter
    script = "import sysconfig as s, sys; print(s.get_paths()['include']); " + \
             "print(s.get_config_var('LIBDIR')); print(s.get_config_var('LDVERSION')); " + \
             "print('cp%d%d' % sys.version_info[:2]); " + \
             "print(s.get_platform().replace('-', '_').replace('.', '_'))"
    result = rctx.execute([python, "-c", script])
    if result.return_code != 0:
        fail("cannot ask %s for its include directory: %s" % (python, result.stderr))
    include_dir, lib_dir, ld_version, python_tag, platform_tag = result.stdout.strip().split("\n")
    rctx.symlink(include_dir, "include")
    # What a wheel built against this interpreter is tagged with, and where the interpreter is.
    rctx.file("defs.bzl", "PYTHON_TAG = %r\nPLATFORM_TAG = %r\nINTERPRETER = %r\n" %
                          (python_tag, platform_tag, python))
    rctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "python_headers",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
)

# For programs that embed the interpreter (extension modules must not link it).
cc_library(
    name = "python_embed",
    linkopts = ["-L%s", "-lpython%s"],
    deps = [":python_headers"],
)
""" % (lib_dir, ld_version))

python_headers_repository = repository_rule(
    implementation = _python_headers_impl,
    attrs = {"interpreter": attr.string(default = "/usr/bin/python3")},
    local = True,
)

def _cuda_impl(rctx):
    root = rctx.os.environ.get("PLEXUS_CUDA_ROOT", "/usr/local/cuda")
    has_cuda = rctx.path(root + "/include/cuda_runtime.h").exists
    has_nccl = has_cuda and rctx.path(root + "/include/nccl.h").exists
    if has_cuda:
        rctx.symlink(root + "/include", "include")
        rctx.symlink(root + "/lib64", "lib64")
    rctx.file("defs.bzl", "CUDA_AVAILABLE = %s\nNCCL_AVAILABLE = %s\nCUDA_ROOT = %r\n" %
                          (has_cuda, has_nccl, root))
    build = ["package(default_visibility = [\"//visibility:public\"])", ""]
    if has_cuda:
        build.append("""
# Declarations only: plexus loads libcudart and libnccl at run time (devices/cuda), so a binary
# built here starts on machines without them and can use the copies torch has already loaded.
cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**"], allow_empty = True),
    includes = ["include", "include/cccl"],
)

cc_library(
    name = "cudart",
    hdrs = glob(["include/**"], allow_empty = True),
    # CUDA 13 keeps CCCL (nv/target, cuda/std) in include/cccl, which nvcc searches itself.
    includes = ["include", "include/cccl"],
    linkopts = ["-L{root}/lib64", "-Wl,-rpath,{root}/lib64", "-lcudart"],
)
""".format(root = root))
    if has_nccl:
        build.append("""
cc_library(
    name = "nccl",
    linkopts = ["-L{root}/lib64", "-Wl,-rpath,{root}/lib64", "-lnccl"],
    deps = [":cudart"],
)
""".format(root = root))
    rctx.file("BUILD", "\n".join(build))

cuda_repository = repository_rule(
    implementation = _cuda_impl,
    environ = ["PLEXUS_CUDA_ROOT"],
    local = True,
)

def _torch_impl(rctx):
    # Debian's libtorch-dev (torch 1.13): headers under /usr/include (the compiler's own search
    # path), libraries in the multiarch directory. Another torch (pip's 2.x) is built against
    # with tools/build_torch_extension.sh instead.
    lib = "/usr/lib/x86_64-linux-gnu"
    has_torch = rctx.path("/usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp").exists and \
                rctx.path(lib + "/libtorch_python.so").exists
    rctx.file("defs.bzl", "TORCH_AVAILABLE = %s\n" % has_torch)
    build = ["package(default_visibility = [\"//visibility:public\"])", ""]
    if has_torch:
        build.append("""
cc_library(
    name = "libtorch",
    linkopts = ["-ltorch_python", "-ltorch", "-ltorch_cpu", "-lc10"],
)
""")
    rctx.file("BUILD", "\n".join(build))

torch_repository = repository_rule(
    implementation = _torch_impl,
    local = True,
)

def _plexus_shim_impl(rctx):
    # The shim's files as they are in this plexus checkout (the repository holding this file).
    root = rctx.path(Label("//:WORKSPACE")).dirname
    source = root.get_child("third_party").get_child(rctx.attr.shim)
    for entry in source.readdir():
        rctx.symlink(entry, entry.basename)

_plexus_shim = repository_rule(
    implementation = _plexus_shim_impl,
    attrs = {"shim": attr.string(mandatory = True)},
    local = True,
)

def plexus_dependencies():
    """Everything another workspace needs to build @plexus targets, as plexus's own WORKSPACE has.

    Call it from a WORKSPACE that declared plexus as `local_repository(name = "plexus", ...)`
    (or `git_repository`): Bazel's rule-set shims plexus carries (declared unless the workspace
    already has its own) and the Debian system libraries.
    """
    for shim in ["rules_cc", "rules_java", "remote_coverage_tools"]:
        if not native.existing_rule(shim):
            _plexus_shim(name = shim, shim = shim)
    plexus_system_repositories()

def plexus_system_repositories():
    native.new_local_repository(
        name = "com_google_absl",
        path = "/usr/include/absl",
        build_file = "@plexus//third_party:absl.BUILD",
    )
    native.new_local_repository(
        name = "com_google_googletest",
        path = "/usr/include/gtest",
        build_file = "@plexus//third_party:googletest.BUILD",
    )
    native.new_local_repository(
        name = "gloo",
        path = "/usr/include/gloo",
        build_file = "@plexus//third_party:gloo.BUILD",
    )
    native.new_local_repository(
        name = "openmpi",
        path = "/usr/lib/x86_64-linux-gnu/openmpi",
        build_file = "@plexus//third_party:openmpi.BUILD",
    )
    native.new_local_repository(
        name = "pybind11",
        path = "/usr/include/pybind11",
        build_file = "@plexus//third_party:pybind11.BUILD",
    )
    python_headers_repository(name = "python")
    cuda_repository(name = "cuda")
    torch_repository(name = "torch")

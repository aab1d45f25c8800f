"""The system library repositories as a module extension, for Bazel 7's MODULE.bazel.

Bazel 4 (Debian 12 and 13) reads WORKSPACE and never loads this file; module_extension does
not exist there.
"""

load("//third_party:system_repos.bzl", "plexus_system_repositories")

def _system_libraries_impl(_mctx):
    plexus_system_repositories()

system_libraries = module_extension(
    implementation = _system_libraries_impl,
    doc = "abseil, GoogleTest, Gloo, Open MPI, pybind11, Python, CUDA and torch as installed.",
)

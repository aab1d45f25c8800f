"""bazel_tools' MODULE.bazel names this extension (for `bazel mod tidy`); it makes an empty repo."""

def _empty_repository_impl(rctx):
    rctx.file("BUILD", "# No buildozer offline: see third_party/bzlmod_stubs/README.md.\n")

_empty_repository = repository_rule(implementation = _empty_repository_impl)

def _buildozer_binary_impl(_mctx):
    _empty_repository(name = "buildozer_binary")

buildozer_binary = module_extension(implementation = _buildozer_binary_impl)

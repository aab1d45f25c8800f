"""headers_only: the compilation context of C++ targets without their objects.

The torch extension is linked against _plexus.so, which already holds every plexus object; it
needs plexus's headers to compile, but linking the libraries in again would give the process two
copies of plexus (two backend registries, two sets of flight recorders).
"""

def _headers_only_impl(ctx):
    merged = cc_common.merge_cc_infos(cc_infos = [dep[CcInfo] for dep in ctx.attr.deps])
    return [CcInfo(compilation_context = merged.compilation_context)]

headers_only = rule(
    implementation = _headers_only_impl,
    attrs = {"deps": attr.label_list(providers = [CcInfo])},
    doc = "Headers and include paths of `deps`, with nothing to link.",
)

"""Rules assembling the plexus Python package (a directory tree) and a wheel from it."""

def _python_package_dir_impl(ctx):
    out = ctx.actions.declare_directory(ctx.label.name)
    package_root = ctx.label.package + "/"
    commands = ["set -e"]
    for src in ctx.files.srcs:
        relative = src.short_path[len(package_root):] if src.short_path.startswith(package_root) else src.short_path
        commands.append('mkdir -p "$(dirname "{out}/{rel}")" && cp "{src}" "{out}/{rel}"'.format(
            out = out.path,
            rel = relative,
            src = src.path,
        ))
    for extension in ctx.files.extensions:
        commands.append('cp "{src}" "{out}/{package}/{name}" && chmod u+w "{out}/{package}/{name}"'.format(
            src = extension.path,
            out = out.path,
            package = ctx.attr.package,
            name = extension.basename,
        ))
    if ctx.attr.distribution:
        # The dist-info beside the package: its entry points, for torch (dist_info.py).
        top_level = depset([
            f.short_path[len(package_root):].split("/")[0].replace(".py", "")
            for f in ctx.files.srcs
        ]).to_list()
        commands.append('/usr/bin/python3 "{tool}" --root "{out}" --distribution {dist} --version {version} {tops}'.format(
            tool = ctx.file._dist_info.path,
            out = out.path,
            dist = ctx.attr.distribution,
            version = ctx.attr.version,
            tops = " ".join(["--top-level " + name for name in sorted(top_level)]),
        ))
    ctx.actions.run_shell(
        inputs = ctx.files.srcs + ctx.files.extensions + [ctx.file._dist_info],
        outputs = [out],
        command = "\n".join(commands),
        mnemonic = "PythonPackage",
        progress_message = "Assembling Python package %s" % ctx.label,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

python_package_dir = rule(
    implementation = _python_package_dir_impl,
    doc = "Copies Python sources (paths relative to this package) and the extensions into one " +
          "directory, with the distribution's dist-info when `distribution` is given.",
    attrs = {
        "srcs": attr.label_list(allow_files = [".py"]),
        "extensions": attr.label_list(allow_files = [".so"], mandatory = True),
        "package": attr.string(mandatory = True),
        "distribution": attr.string(),
        "version": attr.string(),
        "_dist_info": attr.label(default = "dist_info.py", allow_single_file = True),
    },
)

def _python_wheel_impl(ctx):
    name = "{dist}-{version}-{py}-{py}-{platform}.whl".format(
        dist = ctx.attr.distribution,
        version = ctx.attr.version,
        py = ctx.attr.python_tag,
        platform = ctx.attr.platform_tag,
    )
    wheel = ctx.actions.declare_file(name)
    package_dir = ctx.file.package_dir
    ctx.actions.run(
        inputs = [package_dir, ctx.file._builder],
        outputs = [wheel],
        executable = "/usr/bin/python3",
        arguments = [
            ctx.file._builder.path,
            "--package-dir", package_dir.path,
            "--output", wheel.path,
            "--distribution", ctx.attr.distribution,
            "--version", ctx.attr.version,
            "--tag", "{py}-{py}-{platform}".format(py = ctx.attr.python_tag, platform = ctx.attr.platform_tag),
        ],
        mnemonic = "PythonWheel",
        progress_message = "Building wheel %s" % name,
    )
    return [DefaultInfo(files = depset([wheel]), runfiles = ctx.runfiles(files = [wheel]))]

python_wheel = rule(
    implementation = _python_wheel_impl,
    doc = "Zips a package directory into a wheel installable with pip.",
    attrs = {
        "package_dir": attr.label(allow_single_file = True, mandatory = True),
        "distribution": attr.string(mandatory = True),
        "version": attr.string(mandatory = True),
        "python_tag": attr.string(mandatory = True),
        "platform_tag": attr.string(mandatory = True),
        "_builder": attr.label(default = "build_wheel.py", allow_single_file = True),
    },
)

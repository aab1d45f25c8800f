"""One cc_test per (suite, backend): <suite>_<backend>_test, run with --backend=<string>."""

def conformance_tests(suites, backends, envs = {}, launch = None, tags = [], device = None,
                      data = [], args = {}):
    """backends: short name -> backend string; envs: short name -> environment for its tests;
    args: short name -> extra arguments (e.g. --ranks_per_host=2).

    launch = "mpirun": the test starts itself under mpirun once per world size.
    device = "cuda": tensors live in CUDA memory (each rank on device rank % devices).
    """
    for suite in suites:
        for short_name, backend in backends.items():
            native.cc_test(
                name = "%s_%s_test" % (suite, short_name),
                size = "large",
                srcs = ["%s_test.cc" % suite],
                args = ["--backend=" + backend] + (["--launch=" + launch] if launch else []) +
                       (["--device=" + device] if device else []) + args.get(short_name, []),
                data = data,
                env = envs.get(short_name, {}),
                tags = ["conformance", short_name] + tags,
                deps = [":conformance"],
            )

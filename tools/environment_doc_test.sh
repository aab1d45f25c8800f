#!/usr/bin/env bash
# docs/environment.md, the table in base/core/environment.cc and the PLEXUS_* names the
# sources read must agree: the page is the generator's output, every name the code, scripts or
# docs use is in the table, every name in the table is read somewhere, and C++ reads them
# through ReadEnvironment (not std::getenv).
set -euo pipefail
generator="tools/environment_doc"
checkout="$(dirname "$(readlink -f WORKSPACE)")"
failed=0

if ! diff -u "${checkout}/docs/environment.md" <("${generator}") > "${TEST_TMPDIR}/page.diff"
then
  echo "docs/environment.md is not the table's:" \
       "run bazel run //tools:environment_doc > docs/environment.md"
  cat "${TEST_TMPDIR}/page.diff"
  failed=1
fi

"${generator}" --names | sort > "${TEST_TMPDIR}/table"
# Names in sources, scripts and docs; tests may use their own. Header guards, macros and
# prefixes written as PLEXUS_TLS_* are not variables.
(cd "${checkout}" &&
 grep -rhoE 'PLEXUS_[A-Z0-9_]*[A-Z0-9]\b\*?' --include='*.cc' --include='*.h' --include='*.py' \
      --include='*.sh' --include='*.md' --include='*.bzl' --include=BUILD \
      algorithms backends base bindings devices docs executor frontend sdk third_party tools README.md \
      --exclude='*_test.*' --exclude-dir=tests) |
  grep -vE '_H_$|\*$' |
  grep -vxE 'PLEXUS_(ABSL|BENCH_CUDA|CUDA_ROOT|HAVE_NCCL|TORCH_BACKEND_API|TORCH_AT_LEAST)' |
  grep -vxE 'PLEXUS_TORCH_(DIST_BACKEND_ERROR|SHRINK|SUPPORTS_COALESCING)' |
  grep -vxE 'PLEXUS_(STATUS_CONCAT|STATUS_CONCAT_INNER|ASSIGN_OR_RETURN_IMPL)' |
  sort -u > "${TEST_TMPDIR}/used"
if ! comm -23 "${TEST_TMPDIR}/used" "${TEST_TMPDIR}/table" > "${TEST_TMPDIR}/unlisted" ||
   [[ -s "${TEST_TMPDIR}/unlisted" ]]; then
  echo "used but not in base/core/environment.cc's table:"
  cat "${TEST_TMPDIR}/unlisted"
  failed=1
fi
# Every listed name must be read by code, not only named in docs.
(cd "${checkout}" &&
 grep -rhoE 'PLEXUS_[A-Z0-9_]*[A-Z0-9]\b' --include='*.cc' --include='*.py' --include='*.sh' \
      algorithms backends base bindings devices executor frontend sdk tools --exclude='*_test.*' \
      --exclude-dir=tests --exclude=environment.cc) | sort -u > "${TEST_TMPDIR}/read"
if comm -23 "${TEST_TMPDIR}/table" "${TEST_TMPDIR}/read" | grep . ; then
  echo "^ listed in the table but read by no code"
  failed=1
fi
if (cd "${checkout}" && grep -rn 'getenv("PLEXUS_' --include='*.cc' --include='*.h' \
      algorithms backends base bindings devices executor frontend sdk tools --exclude='*_test.cc'); then
  echo "^ read with std::getenv: use ReadEnvironment (base/core/environment.h)"
  failed=1
fi
exit "${failed}"

#!/bin/sh
echo "bazel coverage is not available in the offline build of plexus" >&2
exit 1

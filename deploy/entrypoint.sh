#!/bin/sh
# The container's entrypoint: every argument goes to bastion unchanged. Configuration is
# flags only (never environment variables); pass secrets as `@/run/secrets/flags`.
set -e
exec bastion "$@"

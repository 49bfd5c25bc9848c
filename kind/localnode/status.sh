#!/usr/bin/env bash
# Whether the local node is up, as an exit status (no output): 0 up (every
# component runs, the API server answers, the node is Ready), 1 not up.
# Callers that bring it up and must leave it as they found it ask this
# before up.sh, instead of reading up.sh's messages.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
source "$here/env.sh" || exit 2
# shellcheck source=SCRIPTDIR/lib.sh
source "$here/lib.sh" || exit 2
node_is_up

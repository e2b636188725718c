#!/usr/bin/env bash
# Smoke-test a production endpoint from CI and act on the exit-code contract.
#   PROFILE=prod-openai ./examples/ci-smoke.sh
set -uo pipefail
profile=${PROFILE:-prod-openai}

promptpath run "$profile" --json --timeout 30 > trace.json
code=$?
case $code in
  0) echo "ok: TTFT $(python3 -c 'import json;print(json.load(open("trace.json"))["ttft_ms"]["from_start"])') ms" ;;
  3) echo "DNS failure" ;;
  4) echo "TCP connect failure" ;;
  5) echo "TLS failure (certificate?)" ;;
  6) echo "HTTP error status (key? quota? outage?)" ;;
  7) echo "stream broken (truncated / error event / not an event stream)" ;;
  8) echo "timed out" ;;
  *) echo "promptpath exited $code" ;;
esac
# The one-line reason, whatever failed:
python3 -c 'import json; e=json.load(open("trace.json")).get("error"); print(e and f"{e[\"stage\"]}: {e[\"message\"]}" or "")'
exit "$code"

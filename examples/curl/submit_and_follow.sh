#!/bin/sh
# Submit a plan to dagwright's HTTP API, follow its events live, print its result.
# Needs only curl and a POSIX shell (jq, if installed, pretty-prints the result).
#
#   DAGWRIGHT_URL=http://127.0.0.1:8400 DAGWRIGHT_TOKEN=dw_... ./submit_and_follow.sh [plan.json]
#
# DAGWRIGHT_TOKEN: a token of the operate scope (`dagwright token create NAME --scope
# operate`); leave it unset against `dagwright up`, whose server needs none on 127.0.0.1.
# The token goes to curl on its standard input, never on a command line (`ps` shows those).
# Exit status: 0 if the run succeeded, 1 if it did not, 2 if the API refused a request.
set -eu

URL=${DAGWRIGHT_URL:-http://127.0.0.1:8400}
URL=${URL%/}
PLAN=${1:-$(dirname "$0")/plan.json}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT INT TERM

# curl with the token's header (read from stdin as curl configuration) and our options.
api() {
    if [ -n "${DAGWRIGHT_TOKEN:-}" ]; then
        printf 'header = "Authorization: Bearer %s"\n' "$DAGWRIGHT_TOKEN" |
            curl --silent --show-error --config - "$@"
    else
        curl --silent --show-error "$@"
    fi
}

# The value of a top-level string field of a JSON body (good enough for ids and statuses).
field() {
    grep -o "\"$1\": *\"[^\"]*\"" "$2" | head -n 1 | sed 's/.*: *"\(.*\)"/\1/'
}

# 1. Submit: POST /api/v1/runs with {"plan": ...}; 201 and the run (200 if the same
#    Idempotency-Key was seen before).
{ printf '{"plan": '; cat "$PLAN"; printf '}'; } >"$WORK/request.json"
status=$(api --request POST "$URL/api/v1/runs" \
    --header "Content-Type: application/json" \
    --header "Idempotency-Key: ${IDEMPOTENCY_KEY:-curl-$(date +%s)-$$}" \
    --data-binary "@$WORK/request.json" \
    --output "$WORK/run.json" --write-out '%{http_code}')
if [ "$status" != 201 ] && [ "$status" != 200 ]; then
    echo "submit refused ($status): $(field detail "$WORK/run.json")" >&2
    exit 2
fi
RUN_ID=$(field run_id "$WORK/run.json")
echo "submitted run $RUN_ID"

# 2. Follow: the Server-Sent Events stream, unbuffered (-N); it closes after `event: end`.
#    A dropped connection resumes where it stopped with the header Last-Event-ID: <id>.
api --no-buffer --header "Accept: text/event-stream" "$URL/api/v1/runs/$RUN_ID/events" |
    while IFS= read -r line; do
        case $line in
        "event: end") break ;;
        "event: "*) kind=${line#event: } ;;
        "data: "*)
            node=$(printf '%s\n' "$line" | grep -o '"node": *"[^"]*"' | head -n 1 |
                sed 's/.*"\([^"]*\)"$/\1/' || true)
            echo "event $kind${node:+ (node $node)}"
            ;;
        esac
    done

# 3. Read: the run's status, then its result.
api "$URL/api/v1/runs/$RUN_ID" --output "$WORK/run.json"
RUN_STATUS=$(field status "$WORK/run.json")
echo "status $RUN_STATUS"
api "$URL/api/v1/runs/$RUN_ID/result" --output "$WORK/result.json"
if command -v jq >/dev/null 2>&1; then
    echo "result $(jq -c .result "$WORK/result.json")"
else
    echo "result $(sed 's/^{.*"result": *\(.*\)}$/\1/' "$WORK/result.json")"
fi
[ "$RUN_STATUS" = succeeded ]

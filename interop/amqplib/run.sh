#!/usr/bin/env bash
# Run amqplib's own integration tests (the Node.js AMQP 0-9-1 client, npm `amqplib`: its
# test/channel_api.js, test/callback_api.js and test/connect.js) against ferryd.
#
#   interop/amqplib/run.sh [FERRYD_BINARY]     start ferryd, test, stop it
#   FERRY_PORT=N interop/amqplib/run.sh        test a broker already on 127.0.0.1:N
#
# amqplib 0.10.4 is the last release whose npm package ships its tests; package-lock.json
# pins it and mocha, installed from npm on first use. The suites read the broker's address
# from $URL. Extra mocha arguments go in MOCHA_ARGS. Exits with mocha's status.
source "$(dirname "$0")/../lib/ferryd.sh"
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "run.sh: node is needed" >&2; exit 2; }
if [ ! -d "$here/node_modules/amqplib/test" ]; then
    (cd "$here" && npm ci --no-audit --no-fund --silent) || { echo "run.sh: npm ci failed" >&2; exit 2; }
fi

# Tests left out, each for the reason given; anything else that fails is a ferryd bug until
# shown otherwise.
skip=(
    # Asserts that the server's product property is "RabbitMQ".
    "Connect API serverProperties"
    # Connects to the URL's query alone, so to localhost:5672 whatever $URL says; it runs
    # below with the address in the query instead.
    "Connect API using custom heartbeat option"
)
skip_re="^($(IFS='|'; echo "${skip[*]}"))\$"

ferryd_start "${1:-}"
tests=(test/channel_api.js test/callback_api.js test/connect.js)
mocha=(node "$here/node_modules/mocha/bin/mocha" --ui tdd --timeout 10000 --exit)
# shellcheck disable=SC2086
(cd "$here/node_modules/amqplib" &&
    URL="amqp://guest:guest@127.0.0.1:$port" \
        "${mocha[@]}" --grep "$skip_re" --invert ${MOCHA_ARGS:-} "${tests[@]}" &&
    URL="amqp://guest:guest@127.0.0.1:$port?hostname=127.0.0.1&port=$port" \
        "${mocha[@]}" --grep "custom heartbeat option" ${MOCHA_ARGS:-} test/connect.js)
ferryd_finish $?

#!/usr/bin/env bash
# Oracle: sed edits in place; awk drops the [debug] section up to the next section header.
set -euo pipefail
cd /app
sed -i -e '/^\[server\]/,/^\[/ { s/^port = .*/port = 8443/; s/^tls = .*/tls = on\ncert_file = \/etc\/orders\/tls\/cert.pem\nkey_file = \/etc\/orders\/tls\/key.pem/ }' \
       -e '/^\[database\]/,/^\[/ s/^pool_size = .*/pool_size = 20/' app.ini
awk '/^\[/ { skip = ($0 == "[debug]") } !skip' app.ini > app.ini.new && mv app.ini.new app.ini

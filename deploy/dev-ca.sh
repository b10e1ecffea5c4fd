#!/usr/bin/env bash
# Creates a local certificate authority and a server certificate for 127.0.0.1 / localhost, for
# TLS in development and tests (never for production: the CA key sits next to the certs).
#
#   deploy/dev-ca.sh DIR [EXTRA_SAN...]     e.g. deploy/dev-ca.sh ./tls DNS:myhost IP:10.0.0.5
#
# Writes into DIR (created if needed):
#   ca.pem, ca.key           the CA (clients: --ca-cert DIR/ca.pem or TAILOR_CA_CERT)
#   server.pem, server.key   the coordinator's chain (server cert + CA) and key
#                            (tailor-coordinator --tls-cert DIR/server.pem --tls-key DIR/server.key)
# Existing files are kept: rerunning is a no-op unless DIR/server.pem is missing.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 DIR [EXTRA_SAN...]   (SANs like DNS:host or IP:10.0.0.5)" >&2
  exit 2
fi
dir=$1
shift
command -v openssl >/dev/null || { echo "dev-ca: openssl not found (deploy/install-deps.sh)" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
if [ -s server.pem ] && [ -s server.key ] && [ -s ca.pem ]; then
  echo "dev-ca: $dir already has ca.pem, server.pem and server.key"
  exit 0
fi
umask 077

san="DNS:localhost,IP:127.0.0.1,IP:::1"
for extra in "$@"; do san="$san,$extra"; done

# The CA: P-256, 10 years.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout ca.key -out ca.pem -days 3650 -subj "/CN=tailor dev CA" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

# The server key and a certificate for loopback, signed by the CA: 2 years.
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
cat > server.ext <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=$san
EXT
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
  -out server.crt -days 730 -extfile server.ext 2>/dev/null
# The full chain: the coordinator also hands it to its launchers' ranks as their CA file.
cat server.crt ca.pem > server.pem
rm -f server.csr server.ext ca.srl
chmod 600 ca.key server.key
chmod 644 ca.pem server.pem server.crt
openssl verify -CAfile ca.pem server.crt >/dev/null
echo "dev-ca: wrote $dir/{ca.pem,server.pem,server.key} (server names: $san)"

#!/usr/bin/env bash
# run-cluster.sh CONFIG — `make run-cluster`: one JetStream server
# (bin/natsserver) and two adhost hosts sharing their durable state on it,
# on one machine, until Ctrl-C.
#
# Each host gets a copy of CONFIG with [store] backend = "jetstream" and
# its own local directory (usage records, qualification reports and the
# compiled-module cache stay local); both run durable jobs, each job on
# the host whose worker took its lease. Relative paths of
# CONFIG are made absolute so the copies can live in data/cluster/.
set -eu
config=${1:-host.toml}
root=$(pwd)
dir=data/cluster
nats=${NATS_LISTEN:-127.0.0.1:4222}
a=${LISTEN_A:-127.0.0.1:7433}
b=${LISTEN_B:-127.0.0.1:7434}
mkdir -p "$dir/a" "$dir/b" "$dir/nats"
chmod 700 data "$dir" "$dir/a" "$dir/b"

write() { # write OUT JOBS: CONFIG on JetStream, [jobs] enabled = JOBS
	awk -v root="$root" -v jobs="$2" -v url="nats://$nats" '
		/^\[/ { table = $1 }
		{ gsub(/"build\//, "\"" root "/build/"); gsub(/"data\//, "\"" root "/data/") }
		table == "[store]" && /^path[ \t]*=/ { print; print "backend = \"jetstream\""; next }
		table == "[jobs]" && /^enabled[ \t]*=/ { print "enabled = " jobs; next }
		{ print }
		END { print ""; print "[store.jetstream]"; print "url = \"" url "\""; print "bucket_prefix = \"ADHOST_DEV\"" }
	' "$config" > "$1"
}
write "$dir/host-a.toml" true
write "$dir/host-b.toml" true

pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

bin/natsserver -listen "$nats" -store "$dir/nats" &
pids="$pids $!"
sleep 1
bin/adhost serve --config "$dir/host-a.toml" --data "$dir/a" --listen "$a" &
pids="$pids $!"
bin/adhost serve --config "$dir/host-b.toml" --data "$dir/b" --listen "$b" &
pids="$pids $!"
echo "cluster: JetStream nats://$nats; host A http://$a, host B http://$b (both run jobs); token: $root/data/dev.token"
echo "  create a session on A:   curl -s -H \"Authorization: Bearer \$(cat data/dev.token)\" -H 'Content-Type: application/json' -d '{\"provider\":\"fixture\",\"model\":\"fixture-model\",\"mode\":\"native\"}' http://$a/v1/sessions/create"
echo "  read it on B:            curl -s -H \"Authorization: Bearer \$(cat data/dev.token)\" -H 'Content-Type: application/json' -d '{\"id\":\"ID\"}' http://$b/v1/sessions/read"
echo "  a job on A, read on B:   adhost jobs submit --url http://$a ...; adhost jobs read --url http://$b ID"
# The first of the three to exit (a host that failed to start, Ctrl-C)
# ends the cluster.
wait -n

package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"adhost/host/config"
	"adhost/runtime/durable"
	"adhost/store/jetstream"
)

// PresenceTTL is how long a host that stopped renewing its presence on a
// shared store is still taken for alive: after it, another host
// interrupts its session turns and its unfinished idempotency claims
// replay as uncertain.
const PresenceTTL = 10 * time.Second

// openDurable chooses the durable features' backend. Badger (the
// default) is the local store itself. With [store] backend = "jetstream"
// the features share the JetStream buckets with every host of the same
// bucket_prefix, and this process announces its presence there, so the
// others can tell its running work from a dead host's. Usage records and
// qualification reports stay in the local store either way.
func (h *cliHost) openDurable(ctx context.Context, cfg *config.File, log *slog.Logger) error {
	h.durable = h.store
	if cfg.StoreBackend() != config.BackendJetStream {
		return nil
	}
	j := cfg.Store.JetStream
	id := cliPresenceID()
	st, err := jetstream.Open(ctx, jetstream.Options{
		URLs: j.URL, CredentialsFile: j.Credentials, Replicas: j.Replicas, BucketPrefix: j.BucketPrefix,
		Name: "adhost " + id, Logger: log,
	})
	if err != nil {
		return fmt.Errorf("store.jetstream: %w", err)
	}
	p, err := durable.StartPresence(ctx, st, id, PresenceTTL)
	if err != nil {
		st.Close()
		return fmt.Errorf("store.jetstream: announce this host: %w", err)
	}
	h.shared, h.presence, h.durable = st, p, st
	log.Info("durable state on jetstream", "servers", strings.Join(j.URL, ","), "bucket_prefix", j.BucketPrefix,
		"replicas", j.Replicas, "presence", id)
	return nil
}

// closeShared gives the presence back (the others see this host gone at
// once) and closes the connection.
func (h *cliHost) closeShared(ctx context.Context) error {
	if h.shared == nil {
		return nil
	}
	if h.presence != nil {
		h.presence.Stop(ctx)
	}
	err := h.shared.Close()
	h.shared, h.presence = nil, nil
	if errors.Is(err, durable.ErrClosed) {
		return nil
	}
	return err
}

// cliPresenceID is a fresh id per process: a restarted host is a new
// holder, and its predecessor's work is recovered as a dead host's.
func cliPresenceID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "h-" + hex.EncodeToString(b[:])
}

// leaseOwner is the job worker's lease holder on a shared store: this
// process (hosts of one deployment share usage.host_id, which would let a
// starting host fence a live one). On Badger: the host id, so a host
// restarted after kill -9 takes its store over at once.
func (h *cliHost) leaseOwner() string {
	if h.presence != nil {
		return h.presence.ID()
	}
	return ""
}

package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
	id, err := cliPresenceID(cfg.Store.Path)
	if err != nil {
		return fmt.Errorf("store.path: %w", err)
	}
	st, err := jetstream.Open(ctx, jetstream.Options{
		URLs: j.URL, CredentialsFile: j.Credentials, Replicas: j.Replicas, BucketPrefix: j.BucketPrefix,
		Name: "adhost " + id, Logger: log,
	})
	if errors.Is(err, jetstream.ErrCredentials) {
		return fmt.Errorf("store.jetstream.credentials: %w", err)
	}
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

// cliPresenceID is this host's id on the shared store, kept in its local
// directory (store.path/presence-id, created on first use): two running
// hosts never share a directory (the Badger lock), so ids are unique, and
// a host restarted after kill -9 is the same holder again — it takes its
// job worker lease back at once and interrupts its own unfinished session
// turns, instead of waiting for its old presence to lapse.
func cliPresenceID(dir string) (string, error) {
	path := filepath.Join(dir, "presence-id")
	if b, err := os.ReadFile(path); err == nil {
		id := strings.TrimSpace(string(b))
		if durable.CheckKey(durable.PresencePrefix+id) == nil && strings.HasPrefix(id, "h-") {
			return id, nil
		}
		return "", fmt.Errorf("%s: not a presence id; remove it to get a new one", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := "h-" + hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	return id, nil
}

// leaseOwner is the job worker's lease holder on a shared store: this
// host's presence id (hosts of one deployment share usage.host_id, which
// would let a starting host fence a live one; the presence id is the same
// only for the same host restarted, which takes its lease back at once).
// On Badger: empty, the host id.
func (h *cliHost) leaseOwner() string {
	if h.presence != nil {
		return h.presence.ID()
	}
	return ""
}

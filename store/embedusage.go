package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"adhost/runtime"
)

// embedUsagePrefix keys embedding usage records apart from the run usage
// records under usagePrefix, so that Usage never meets one.
const embedUsagePrefix = "v1/embedding-usage/"

var _ runtime.EmbeddingUsageSink = (*Store)(nil)

// RecordEmbeddingUsage stores one embedding usage record, keyed by its
// time then event id (chronological listing). It writes at once rather
// than through the run usage queue: an embedding call already took a
// round trip or a guest call of its own, and one call embeds up to 256
// texts, so the write is a small share of it.
func (s *Store) RecordEmbeddingUsage(ctx context.Context, rec *runtime.EmbeddingUsageRecord) error {
	if rec == nil || rec.EventID == "" {
		return errors.New("store: embedding usage record without event id")
	}
	at, err := time.Parse(time.RFC3339Nano, rec.RecordedAt)
	if err != nil {
		return fmt.Errorf("store: embedding usage record %s: recordedAt: %w", rec.EventID, err)
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("store: embedding usage record %s: %w", rec.EventID, err)
	}
	k := key([]byte(embedUsagePrefix), be8(at.UnixNano()), []byte("/"+rec.EventID))
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) })
}

// EmbeddingUsage calls fn for each embedding usage record made at or
// after since, oldest first, until fn returns false.
func (s *Store) EmbeddingUsage(ctx context.Context, since time.Time, fn func(*runtime.EmbeddingUsageRecord) bool) error {
	return scanTimed(ctx, s, embedUsagePrefix, "embedding usage record", since, fn)
}

package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"adhost/runtime/durable"
)

// Options configure Open.
type Options struct {
	// URLs are the servers' nats:// URLs (one or more of one cluster).
	URLs []string
	// CredentialsFile is a NATS credentials (.creds) file; empty: none.
	CredentialsFile string
	// Replicas of every bucket and stream: 1, 3 or 5 (default 1).
	Replicas int
	// BucketPrefix names this deployment's buckets and stream
	// ([A-Za-z0-9_-], default "ADHOST"): hosts sharing a prefix share
	// state, different prefixes on one server are independent.
	BucketPrefix string
	// Timeout bounds one operation whose context has no earlier deadline
	// (default 5 s): during an outage a request fails after it rather
	// than hanging the run or the HTTP request.
	Timeout time.Duration
	// Name is the connection name the server shows (default "adhost").
	Name   string
	Logger *slog.Logger
	// Now is the lease clock (tests); nil: time.Now.
	Now func() time.Time
}

// DefaultBucketPrefix is BucketPrefix's default.
const DefaultBucketPrefix = "ADHOST"

var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Store is durable.Store on a JetStream server or cluster. Create it with
// Open; Close closes the connection.
type Store struct {
	o       Options
	nc      *nats.Conn
	js      jetstream.JetStream
	kvs     []kvShard // kv.go: a key's shard is kvShardOf
	leases  jetstream.KeyValue
	logs    []logShard // logs.go: a log lives in the one locate picks
	direct  bool       // batch direct gets may serve Read and List
	log     *slog.Logger
	closed  atomic.Bool
	timeout time.Duration
	tails   tails // logs.go
	writes  writeCounts
	// markerTTL is how long a deleted key's marker stays (0: for ever,
	// on servers without per-message TTLs).
	markerTTL time.Duration
}

// markerTTL bounds the life of a deleted key's marker: the features
// delete keys all the time (job queue entries, cancel signals, expiry
// keys, session and claim records), and a marker left for ever would be
// walked by every List of its prefix. Nothing reads a marker once the
// delete is acknowledged; a minute covers a watcher's catching up.
const markerTTL = time.Minute

var _ durable.Store = (*Store)(nil)

// kvShards and logShards are how many KV buckets and log streams hold
// the durable keys and logs, each key or log in the one its name's hash
// picks (kv.go, logs.go). With replicas 1 a stream syncs its writes one
// after another, a disk sync each, while different streams sync at once:
// so the dozen key writes and the appends of concurrent jobs spread over
// several streams instead of queueing behind one. Leases, a couple of
// writes per job, stay in one bucket. The counts are part of the layout:
// hosts sharing a prefix must agree on them (Open checks, metaLayout).
const (
	kvShards  = 4
	logShards = 4
)

// kvShard is one KV bucket of the durable keys.
type kvShard struct {
	kv     jetstream.KeyValue
	stream string // the bucket's stream, "KV_<bucket>"
	subj   string // its subject prefix, "$KV.<bucket>."
	writes atomic.Uint64
}

// metaLayout is the metadata entry of the first KV bucket that records the
// layout (layout()), checked by every host that opens the store.
const metaLayout = "adhost_layout"

func layout() string { return fmt.Sprintf("kv=%d logs=%d", kvShards, logShards) }

// Names of the buckets and streams under a prefix.
func kvBucket(prefix string, shard int) string  { return prefix + "_KV_" + strconv.Itoa(shard) }
func leaseBucket(prefix string) string          { return prefix + "_LEASES" }
func logStream(prefix string, shard int) string { return prefix + "_LOGS_" + strconv.Itoa(shard) }
func logRoot(prefix string, shard int) string   { return prefix + ".log" + strconv.Itoa(shard) }

// The one KV bucket and one log stream of the layout before shards: a
// store written by it is refused rather than read as empty.
func legacyKVBucket(prefix string) string  { return prefix + "_KV" }
func legacyLogStream(prefix string) string { return prefix + "_LOGS" }

// Open connects, checks the layout (checkLayout), then creates (or
// updates to this configuration) the KV buckets, the lease bucket and the
// log streams. It fails when no server
// answers within the timeout or JetStream is not enabled there.
func Open(ctx context.Context, o Options) (*Store, error) {
	if len(o.URLs) == 0 {
		return nil, errors.New("jetstream: no server URL")
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Replicas != 1 && o.Replicas != 3 && o.Replicas != 5 {
		return nil, fmt.Errorf("jetstream: replicas %d: want 1, 3 or 5", o.Replicas)
	}
	if o.BucketPrefix == "" {
		o.BucketPrefix = DefaultBucketPrefix
	}
	if !prefixPattern.MatchString(o.BucketPrefix) {
		return nil, fmt.Errorf("jetstream: bucket prefix %q does not match %s", o.BucketPrefix, prefixPattern)
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Name == "" {
		o.Name = "adhost"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.Timeout(o.Timeout),
		// Once connected, a host rides out a server restart: it
		// reconnects for as long as it runs, and operations during the
		// outage fail after their timeout (the features answer their
		// store-unavailable codes).
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// No buffering while disconnected: a write the host reported as
		// failed must not reach the server later, when the connection is
		// back and the client has been told something else.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("jetstream disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("jetstream reconnected", "server", c.ConnectedUrlRedacted())
		}),
	}
	if o.CredentialsFile != "" {
		if err := checkCredentials(o.CredentialsFile); err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserCredentials(o.CredentialsFile))
	}
	nc, err := nats.Connect(strings.Join(o.URLs, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("jetstream: connect to %s: %w", redact(o.URLs), err)
	}
	s := &Store{o: o, nc: nc, log: log, timeout: o.Timeout, direct: o.Replicas == 1}
	if err := s.setup(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

// ErrCredentials: the credentials file cannot be read or holds no user
// JWT and seed. Open checks it before connecting, so a host fails at
// start with the file named rather than with a connection error.
var ErrCredentials = errors.New("jetstream: credentials file")

// checkCredentials reads a .creds file: a user JWT and an nkey seed, in
// the decorated form nsc writes. Nothing of it reaches a message.
func checkCredentials(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w %s: %v", ErrCredentials, path, errors.Unwrap(err))
	}
	if _, err := jwt.ParseDecoratedJWT(b); err != nil || !bytes.Contains(b, []byte("BEGIN NATS USER JWT")) {
		return fmt.Errorf("%w %s: no user JWT in it (want a .creds file, as nsc writes)", ErrCredentials, path)
	}
	if kp, err := jwt.ParseDecoratedNKey(b); err != nil || kp == nil {
		return fmt.Errorf("%w %s: no user nkey seed in it (want a .creds file, as nsc writes)", ErrCredentials, path)
	}
	return nil
}

// redact keeps user information out of messages.
func redact(urls []string) string {
	out := make([]string, len(urls))
	for i, u := range urls {
		if at := strings.LastIndexByte(u, '@'); at >= 0 {
			if sch := strings.Index(u, "://"); sch >= 0 && sch < at {
				u = u[:sch+3] + "***" + u[at:]
			}
		}
		out[i] = u
	}
	return strings.Join(out, ",")
}

func (s *Store) setup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*s.timeout)
	defer cancel()
	js, err := jetstream.New(s.nc, jetstream.WithDefaultTimeout(s.timeout))
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	s.js = js
	r := s.o.Replicas
	if err := s.checkLayout(ctx); err != nil {
		return err
	}
	s.markerTTL = markerTTL
	s.kvs = make([]kvShard, kvShards)
	for i := range s.kvs {
		// History 1: only a key's current value (or its delete marker) is
		// kept; revisions still grow across deletes (stream sequences).
		kvc := jetstream.KeyValueConfig{Bucket: kvBucket(s.o.BucketPrefix, i), History: 1,
			Storage: jetstream.FileStorage, Replicas: r,
			Description: fmt.Sprintf("adhost durable state: jobs, sessions, idempotency keys (shard %d of %d)", i+1, kvShards),
			Metadata:    map[string]string{metaLayout: layout()}}
		kvc.LimitMarkerTTL = s.markerTTL
		kv, err := s.bucket(ctx, kvc)
		if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
			s.log.Warn("jetstream: the server has no per-message TTLs (before 2.11): deleted keys leave markers that List reads until the bucket is purged")
			s.markerTTL, kvc.LimitMarkerTTL = 0, 0
			kv, err = s.bucket(ctx, kvc)
		}
		if err != nil {
			return err
		}
		s.kvs[i].kv, s.kvs[i].stream, s.kvs[i].subj = kv, "KV_"+kvc.Bucket, "$KV."+kvc.Bucket+"."
	}
	lc := jetstream.KeyValueConfig{Bucket: leaseBucket(s.o.BucketPrefix), History: 1,
		Storage: jetstream.FileStorage, Replicas: r, Description: "adhost leases with fencing tokens"}
	lc.LimitMarkerTTL = s.markerTTL
	if s.leases, err = s.bucket(ctx, lc); err != nil {
		return err
	}
	s.logs = make([]logShard, logShards)
	for i := range s.logs {
		sh := &s.logs[i]
		sh.name, sh.root = logStream(s.o.BucketPrefix, i), logRoot(s.o.BucketPrefix, i)
		sc := jetstream.StreamConfig{Name: sh.name, Subjects: []string{sh.root + ".>"},
			Description: fmt.Sprintf("adhost durable logs: one subject per append (shard %d of %d)", i+1, logShards),
			Storage:     jetstream.FileStorage, Replicas: r, Retention: jetstream.LimitsPolicy,
			Discard: jetstream.DiscardNew, AllowDirect: s.direct}
		if err := s.placed(ctx, func() (err error) {
			sh.stream, err = js.CreateOrUpdateStream(ctx, sc)
			return err
		}); err != nil {
			return fmt.Errorf("jetstream: stream %s: %w", sh.name, err)
		}
	}
	return nil
}

// checkLayout refuses a store whose keys and logs this layout would not
// find: one written with other shard counts, or with the one bucket and
// the one stream of the layout before shards.
func (s *Store) checkLayout(ctx context.Context) error {
	first := kvBucket(s.o.BucketPrefix, 0)
	st, err := s.js.Stream(ctx, "KV_"+first)
	switch {
	case err == nil:
		if l := st.CachedInfo().Config.Metadata[metaLayout]; l != layout() {
			return fmt.Errorf("jetstream: bucket %s was written with the layout %q, this host's is %q: every host sharing bucket prefix %s must run the same one",
				first, l, layout(), s.o.BucketPrefix)
		}
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("jetstream: bucket %s: %w", first, err)
	}
	for _, old := range []string{"KV_" + legacyKVBucket(s.o.BucketPrefix), legacyLogStream(s.o.BucketPrefix)} {
		st, err := s.js.Stream(ctx, old)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
		case err != nil:
			return fmt.Errorf("jetstream: stream %s: %w", old, err)
		case st.CachedInfo().State.Msgs > 0:
			return fmt.Errorf("jetstream: stream %s holds state of the unsharded layout, which this host does not read: drain it with the hosts that wrote it, or use another bucket prefix", old)
		}
	}
	return nil
}

// placed runs create, a stream or bucket creation, again while the
// cluster answers that it cannot place the replicas for now: a peer is
// offline (a server restarting, or one the meta leader has not heard
// from since an election) or the meta leader is being elected. Both pass
// within seconds, and a host starting beside a rolling NATS restart
// should wait for them rather than refuse to start. Every other error,
// and these once setup's deadline (twice Options.Timeout) is near, is
// returned as it is.
func (s *Store) placed(ctx context.Context, create func() error) error {
	wait := 50 * time.Millisecond
	for {
		err := create()
		var api *jetstream.APIError
		if err == nil || !errors.As(err, &api) ||
			(api.ErrorCode != errNoPeers && api.ErrorCode != errClusterUnavailable) {
			return err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait+s.timeout/4 {
			return err
		}
		s.log.Warn("jetstream: waiting for the cluster to place replicas", "replicas", s.o.Replicas, "code", int(api.ErrorCode))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// The JetStream API's codes for a placement that may succeed shortly
// (nats-server's JSClusterNoPeersErrF and JSClusterNotAvailErr).
const (
	errNoPeers            jetstream.ErrorCode = 10005
	errClusterUnavailable jetstream.ErrorCode = 10008
)

// bucket creates or updates a KV bucket. With replicas, direct gets are
// turned off on its stream: a follower may answer a direct get with a
// value older than one already acknowledged, and a revision read back
// must never go backwards; the leader answers every read instead.
func (s *Store) bucket(ctx context.Context, c jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := s.placed(ctx, func() (err error) {
		kv, err = s.js.CreateOrUpdateKeyValue(ctx, c)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("jetstream: bucket %s: %w", c.Bucket, err)
	}
	if s.direct {
		return kv, nil
	}
	st, err := s.js.Stream(ctx, "KV_"+c.Bucket)
	if err != nil {
		return nil, fmt.Errorf("jetstream: bucket %s: %w", c.Bucket, err)
	}
	cfg := st.CachedInfo().Config
	if cfg.AllowDirect {
		cfg.AllowDirect = false
		if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("jetstream: bucket %s: %w", c.Bucket, err)
		}
	}
	// Bind again: the client chooses direct or leader reads at bind time.
	return s.js.KeyValue(ctx, c.Bucket)
}

// Close closes the connection; later operations fail with
// durable.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.nc.Drain()
}

// op bounds one operation by the timeout and refuses after Close.
func (s *Store) op(ctx context.Context, key string) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, durable.ErrClosed
	}
	if err := durable.CheckKey(key); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	return ctx, cancel, nil
}

// JetStream API error codes the backend tells apart.
const (
	codeWrongLastSeq       = 10071
	codeWrongLastSeqRepl   = 10164
	codeMessageTooLarge    = 10054
	codeInsufficientRes    = 10023
	codeMemoryExceeded     = 10028
	codeStorageExceeded    = 10047
	codeAccountResExceeded = 10002
	codeStoreFailed        = 10077
)

func apiCode(err error) int {
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		return int(ae.ErrorCode)
	}
	return 0
}

func wrongLast(err error) bool {
	c := apiCode(err)
	return c == codeWrongLastSeq || c == codeWrongLastSeqRepl ||
		errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// fail maps what the client or server said to the durable errors; any
// other failure (timeout, no server, disconnected) stays an ordinary
// error, which the features answer as their store-unavailable code.
func (s *Store) fail(err error) error {
	switch c := apiCode(err); {
	case s.closed.Load():
		return durable.ErrClosed
	case errors.Is(err, nats.ErrMaxPayload) || c == codeMessageTooLarge:
		return fmt.Errorf("%w: %v", durable.ErrTooLarge, err)
	case c == codeInsufficientRes || c == codeMemoryExceeded || c == codeStorageExceeded || c == codeAccountResExceeded,
		c == codeStoreFailed && strings.Contains(err.Error(), "maximum"):
		return fmt.Errorf("%w: %v", durable.ErrFull, err)
	}
	return fmt.Errorf("jetstream: %w", err)
}

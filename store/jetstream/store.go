package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
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
	kv      jetstream.KeyValue
	leases  jetstream.KeyValue
	logs    jetstream.Stream
	stream  string // the log stream's name
	root    string // the log subjects' first tokens ("<prefix>.log")
	direct  bool   // batch direct gets may serve Read and List
	kvSubj  string // "$KV.<kv bucket>."
	kvName  string // the KV bucket's stream
	log     *slog.Logger
	closed  atomic.Bool
	timeout time.Duration
	tails   tails // logs.go
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

// Names of the buckets and the stream under a prefix.
func kvBucket(prefix string) string    { return prefix + "_KV" }
func leaseBucket(prefix string) string { return prefix + "_LEASES" }
func logStream(prefix string) string   { return prefix + "_LOGS" }

// Open connects, then creates (or updates to this configuration) the KV
// bucket, the lease bucket and the log stream. It fails when no server
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
	s := &Store{o: o, nc: nc, log: log, timeout: o.Timeout, direct: o.Replicas == 1,
		stream: logStream(o.BucketPrefix), root: o.BucketPrefix + ".log"}
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
	// History 1: only a key's current value (or its delete marker) is
	// kept; revisions still grow across deletes (stream sequences).
	kvc := jetstream.KeyValueConfig{Bucket: kvBucket(s.o.BucketPrefix), History: 1,
		Storage: jetstream.FileStorage, Replicas: r,
		Description: "adhost durable state: jobs, sessions, idempotency keys"}
	kvc.LimitMarkerTTL = markerTTL
	s.kv, err = s.bucket(ctx, kvc)
	if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
		s.log.Warn("jetstream: the server has no per-message TTLs (before 2.11): deleted keys leave markers that List reads until the bucket is purged")
		kvc.LimitMarkerTTL = 0
		s.kv, err = s.bucket(ctx, kvc)
	}
	if err != nil {
		return err
	}
	if kvc.LimitMarkerTTL > 0 {
		s.markerTTL = markerTTL
	}
	lc := jetstream.KeyValueConfig{Bucket: leaseBucket(s.o.BucketPrefix), History: 1,
		Storage: jetstream.FileStorage, Replicas: r, Description: "adhost leases with fencing tokens"}
	lc.LimitMarkerTTL = s.markerTTL
	if s.leases, err = s.bucket(ctx, lc); err != nil {
		return err
	}
	s.kvName = "KV_" + kvc.Bucket
	s.kvSubj = "$KV." + kvc.Bucket + "."
	sc := jetstream.StreamConfig{Name: s.stream, Subjects: []string{s.root + ".>"},
		Description: "adhost durable logs: one subject per record",
		Storage:     jetstream.FileStorage, Replicas: r, Retention: jetstream.LimitsPolicy,
		Discard: jetstream.DiscardNew, AllowDirect: s.direct}
	if s.logs, err = js.CreateOrUpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("jetstream: stream %s: %w", s.stream, err)
	}
	return nil
}

// bucket creates or updates a KV bucket. With replicas, direct gets are
// turned off on its stream: a follower may answer a direct get with a
// value older than one already acknowledged, and a revision read back
// must never go backwards; the leader answers every read instead.
func (s *Store) bucket(ctx context.Context, c jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := s.js.CreateOrUpdateKeyValue(ctx, c)
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

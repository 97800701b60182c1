package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"adhost/store"
)

// The operator endpoint of a running host: HTTP over a Unix socket in the
// data directory, for the commands that run beside it (status, reload,
// qualify, plugins list). A socket rather than a loopback port behind a
// token grant, because:
//
//   - who may use it is who may read the data directory: the store
//     refuses a directory that group or others can enter or change
//     (store.ErrUnsafe), and the socket itself is mode 0600 — the
//     operator is whoever owns the host's files, as with the store, with
//     no token to configure, rotate or leak;
//   - it is never reachable over the network, whatever server.listen is;
//   - a command finds it from the configuration alone (store.path).
//
// Badger lets one process open the store, so a command that would write it
// (qualify's report) or read it (plugins list) asks the host through the
// socket when the host holds it, and opens the store itself otherwise.
const operatorSocket = "adhost.sock"

// OperatorSocketPath is the operator socket of a host whose store is dir.
func OperatorSocketPath(dir string) string { return filepath.Join(dir, operatorSocket) }

// maxSocketPath is the longest Unix socket path Linux and macOS accept.
const maxSocketPath = 104

// OperatorInfo is GET /operator/v1/status.
type OperatorInfo struct {
	PID       int            `json:"pid"`
	Version   cliVersionInfo `json:"version"`
	Config    string         `json:"config"`
	StartedAt time.Time      `json:"startedAt"`
	// Reloads counts configurations applied since start (0: the one it
	// started with).
	Reloads int        `json:"reloads"`
	Status  HostStatus `json:"status"`
}

// operatorServer serves the operator endpoint.
type operatorServer struct {
	store  *store.Store
	info   func() OperatorInfo
	reload func(ctx context.Context) error // nil: reload unsupported
	log    *slog.Logger
}

var digestPath = regexp.MustCompile(`^/operator/v1/qualifications/([0-9a-f]{64})(/latest)?$`)

func (o *operatorServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch m := digestPath.FindStringSubmatch(r.URL.Path); {
	case r.URL.Path == "/operator/v1/status" && r.Method == http.MethodGet:
		b, _ := json.Marshal(o.info())
		w.Write(b)
	case r.URL.Path == "/operator/v1/reload" && r.Method == http.MethodPost:
		if o.reload == nil {
			operatorError(w, http.StatusNotImplemented, "reload is not supported by this host")
			return
		}
		if err := o.reload(r.Context()); err != nil {
			operatorError(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
		w.Write([]byte(`{"reloaded":true}`))
	case m != nil && m[2] == "" && r.Method == http.MethodPut:
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil || !json.Valid(body) {
			operatorError(w, http.StatusBadRequest, "the report is not JSON")
			return
		}
		if err := o.store.PutQualification(r.Context(), m[1], time.Now(), body); err != nil {
			o.log.Warn("operator: storing a qualification report failed", "err", err)
			operatorError(w, http.StatusInternalServerError, "the report was not stored")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case m != nil && m[2] != "" && r.Method == http.MethodGet:
		q, err := o.store.LatestQualification(r.Context(), m[1])
		if errors.Is(err, store.ErrNotFound) {
			operatorError(w, http.StatusNotFound, "no qualification report for this digest")
			return
		}
		if err != nil {
			operatorError(w, http.StatusInternalServerError, "the store could not be read")
			return
		}
		b, _ := json.Marshal(operatorQualification{Created: q.Created, Report: q.Report})
		w.Write(b)
	default:
		operatorError(w, http.StatusNotFound, "no such operator endpoint")
	}
}

type operatorQualification struct {
	Created time.Time       `json:"created"`
	Report  json.RawMessage `json:"report"`
}

func operatorError(w http.ResponseWriter, status int, msg string) {
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Write(b)
}

// listenOperator creates the socket (mode 0600) in dir. A socket left by a
// host that was killed is replaced; one a live host answers on is not (the
// store lock makes that impossible anyway, but the check costs nothing).
func listenOperator(dir string) (net.Listener, error) {
	path := OperatorSocketPath(dir)
	if len(path) >= maxSocketPath {
		return nil, fmt.Errorf("operator socket %s: path longer than %d bytes (choose a shorter store.path)", path, maxSocketPath-1)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("operator socket %s: another adhost answers on it", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("operator socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("operator socket: %w", err)
	}
	// Listen creates the socket with the process umask; restrict it
	// before anyone can be told it exists.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("operator socket %s: %w", path, err)
	}
	return ln, nil
}

// serveOperator serves o on ln until ctx ends, then removes the socket.
func serveOperator(ctx context.Context, ln net.Listener, o *operatorServer) {
	hs := &http.Server{Handler: o, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		o.log.Warn("operator endpoint stopped", "err", err)
	}
}

// operatorClient talks to the operator socket of the host holding dir.
type operatorClient struct {
	hc   *http.Client
	path string
}

// dialOperator returns a client of the host holding the store dir, or an
// error when no host answers there.
func dialOperator(dir string) (*operatorClient, error) {
	path := OperatorSocketPath(dir)
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("no running adhost answers on %s", path)
	}
	c.Close()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &operatorClient{hc: &http.Client{Transport: tr, Timeout: 5 * time.Minute}, path: path}, nil
}

// do sends one request; a non-2xx answer is an error carrying the host's
// message.
func (c *operatorClient) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://adhost"+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("operator socket %s: %w", c.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return &operatorRefusal{status: resp.StatusCode, msg: e.Error}
		}
		return fmt.Errorf("operator socket: HTTP %d", resp.StatusCode)
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

// operatorRefusal is the host's answer to a request it refused.
type operatorRefusal struct {
	status int
	msg    string
}

func (e *operatorRefusal) Error() string { return e.msg }
